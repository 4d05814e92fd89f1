# SPDX-License-Identifier: GPL-2.0
"""``serve``'s netconsole receiver: its own threads, sockets and database
connection, beside the netoops receive loop and never in its way.

Each socket is drained by a C receive thread in raw mode (rx.py: recvmmsg
into a ring, every datagram passed on) where it is built, else read here.
The receiving thread turns datagrams into lines (netconsole.Streams) and
every ``flush_interval`` seconds hands them, with a snapshot of the streams
they touched and the counters, to the writing thread, which stores each
batch in one transaction.  SQLite does its work without the interpreter
lock, so parsing and storing run on two CPUs.  If the database refuses,
the batches wait (up to ``max_pending`` lines, the oldest dropped and
counted beyond) and the write is tried again every ``flush_interval``.
"""

from __future__ import annotations

import selectors
import socket
import sqlite3
import threading
import time
from collections import deque
from typing import Any, Callable

from . import db, ncstore, rx
from .netconsole import Line, Streams

FLUSH_INTERVAL = 0.2
MAX_PENDING = 1_000_000
_RECV = 65536
_PACKET = 1413              # what the C thread reads of a datagram (NRX_BUF)
_Batch = tuple[list[Line], list[tuple[Any, ...]], dict[str, int]]


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
        self._handed = dict.fromkeys(self.stats, 0)     # counts passed to the writer
        self._mu = threading.Lock()     # the stats and the queue, between the threads
        self._cv = threading.Condition(self._mu)
        self._queue: deque[_Batch] = deque()
        self._queued_lines = 0
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
        self._lines: list[Line] = []    # parsed, not yet handed to the writer
        self._stop = False
        self._writer_stop = False
        self._give_up_at = 0.0
        self._told_unwritten = False
        self._inflight: list[Line] | None = None    # the batch being written
        self._failing = False
        self._thread = threading.Thread(target=self._run, name="netoops-netconsole",
                                        daemon=True)
        self._writer = threading.Thread(target=self._writing, name="netoops-nc-write",
                                        daemon=True)

    def start(self) -> None:
        self._writer.start()
        self._thread.start()

    def counters(self) -> dict[str, int]:
        with self._mu:
            return dict(self.stats)

    @property
    def unsaved(self) -> int:
        """Lines received and not yet in the database."""
        with self._mu:
            return len(self._lines) + self._queued_lines

    # -- the receiving thread -------------------------------------------------
    def _run(self) -> None:
        next_flush = time.monotonic() + self.flush_interval
        while not self._stop:
            timeout = max(0.0, next_flush - time.monotonic())
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
                self._expire(time.time())
                self._hand_over()
                next_flush = time.monotonic() + self.flush_interval
        self._finish()

    def _take(self, receiver: rx.CReceiver) -> None:
        wall = time.time()
        feed = self.streams.feed
        out = self._lines
        with self._mu:
            for buf, host, port in receiver.take():
                if type(buf) is bytes:          # never a group in raw mode
                    if len(buf) > _PACKET:      # longer than the C thread reads
                        buf = buf[:_PACKET]
                        self.stats["netconsole_cut"] += 1
                    out += feed(buf, host, port, wall)

    def _read(self, sock: socket.socket) -> None:
        wall = time.time()
        feed = self.streams.feed
        out = self._lines
        with self._mu:
            for _ in range(512):
                try:
                    data, addr = sock.recvfrom(_RECV)
                except (BlockingIOError, InterruptedError):
                    return
                except OSError as err:
                    self.log(f"netconsole: receive error: {err}")
                    return
                out += feed(data, *rx.source_of(addr), wall)

    def _expire(self, now: float) -> None:
        with self._mu:
            self._lines += self.streams.expire(now)

    def _hand_over(self) -> None:
        """Queue what was parsed since the last time for the writer."""
        with self._mu:
            changed = self.streams.take_changed()
            if not self._lines and not changed and self.stats == self._handed:
                return
            lines, self._lines = self._lines, []
            delta: dict[str, int] = {}      # filled in below, after any drops
            self._queue.append((lines, [ncstore.stream_row(s) for s in changed], delta))
            self._queued_lines += len(lines)
            over = self._queued_lines - self.max_pending
            for batch in self._queue:          # the database lags: drop the oldest
                if over <= 0:
                    break
                old = batch[0]
                if old is self._inflight:       # being written now
                    continue
                cut = min(over, len(old))
                del old[:cut]
                self._queued_lines -= cut
                self.stats["netconsole_store_dropped"] += cut
                over -= cut
            delta.update((k, v - self._handed.get(k, 0)) for k, v in self.stats.items())
            self._handed = dict(self.stats)
            self._cv.notify()

    def _finish(self) -> None:
        """Read what the receive threads hold, then hand everything over."""
        end = time.monotonic() + 2.0
        for receiver in self.receivers:
            receiver.halt()
        for receiver in self.receivers:
            wall = time.time()
            with self._mu:
                for buf, host, port in receiver.finish(end):
                    if type(buf) is bytes:
                        self._lines += self.streams.feed(buf, host, port, wall)
            receiver.stop()
        for sock in self.socks:
            if not any(r.sock is sock for r in self.receivers):
                self._read(sock)
        self._expire(float("inf"))
        self._hand_over()

    # -- the writing thread -----------------------------------------------------
    def _writing(self) -> None:
        while True:
            with self._cv:
                while not self._queue and not self._writer_stop:
                    self._cv.wait()
                if not self._queue:
                    return
                lines, rows, delta = self._queue[0]
                self._inflight = lines
            try:
                ncstore.write(self.conn, lines, rows, delta)
            except (ValueError, OverflowError, TypeError) as err:
                # not the database: this batch can never be written
                with self._mu:
                    self.stats["netconsole_store_dropped"] += len(lines)
                    self._queue.popleft()
                    self._queued_lines -= len(lines)
                    self._inflight = None
                self.log(f"netconsole: a batch of {len(lines)} line(s) could not be "
                         f"written ({type(err).__name__}: {err}); dropped")
                continue
            except db.ERRORS as err:
                with self._mu:
                    self.stats["netconsole_store_errors"] += 1
                if not self._failing:
                    self.log(f"netconsole: database error: {err}; lines kept in memory "
                             f"(up to {self.max_pending}) and written when it works again")
                self._failing = True
                with self._cv:
                    if self._writer_stop and self._give_up_at < time.monotonic():
                        return
                    self._cv.wait(self.flush_interval)
                continue
            if self._failing:
                self.log("netconsole: database writable again")
            self._failing = False
            with self._mu:
                self._queue.popleft()           # only this thread takes batches off
                self._queued_lines -= len(lines)
                self._inflight = None

    # -- stopping ---------------------------------------------------------------
    def stop(self) -> None:
        """Stop receiving, and writing once what was received is written (or
        the database has refused it for 5 s)."""
        if self._thread.is_alive():
            self._stop = True
            try:
                self._wake_w.send(b"x")
            except OSError:
                pass
            self._thread.join(15)
        if self._writer.is_alive():
            with self._cv:
                self._writer_stop = True
                self._give_up_at = time.monotonic() + 5.0
                self._cv.notify()
            self._writer.join(15)
        if self._queued_lines and not self._told_unwritten:
            self._told_unwritten = True
            self.log(f"netconsole: {self._queued_lines} line(s) not written: the database "
                     "refused them")

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

    def summary(self) -> str:
        """The counters as one log line."""
        st = self.counters()
        return (f"netconsole: datagrams {st['netconsole_datagrams']}, lines "
                f"{st['netconsole_lines']}, lost {st['netconsole_lost']} (late "
                f"{st['netconsole_late']}), duplicates {st['netconsole_duplicates']}, cut "
                f"{st['netconsole_cut']}, streams begun {st['netconsole_boots']}; unsaved "
                f"{self.unsaved}, database errors {st['netconsole_store_errors']}, "
                f"dropped {st['netconsole_store_dropped']}")
