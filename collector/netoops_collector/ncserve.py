# SPDX-License-Identifier: GPL-2.0
"""``serve``'s netconsole receiver: its own thread, sockets and database
connection, beside the netoops receive loop and never in its way.

Each socket is drained by a C receive thread in raw mode (rx.py: recvmmsg
into a ring, every datagram passed on) where it is built, else read here.
Datagrams become lines (netconsole.Streams) that are written in one
transaction every ``flush_interval`` seconds, with the streams they touched
and the counters.  If the database refuses, the lines wait in memory (up
to ``max_pending`` of them, the oldest dropped and counted beyond) and the
write is tried again at the next interval.
"""

from __future__ import annotations

import selectors
import socket
import sqlite3
import threading
import time
from typing import Callable

from . import ncstore, rx
from .netconsole import Line, Streams

FLUSH_INTERVAL = 0.2
MAX_PENDING = 1_000_000
_RECV = 65536


class NetconsoleReceiver:
    def __init__(self, socks: list[socket.socket], connect: Callable[[], sqlite3.Connection],
                 log: Callable[[str], None], use_c: bool, ring_bytes: int,
                 flush_interval: float = FLUSH_INTERVAL, max_pending: int = MAX_PENDING
                 ) -> None:
        self.socks = socks
        self.log = log
        self.flush_interval = flush_interval
        self.max_pending = max_pending
        self.conn = connect()
        ncstore.create(self.conn)
        first = ncstore.next_stream_id(self.conn)
        ids = iter(range(first, 1 << 62))
        self.streams = Streams(lambda: next(ids), ncstore.latest_streams(self.conn))
        self.stats = self.streams.stats
        self.stats.update(netconsole_store_errors=0, netconsole_store_dropped=0)
        self._written = dict.fromkeys(self.stats, 0)
        self._mu = threading.Lock()         # stats, for readers in other threads
        self.receivers: list[rx.CReceiver] = []
        self.sel = selectors.DefaultSelector()
        for sock in socks:
            sock.setblocking(False)
            receiver = None
            if use_c:
                try:
                    receiver = rx.CReceiver(sock, ring_bytes, 0)
                except OSError as err:
                    log(f"netconsole: C receiver not started ({err}); reading from Python")
            if receiver is not None:
                self.receivers.append(receiver)
            self.sel.register(receiver or sock, selectors.EVENT_READ)
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self.sel.register(self._wake_r, selectors.EVENT_READ)
        self._pending: list[Line] = []
        self._stop = False
        self._failing = False
        self.last_write = 0.0
        self._thread = threading.Thread(target=self._run, name="netoops-netconsole",
                                         daemon=True)

    def start(self) -> None:
        self._thread.start()

    def counters(self) -> dict[str, int]:
        with self._mu:
            return dict(self.stats)

    # -- the thread ----------------------------------------------------------
    def _run(self) -> None:
        next_flush = time.monotonic() + self.flush_interval
        while not self._stop:
            now = time.monotonic()
            timeout = max(0.0, next_flush - now)
            for key, _ in self.sel.select(timeout):
                obj = key.fileobj
                if obj is self._wake_r:
                    try:
                        self._wake_r.recv(64)
                    except BlockingIOError:
                        pass
                elif isinstance(obj, rx.CReceiver):
                    obj.drain()
                    self._take(obj)
                else:
                    self._read(obj)     # type: ignore[arg-type]
            if time.monotonic() >= next_flush:
                self._expire()
                self._flush()
                next_flush = time.monotonic() + self.flush_interval
        self._finish()

    def _take(self, receiver: rx.CReceiver) -> None:
        wall = time.time()
        feed = self.streams.feed
        out = self._pending
        with self._mu:
            for buf, host, port in receiver.take():
                if type(buf) is not bytes:      # never in raw mode
                    continue
                out += feed(buf, host, port, wall)

    def _read(self, sock: socket.socket) -> None:
        wall = time.time()
        feed = self.streams.feed
        out = self._pending
        with self._mu:
            for _ in range(512):
                try:
                    data, addr = sock.recvfrom(_RECV)
                except (BlockingIOError, InterruptedError):
                    return
                except OSError as err:
                    self.log(f"netconsole: receive error: {err}")
                    return
                host = addr[0][7:] if addr[0].startswith("::ffff:") and "." in addr[0] \
                    else addr[0]
                out += feed(data, host, addr[1], wall)

    def _expire(self) -> None:
        with self._mu:
            self._pending += self.streams.expire(time.time())

    def _flush(self) -> None:
        with self._mu:
            changed = self.streams.changed
            if not self._pending and not changed and self.stats == self._written:
                return
            lines, streams = self._pending, list(changed.values())
            delta = {k: v - self._written.get(k, 0) for k, v in self.stats.items()}
        try:
            ncstore.write(self.conn, lines, streams, delta)
        except sqlite3.Error as err:
            with self._mu:
                self.stats["netconsole_store_errors"] += 1
                over = len(self._pending) - self.max_pending
                if over > 0:
                    del self._pending[:over]
                    self.stats["netconsole_store_dropped"] += over
            if not self._failing:
                self.log(f"netconsole: database error: {err}; lines kept in memory "
                         f"(up to {self.max_pending}) and written when it works again")
            self._failing = True
            return
        if self._failing:
            self.log("netconsole: database writable again")
        self._failing = False
        self.last_write = time.time()
        with self._mu:
            del self._pending[:len(lines)]
            for st in streams:
                if changed.get(st.id) is st:
                    del changed[st.id]
            for k, v in delta.items():
                self._written[k] = self._written.get(k, 0) + v

    def _finish(self) -> None:
        """Read what the receive threads hold, then write everything."""
        end = time.monotonic() + 2.0
        for receiver in self.receivers:
            receiver.halt()
        for receiver in self.receivers:
            wall = time.time()
            with self._mu:
                for buf, host, port in receiver.finish(end):
                    if type(buf) is bytes:
                        self._pending += self.streams.feed(buf, host, port, wall)
            receiver.stop()
        for sock in self.socks:
            if not any(r.sock is sock for r in self.receivers):
                self._read(sock)
        with self._mu:
            self._pending += self.streams.expire(float("inf"))
        for _ in range(10):
            self._flush()
            if not self._failing:
                break
            time.sleep(0.2)

    def stop(self) -> None:
        """Stop the thread after it wrote what it has (within a bound)."""
        if not self._thread.is_alive():
            return
        self._stop = True
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        self._thread.join(15)

    def close(self) -> None:
        """Stop (if running), then free the receive threads, sockets, connection."""
        self.stop()
        for receiver in self.receivers:
            receiver.stop()
        self.receivers.clear()
        for sock in self.socks:
            sock.close()
        self.sel.close()
        self._wake_r.close()
        self._wake_w.close()
        self.conn.close()

    @property
    def pending(self) -> list[Line]:
        return self._pending

    def summary(self) -> str:
        """The counters as one log line."""
        st = self.counters()
        return (f"netconsole: datagrams {st['netconsole_datagrams']}, lines "
                f"{st['netconsole_lines']}, lost {st['netconsole_lost']} (late "
                f"{st['netconsole_late']}), duplicates {st['netconsole_duplicates']}, cut "
                f"{st['netconsole_cut']}, streams begun {st['netconsole_boots']}; unsaved "
                f"{len(self._pending)}, database errors {st['netconsole_store_errors']}, "
                f"dropped {st['netconsole_store_dropped']}")
