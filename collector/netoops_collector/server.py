# SPDX-License-Identifier: GPL-2.0
"""``netoops-collector serve``: the UDP receive loop.

One thread: a selector over the UDP sockets, a wake-up pipe for signals and
the reassembler's quiet-timeout deadline.  Datagrams are drained in batches;
the dumps a batch finalises are analysed and written in one transaction with
the stats counted so far.  SIGINT/SIGTERM stop the loop; what is still in
the socket buffers is read, what is still in flight is finalised (partial if
need be) and stored before the process exits.
"""

from __future__ import annotations

import errno
import selectors
import signal
import socket
import sqlite3
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, TextIO

from . import proto
from .reassembly import Dump, Limits, Reassembler, ranges
from .report import Report, analyse
from .store import Store

DEFAULT_RCVBUF = 8 << 20
_BATCH = 512             # datagrams read from one socket per wake-up
_STORE_BUDGET = 0.05     # seconds of storing per round once the sockets are drained
_MAX_READY = 64          # finalised dumps waiting beyond this are stored regardless
# One byte more than a packet: a longer datagram reads as oversize, and
# MSG_TRUNC says it was longer still (never a cut datagram taken as whole).
_RECV_SIZE = proto.PACKET_SIZE + 1
_SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)


class ListenError(Exception):
    """A --listen value that is malformed or cannot be bound."""


def parse_listen(spec: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[V6]:PORT`` or ``:PORT`` (all addresses) -> (host, port)."""
    if spec.startswith("["):
        host, sep, port = spec[1:].partition("]:")
        if not sep:
            raise ListenError(f"{spec!r}: expected [ADDRESS]:PORT")
    else:
        host, sep, port = spec.rpartition(":")
        if not sep or ":" in host:
            raise ListenError(f"{spec!r}: expected HOST:PORT or [V6ADDRESS]:PORT")
    try:
        number = int(port)
    except ValueError:
        raise ListenError(f"{spec!r}: bad port {port!r}") from None
    if not 0 <= number <= 65535:
        raise ListenError(f"{spec!r}: port out of range")
    return host, number


def _set_rcvbuf(sock: socket.socket, size: int) -> int:
    """Ask for ``size`` bytes of receive buffer; return what the kernel gave."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, _SO_RCVBUFFORCE, size)  # needs CAP_NET_ADMIN
    except OSError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, size)  # capped by rmem_max
    return sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)


def open_socket(host: str, port: int) -> tuple[socket.socket, str]:
    """Bind one UDP socket.

    An empty host (``:PORT``) means every IPv4 and IPv6 address: one
    dual-stack socket on '::' with IPV6_V6ONLY off, or '0.0.0.0' where IPv6
    is not available.  An IPv6 host, '::' included, binds IPv6 only, so
    ``--listen 0.0.0.0:P --listen [::]:P`` works too.
    """
    if host in ("", "*"):
        try:
            sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        except OSError:
            host = "0.0.0.0"
        else:
            try:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
                sock.bind(("::", port))
                return sock, "dual-stack"
            except OSError as err:
                sock.close()
                if err.errno == errno.EADDRINUSE:
                    raise
                host = "0.0.0.0"
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM,
                                   flags=socket.AI_PASSIVE | socket.AI_NUMERICSERV)
    except socket.gaierror as err:
        raise ListenError(f"{host}: {err.strerror}") from None
    family, _, _, _, addr = infos[0]
    sock = socket.socket(family, socket.SOCK_DGRAM)
    if family == socket.AF_INET6:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    try:
        sock.bind(addr)
    except OSError:
        sock.close()
        raise
    return sock, "IPv6" if family == socket.AF_INET6 else "IPv4"


def _show(addr: tuple) -> str:  # type: ignore[type-arg]
    host, port = addr[0], addr[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _source(addr: tuple) -> tuple[str, int]:  # type: ignore[type-arg]
    host = addr[0]
    if host.startswith("::ffff:") and "." in host:
        host = host[7:]
    return host, addr[1]


@dataclass
class ServeConfig:
    db: Path
    listen: list[str] = field(default_factory=list)
    limits: Limits = field(default_factory=Limits)
    rcvbuf: int = DEFAULT_RCVBUF
    stats_interval: float = 2.0


def describe(dump: Dump, rep: Report, dump_no: int) -> str:
    """The one log line written for each stored dump."""
    state = (f"complete {dump.packet_count}/{dump.packet_count}" if dump.complete else
             f"PARTIAL {dump.packets_received}/{dump.packet_count} "
             f"(missing packet_no {ranges(dump.missing)}; {dump.finalised_by})")
    kind = "soft" if dump.type == proto.TYPE_SOFT else ("panic" if rep.panic else "oops")
    return (f"dump {dump_no} from {dump.source}:{dump.port} boot {dump.boot_id} "
            f"id {dump.dump_id}: {kind}, {state}, {dump.kernel_version or '?'}: {rep.title}")


def safe_analyse(dump: Dump) -> Report:
    try:
        return analyse(dump.log, soft=dump.type == proto.TYPE_SOFT)
    except Exception as err:  # a parser bug must not lose the dump
        return Report(f"unparsed log (collector error: {type(err).__name__})",
                      None, None, None, signature="unparsed")


class Server:
    def __init__(self, cfg: ServeConfig, err: TextIO = sys.stderr,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.cfg = cfg
        self.err = err
        self.clock = clock
        self.reasm = Reassembler(cfg.limits, clock=clock)
        self.store = Store(cfg.db)
        self.sel = selectors.DefaultSelector()
        self.socks: list[socket.socket] = []
        self._flushed = dict(self.reasm.stats)
        self._pending: list[tuple[Dump, Report]] = []     # analysed, not yet stored
        self._ready: deque[Dump] = deque()                  # finalised, not yet analysed
        self._sources: dict[tuple, tuple[str, int]] = {}  # type: ignore[type-arg]
        self._stop = False
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)

    def log(self, msg: str) -> None:
        self.err.write(f"netoops-collector: {msg}\n")
        self.err.flush()

    # -- setup -----------------------------------------------------------
    def bind(self) -> None:
        specs = self.cfg.listen or [f":{proto.PORT}"]
        for spec in specs:
            host, port = parse_listen(spec)
            try:
                sock, how = open_socket(host, port)
            except OSError as err:
                raise ListenError(f"cannot listen on {spec}: {err.strerror or err}") from None
            got = _set_rcvbuf(sock, self.cfg.rcvbuf)
            sock.setblocking(False)
            self.socks.append(sock)
            self.sel.register(sock, selectors.EVENT_READ)
            note = "" if got >= self.cfg.rcvbuf else \
                " (below the request: raise net.core.rmem_max, or run with CAP_NET_ADMIN)"
            self.log(f"listening on {_show(sock.getsockname())} ({how}), receive buffer "
                     f"{got} bytes (asked {self.cfg.rcvbuf}){note}")
        self.sel.register(self._wake_r, selectors.EVENT_READ)

    def _on_signal(self, signum: int, _frame: object) -> None:
        self._stop = True

    # -- loop ------------------------------------------------------------
    def run(self) -> int:
        """Serve until SIGINT/SIGTERM.

        Reading comes first: while datagrams are waiting in a socket, only
        one finalised dump is analysed and stored between two read batches,
        so a burst lands in memory rather than overflowing the kernel
        buffer; once the sockets are drained the rest is stored.
        """
        self.bind()
        old = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        old_fd = signal.set_wakeup_fd(self._wake_w.fileno(), warn_on_full_buffer=False)
        self.log(f"database {self.cfg.db}; quiet timeout {self.cfg.limits.quiet_timeout:g}s")
        next_stats = self.clock() + self.cfg.stats_interval
        try:
            while not self._stop:
                now = self.clock()
                timeout = 0.0
                if not self._ready:
                    deadline = next_stats
                    expiry = self.reasm.next_deadline()
                    if expiry is not None and expiry < deadline:
                        deadline = expiry
                    timeout = max(0.0, deadline - now)
                backlog = False
                for key, _ in self.sel.select(timeout):
                    if key.fileobj is self._wake_r:
                        self._drain_wakeups()
                    elif self._read(key.fileobj) == _BATCH:  # type: ignore[arg-type]
                        backlog = True
                now = self.clock()
                self._ready += self.reasm.expire(now)
                if self._ready or now >= next_stats:
                    self._store(0.0 if backlog else _STORE_BUDGET)
                if now >= next_stats:
                    next_stats = now + self.cfg.stats_interval
            # Shutdown: take what the kernel still holds, then finalise the rest.
            for sock in self.socks:
                while self._read(sock):
                    pass
            self._ready += self.reasm.flush()
            self._store(everything=True)
        finally:
            signal.set_wakeup_fd(old_fd)
            for s, handler in old.items():
                signal.signal(s, handler)
            self.close()
        st = self.reasm.stats
        self.log(f"stopped: {st['packets']} packets, {st['dumps_complete']} complete and "
                 f"{st['dumps_partial']} partial dumps this run")
        return 0

    def _drain_wakeups(self) -> None:
        try:
            while self._wake_r.recv(512):
                pass
        except BlockingIOError:
            pass

    def _read(self, sock: socket.socket) -> int:
        """Read up to a batch of datagrams; returns how many were read."""
        feed = self.reasm.feed
        ready = self._ready
        sources = self._sources
        now = self.clock()
        n = 0
        try:
            for n in range(1, _BATCH + 1):
                buf, _, flags, addr = sock.recvmsg(_RECV_SIZE)
                if flags & socket.MSG_TRUNC:
                    buf += b"\0"      # cut: longer than a packet, oversize
                src = sources.get(addr)
                if src is None:
                    if len(sources) > 4096:
                        sources.clear()
                    src = sources[addr] = _source(addr)
                got = feed(buf, src[0], src[1], now)
                if got:
                    ready.extend(got)
        except (BlockingIOError, InterruptedError):
            n -= 1
        except OSError as err:  # e.g. ICMP errors reported on the socket
            self.log(f"receive error: {err}")
            n -= 1
        return n

    def _store(self, budget: float = 0.0, everything: bool = False) -> None:
        """Analyse and store finalised dumps: at least one, more within ``budget``
        seconds (all of them if ``everything``), plus the stats so far."""
        start = self.clock()
        items: list[tuple[Dump, Report]] = []
        ready = self._ready
        while ready and (everything or not items or len(ready) > _MAX_READY
                         or self.clock() - start < budget):
            dump = ready.popleft()
            items.append((dump, safe_analyse(dump)))
        self._commit(items)

    def _commit(self, items: list[tuple[Dump, Report]]) -> None:
        """Store analysed dumps with the stats so far, in one transaction.

        If the database fails (disk full, locked by someone else), the dumps
        are kept and retried at the next commit, so none is lost to it.
        """
        stats = self.reasm.stats
        delta = {k: v - self._flushed.get(k, 0) for k, v in stats.items()}
        self._pending += items
        if not self._pending and not any(delta.values()):
            return
        items, self._pending = self._pending, []
        try:
            ids = self.store.save(items, delta)
        except sqlite3.Error as err:
            self._pending = items
            self.log(f"database error, {len(items)} dump(s) kept for a retry: {err}")
            return
        self._flushed = dict(stats)
        if items:   # one write for the batch: each line is still one line
            self.err.write("".join(f"netoops-collector: {describe(d, r, n)}\n"
                                   for (d, r), n in zip(items, ids)))
            self.err.flush()

    def close(self) -> None:
        for sock in self.socks:
            self.sel.unregister(sock)
            sock.close()
        self.socks.clear()
        self.sel.close()
        self._wake_r.close()
        self._wake_w.close()
        self.store.close()
