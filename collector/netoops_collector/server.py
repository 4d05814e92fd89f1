# SPDX-License-Identifier: GPL-2.0
"""``netoops-collector serve``: the UDP receive loop.

Three parts.  The C receive thread per socket (rx.py; Python reads the
socket itself if it is not built) drains the socket into a ring.  The main
thread takes from the ring, reassembles, and appends the dumps a round
finalises to the journal (journal.py), synced before they go on: from then
on a dump survives a crash of the collector or the machine.  The storing
thread analyses them and writes them to SQLite in transactions with the
stats counted so far; it waits while datagrams keep coming, copies the C
threads drop included (until _QUIET seconds pass without one, or
_MAX_READY dumps wait), so a burst is received and made durable first and
analysed after.  A dump repaired by late chunks replaces
the row it was stored as.

Nothing in storage stops receiving: a database error keeps the dumps in
memory and is retried with a growing delay (reported once per streak); a
dump that cannot be stored at all, or the dumps beyond a memory bound while
the database is down, go to a spool file beside the database (JSON lines),
stored once the database takes writes again, or at the next start.
SIGINT/SIGTERM stop the loop within a bound: what the socket buffers hold
is read (at most a buffer's worth), what is in flight is finalised (partial
if need be) and stored, or spooled if the database does not take it in
time.

Datagrams the kernel drops because the receive buffer is full are counted
(``SO_RXQ_OVFL``) as ``kernel_drops``; the counters are logged every
``log_interval`` seconds when they changed.
"""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import json
import os
import selectors
import signal
import socket
import sqlite3
import sys
import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable, TextIO

from . import db, ncstore, proto, rx, views
from .ncserve import NetconsoleReceiver
from .netconsole import DEFAULT_PORT as NETCONSOLE_PORT
from .rx import source_of as _source
from .alerts import AlertConfig, Alerts
from .journal import Journal, JournalError, numbered
from .metrics import MetricsServer, render, write_textfile
from .reassembly import Dump, Limits, Reassembler, SourceBudget, format_ranges
from .report import Report, analyse
from .retention import Retention, prune
from .store import Store, StoreError, display, get_dump, known_signatures, local_base, \
    open_readonly

DEFAULT_RCVBUF = 32 << 20
# What the kernel charges a 1412-byte datagram in a receive buffer (skb
# truesize, measured on loopback; a NIC's may be larger).
_TRUESIZE = 2304
_DUMP_PACKETS = 128 * proto.RETRANSMIT_COUNT     # a 128 KiB log, three copies
_BATCH = 512             # datagrams read from one socket per wake-up
_STORE_BUDGET = 0.05     # seconds of analysing per transaction
_MAX_READY = 512         # finalised dumps waiting beyond this are analysed regardless
_QUIET = 0.02            # seconds without a datagram before analysis goes on
_SWITCH = 0.0005         # the interpreter's thread switch interval while serving
# One byte more than a packet: a longer datagram reads as oversize, and
# MSG_TRUNC says it was longer still (never a cut datagram taken as whole).
_RECV_SIZE = proto.PACKET_SIZE + 1
_SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)
_SO_RXQ_OVFL = getattr(socket, "SO_RXQ_OVFL", 40)
_ANC_SIZE = socket.CMSG_SPACE(4)
_BUSY_TIMEOUT = 0.5      # seconds a write waits for another writer's lock
_RETRY_FIRST, _RETRY_MAX = 1.0, 30.0    # backoff after a database error
_MAX_PENDING_BYTES = 64 << 20           # unsaved logs kept in memory, then spooled
_SHUTDOWN_READ = 2.0     # seconds of reading what the sockets hold at shutdown
_SHUTDOWN_STORE = 5.0    # seconds of retrying the database at shutdown
_SHUTDOWN_LOG = 2.0      # seconds of waiting for a packet log to be synced at shutdown
_MAX_ROWS = 1 << 16      # dump uids whose stored row is remembered (for repairs)
_NICER = 10              # the main thread's nice value over the receive threads


def keep_freed_memory() -> None:
    """Have glibc keep freed memory for reuse rather than return it.

    By default a block over 128 KiB is mmap'd and unmapped again, and the
    heap is trimmed, so every burst pays page faults afresh for its copies
    of packets, groups and logs (costly in a VM).  With these settings the
    memory a burst needed stays with the process for the next one."""
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(-3, 32 << 20)     # M_MMAP_THRESHOLD: its largest value
        libc.mallopt(-1, 512 << 20)    # M_TRIM_THRESHOLD
    except (OSError, AttributeError):  # not glibc
        pass


def _iso_us(t: float) -> str:
    """Wall time ``t`` as ISO 8601 UTC with microseconds ("never" for 0)."""
    if not t:
        return "never"
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def escape(text: str) -> str:
    """Text from a datagram made safe for one line of a terminal or a log."""
    return views.escape(text, keep="")


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


@dataclass
class ServeConfig:
    db: Path
    listen: list[str] = field(default_factory=list)
    limits: Limits = field(default_factory=Limits)
    rcvbuf: int = DEFAULT_RCVBUF
    stats_interval: float = 2.0
    log_interval: float = 60.0
    # "c": the C receive thread (rx.py), "python": read the sockets here,
    # "auto": the C thread if it is built.
    receiver: str = "auto"
    ring_bytes: int = rx.DEFAULT_RING
    # Dumps stored per source address: up to N at once, and N per window
    # after that (token buckets); the rest are counted, not stored.  Dumps
    # without crash text (forged or header-only datagrams) have the smallest
    # share, partial dumps the next; a crash-looping machine stays far below.
    junk_per_source: int = 16
    partial_per_source: int = 64
    dumps_per_source: int = 256
    budget_window: float = 3600.0
    # Log a line each time finalised dumps are made durable (benchmarks).
    log_journal: bool = False
    # What is kept (retention.py), applied by the storing thread this often
    retention: Retention = field(default_factory=Retention)
    prune_interval: float = 60.0
    # Who is told of a new crash signature (alerts.py)
    alerts: AlertConfig = field(default_factory=AlertConfig)
    # Prometheus metrics (metrics.py): an HTTP endpoint, a textfile
    metrics: tuple[str, int] | None = None
    metrics_textfile: Path | None = None
    # Netconsole (ncserve.py): where to listen; None: the default port, and
    # if it is taken, netconsole is off (said in the log) and dumps go on.
    netconsole: list[str] | None = None
    netconsole_days: float | None = 30.0
    netconsole_lines: int | None = 10_000_000



def describe(dump: Dump, rep: Report, dump_no: int) -> str:
    """The one log line written for each stored dump."""
    state = (f"complete {dump.packet_count}/{dump.packet_count}" if dump.complete else
             f"PARTIAL {dump.packets_received}/{dump.packet_count} "
             f"(missing packet_no {format_ranges(dump.missing)}; {dump.finalised_by})")
    kind = "soft" if dump.type == proto.TYPE_SOFT else ("panic" if rep.panic else "oops")
    what = "repaired by late chunks: " if dump.revision else ""
    return escape(f"dump {dump_no} {what}from {dump.source}:{dump.port} boot {dump.boot_id} "
                  f"id {dump.dump_id}: {kind}, {state}, {dump.kernel_version or '?'}: "
                  f"{rep.title}")


def burst_note(rcvbuf: int, receiver: object) -> str:
    """What burst of simultaneous 128 KiB dumps the buffers hold."""
    kernel = rcvbuf // _TRUESIZE
    if receiver is None:
        return (f"the buffer holds about {kernel} packets, a burst of "
                f"{kernel // _DUMP_PACKETS} dumps of 128 KiB while Python is busy")
    ring = getattr(receiver, "ring_bytes", 0) // (proto.PACKET_SIZE + 32)
    return (f"the ring holds {ring} packets (copies are dropped before it): a burst of "
            f"{ring // 128} dumps of 128 KiB while analysis and storage lag; the buffer "
            f"{kernel} packets while the receive thread is not running")


def safe_analyse(dump: Dump) -> Report:
    try:
        return analyse(dump.log, soft=dump.type == proto.TYPE_SOFT)
    except Exception as err:  # a parser bug must not lose the dump
        return Report(f"unparsed log (collector error: {type(err).__name__})",
                      None, None, None, signature="unparsed")


def spool_path(db: Path) -> Path:
    return db.with_name(db.name + ".unsaved.jsonl")


def _dump_from_json(line: str) -> tuple[Dump, int | None]:
    """A spooled dump, and the stored row it replaces (if any)."""
    d = json.loads(line)
    dump_no = d.pop("dump_no", None)
    d["missing"] = [tuple(r) for r in d["missing"]]
    return Dump(**d), dump_no


class Server:
    def __init__(self, cfg: ServeConfig, err: TextIO = sys.stderr,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.cfg = cfg
        self.err = err
        self.clock = clock
        self.reasm = Reassembler(cfg.limits, clock=clock)
        self.stats = self.reasm.stats           # the server's counters live there too
        for name in ("kernel_drops", "dumps_junk_dropped", "dumps_rate_dropped",
                     "store_errors", "spooled", "journal_errors"):
            self.stats.setdefault(name, 0)
        self.store = Store(cfg.db, busy_timeout=_BUSY_TIMEOUT)
        if cfg.alerts.enabled:
            for name in ("hook_runs", "hook_failures", "webhook_posts", "webhook_failures",
                         "alerts_dropped"):
                self.stats.setdefault(name, 0)
        self.alerts = Alerts(cfg.alerts, known_signatures(self.store.conn), self._count,
                             self.log)
        self._reader: sqlite3.Connection | None = None    # for alerts' reports
        self._metrics: MetricsServer | None = None
        base = local_base(cfg.db)
        try:
            base.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise StoreError(f"{base.parent}: cannot create: {err.strerror}") from err
        self.spool = spool_path(base)
        self.journal = Journal(base)
        self._old_logs = self.journal.packet_logs()     # an earlier run's, to replay
        self._journal_failing = False
        self._durable = 0
        # Held by the main thread while it feeds the reassembler (whose stats
        # are the server's), by the storing thread while it counts; the
        # storing thread waits on _cv for dumps.
        self._mu = threading.RLock()
        self._cv = threading.Condition(self._mu)
        self._busy_until = 0.0      # analysis waits until then (datagrams coming)
        self._seen_packets = 0      # read by the C threads, at the storing thread's last look
        self._halt = False          # the storing thread is to return
        self._storer: threading.Thread | None = None
        # Written to the journal by the main thread, not yet synced.
        self._sync_cv = threading.Condition(self._mu)
        self._unsynced: list[Dump] = []
        self._sync_halt = False
        self._syncer: threading.Thread | None = None
        self._fresh: list[Dump] = []   # finalised this round, not yet in the journal
        # Taken whole from a C receiver whose packet log holds them: durable
        # once the log is synced past their last packet (not journaled).
        self._in_log: list[Dump] = []
        self._log_failed: set[int] = set()     # receivers whose log failure was logged
        self.sel = selectors.DefaultSelector()
        self.socks: list[socket.socket] = []
        self.receivers: list[rx.CReceiver] = []
        self._rx_seen: dict[int, dict[str, int]] = {}     # per receiver: stats folded in
        self._flushed = dict(self.stats)
        self._logged = dict(self.stats)
        # Analysed, not yet stored, by uid: a newer revision replaces an older one.
        self._pending: dict[int, tuple[Dump, Report]] = {}
        self._pending_bytes = 0
        self._ready: deque[Dump] = deque()      # durable (journal), not yet analysed
        self._rows: OrderedDict[int, int] = OrderedDict()   # uid -> stored dump id
        # Checked in this order; the first two before analysis (it costs more).
        self._budgets = [
            (SourceBudget(cfg.partial_per_source, cfg.budget_window), "dumps_rate_dropped",
             lambda d, r: not d.complete, "partial dumps"),
            (SourceBudget(cfg.dumps_per_source, cfg.budget_window), "dumps_rate_dropped",
             lambda d, r: True, "dumps"),
            (SourceBudget(cfg.junk_per_source, cfg.budget_window), "dumps_junk_dropped",
             lambda d, r: r is not None and r.signature is None,
             "dumps without crash text"),
        ]
        self._warned: OrderedDict[tuple[str, str], float] = OrderedDict()
        self._retry_at = 0.0
        self._retry_delay = 0.0
        self._spool_uid = 0
        self._sources: dict[tuple, tuple[str, int]] = {}  # type: ignore[type-arg]
        self._drops: dict[int, int] = {}                    # socket fd -> kernel count
        self._last_read = 0.0                               # wall time of the last datagram
        # Delays in the current log interval: datagram queued in the C ring
        # until Python took it, and dump finalised until it was committed.
        self._lag = {"queue": 0.0, "durable": 0.0, "store": 0.0}
        self.gauges: dict[str, float] = {}
        self._stop = False
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self.netconsole: NetconsoleReceiver | None = None
        self._nc_logged = ""

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
            self._drops[sock.fileno()] = 0
            receiver = self._receiver(sock)
            if receiver is None:
                # Python reads the kernel's drop count from each datagram;
                # the C thread asks for it once a batch (SO_MEMINFO).
                sock.setsockopt(socket.SOL_SOCKET, _SO_RXQ_OVFL, 1)
            self.sel.register(receiver or sock, selectors.EVENT_READ)
            note = "" if got >= self.cfg.rcvbuf else \
                " (below the request: raise net.core.rmem_max, or run with CAP_NET_ADMIN)"
            how += (f", C receive thread with a {self.cfg.ring_bytes >> 20} MiB ring"
                    if receiver else ", read by Python")
            self.log(f"listening on {_show(sock.getsockname())} ({how}), receive buffer "
                     f"{got} bytes (asked {self.cfg.rcvbuf}){note}; {burst_note(got, receiver)}")
        self.sel.register(self._wake_r, selectors.EVENT_READ)
        self._bind_netconsole()
        if self.receivers:
            # The receive threads keep their priority; this thread (reassembly,
            # analysis, storage) yields the CPU to them when both want it, so
            # a burst goes to the ring instead of overflowing the kernel buffer.
            tid = threading.get_native_id()
            try:
                os.setpriority(os.PRIO_PROCESS, tid,
                               min(19, os.getpriority(os.PRIO_PROCESS, tid) + _NICER))
            except OSError:
                pass

    def _bind_netconsole(self) -> None:
        """The netconsole sockets and their receiver (started by run())."""
        specs = self.cfg.netconsole
        if specs is not None and not specs:
            self.log("netconsole: not listening (netconsole = off)")
            return
        socks: list[socket.socket] = []
        for spec in specs or [f":{NETCONSOLE_PORT}"]:
            host, port = parse_listen(spec)
            try:
                sock, how = open_socket(host, port)
            except OSError as err:
                for s in socks:
                    s.close()
                if specs is None:
                    self.log(f"netconsole: cannot listen on the default {spec} "
                             f"({err.strerror or err}); netconsole reception is off "
                             "(choose a port with --netconsole-listen)")
                    return
                raise ListenError(f"cannot listen for netconsole on {spec}: "
                                  f"{err.strerror or err}") from None
            got = _set_rcvbuf(sock, self.cfg.rcvbuf)
            socks.append(sock)
            self.log(f"netconsole: listening on {_show(sock.getsockname())} ({how}), "
                     f"receive buffer {got} bytes")
        use_c = self.cfg.receiver == "c" or (self.cfg.receiver == "auto"
                                             and rx.load() is not None)
        self.netconsole = NetconsoleReceiver(
            socks, lambda: self.store.connect(_BUSY_TIMEOUT), self.log, use_c,
            min(self.cfg.ring_bytes, 64 << 20))

    def _receiver(self, sock: socket.socket) -> rx.CReceiver | None:
        """The C receive thread for ``sock``, if configured and built."""
        if self.cfg.receiver == "python" or (self.cfg.receiver == "auto" and rx.load() is None):
            return None
        prefix = self.journal.packet_log_prefix(len(self.receivers))
        found = numbered(prefix)
        try:
            receiver = rx.CReceiver(sock, self.cfg.ring_bytes, self.cfg.limits.max_packet_count,
                                    prefix, found[-1][0] + 1 if found else 1)
        except OSError as err:
            raise ListenError(f"cannot start the C receiver: {err}") from None
        st = receiver.stats()
        if st["log_error"]:
            self._log_failed.add(id(receiver))
            self.log(f"packet log {prefix}N: {os.strerror(int(st['log_error']))}; dumps are "
                     "durable once journaled by Python")

        self.reasm.chunk_hash = rx.chunk_hash     # what its groups come with
        self.receivers.append(receiver)
        self._rx_seen[id(receiver)] = dict.fromkeys(("packets", "duplicates", "kernel_drops"), 0)
        return receiver

    def _read_c(self, receiver: rx.CReceiver) -> int:
        """Take what the C thread queued; returns how many datagrams."""
        receiver.drain()
        n = self._feed(receiver.take(), receiver)
        if n:
            self._lag["queue"] = max(self._lag["queue"], time.time() - receiver.oldest)
        self._fold(receiver)
        return n

    def _feed(self, items: Iterable[tuple[rx.Datagram, str, int]],
              receiver: rx.CReceiver | None = None) -> int:
        """Feed what a C thread passed on; returns how many datagrams.  A
        dump taken whole whose packets are all in the receiver's packet log
        is marked with where (``log_pos``): see :meth:`_publish`."""
        feed = self.reasm.feed
        fresh = self._fresh
        now = self.clock()
        n = 0
        with self._mu:
            for buf, host, port in items:
                if type(buf) is bytes:
                    got = feed(buf, host, port, now)
                    n += 1
                elif type(buf) is rx.LogMark:
                    if receiver is not None and receiver.log_prefix:
                        self.journal.log_closed([p for s, p in numbered(
                            receiver.log_prefix) if receiver.log_first_seq <= s < buf.below])
                    continue
                else:
                    got = self.reasm.feed_group(buf.packets, buf.hashes, host, port, now)
                    n += buf.count
                    whole = self.reasm.whole_taken
                    if whole is not None and buf.log_pos[0] and receiver is not None:
                        # every segment with a packet of it stays until it is stored
                        whole.log_pos = (receiver, buf.log_pos)  # type: ignore[attr-defined]
                        self.journal.hold(whole, [
                            Path(f"{receiver.log_prefix}{seq:08d}")
                            for seq in range(buf.log_first, buf.log_pos[0] + 1)])
                if got:
                    fresh.extend(got)
        return n

    def _fold(self, receiver: rx.CReceiver) -> None:
        """Add what the C thread counted itself: the copies it dropped, kernel drops.

        If the thread has failed, Python reads the socket from now on."""
        st = receiver.stats()
        if st["exited"] and not self._stop:
            self.log(f"the receive thread failed ({os.strerror(int(st['error']))}); "
                     "reading the socket from Python")
            self._retire(receiver)
            while self._feed(receiver.take(), receiver):   # what it queued before it ended
                pass
            self._settle_log(receiver)
            receiver.stop()
            self._close_log(receiver)
            self.sel.register(receiver.sock, selectors.EVENT_READ)
        seen = self._rx_seen[id(receiver)]
        dups = st["duplicates"] - seen["duplicates"]
        with self._mu:
            self.stats["packets"] += dups
            self.stats["duplicates"] += dups
            self.stats["kernel_drops"] += st["kernel_drops"] - seen["kernel_drops"]
        seen.update((k, st[k]) for k in seen)
        self._last_read = max(self._last_read, st["last_read_ns"] / 1e9)
        if st["log_error"] and receiver.log_prefix and id(receiver) not in self._log_failed:
            self._log_failed.add(id(receiver))
            self.log(f"packet log {receiver.log_prefix}N: {os.strerror(int(st['log_error']))}; "
                     "dumps are durable once journaled by Python from now on")
        # What Python reads from the socket later reports the kernel's total again.
        self._drops[receiver.sock.fileno()] = int(st["ovfl"])

    def _retire(self, receiver: rx.CReceiver) -> None:
        """Take the receiver out of the selector and the list (before stopping it)."""
        try:
            self.sel.unregister(receiver)
        except (KeyError, ValueError):
            pass
        self.receivers.remove(receiver)

    def _on_signal(self, signum: int, _frame: object) -> None:
        self._stop = True

    # -- loop ------------------------------------------------------------
    def run(self) -> int:
        """Serve until SIGINT/SIGTERM.

        This thread receives, reassembles and journals; the storing thread
        analyses and writes to SQLite, and waits while this one has a
        while datagrams keep coming (up to _MAX_READY dumps), so a burst is
        received and made durable before it is analysed.
        """
        self.bind()
        if self.cfg.metrics is not None:
            try:
                self._metrics = MetricsServer(self.cfg.metrics, self.metrics_text)
            except OSError as err:
                raise ListenError(f"metrics on {self.cfg.metrics[0]}:{self.cfg.metrics[1]}: "
                                  f"{err.strerror}") from err
            self.log(f"metrics on http://{self._metrics.address}/metrics")
        keep_freed_memory()
        switch = sys.getswitchinterval()
        # The receiving thread gets the interpreter back soon after a wake-up
        # even while the storing thread analyses.
        sys.setswitchinterval(_SWITCH)
        old = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        old_fd = signal.set_wakeup_fd(self._wake_w.fileno(), warn_on_full_buffer=False)
        lim = self.cfg.limits
        self.log(f"database {display(self.cfg.db)}; quiet timeout {lim.quiet_timeout:g}s; memory "
                 f"bound {lim.bound >> 20} MiB for dumps in flight and remembered; journal "
                 f"{self.journal.path(0).with_suffix('').name}.N, synced once per round "
                 f"before analysis; keeping {self.cfg.retention.describe()}")
        if self.store.upgraded_from:
            self.log(f"database upgraded from schema version {self.store.upgraded_from}")
        self._load_spool()
        self._replay_journal()
        self._storer = threading.Thread(target=self._storing, name="netoops-store", daemon=True)
        self._storer.start()
        if self.netconsole is not None:
            self.netconsole.start()
        self._syncer = threading.Thread(target=self._syncing, name="netoops-sync", daemon=True)
        self._syncer.start()
        next_log = self.clock() + self.cfg.log_interval
        try:
            while not self._stop:
                now = self.clock()
                deadline = next_log
                expiry = self.reasm.next_deadline()
                if expiry is not None and expiry < deadline:
                    deadline = expiry
                got = 0
                for key, _ in self.sel.select(max(0.0, deadline - now)):
                    if key.fileobj is self._wake_r:
                        self._drain_wakeups()
                    elif isinstance(key.fileobj, rx.CReceiver):
                        got += self._read_c(key.fileobj)
                    else:
                        got += self._read(key.fileobj)  # type: ignore[arg-type]
                now = self.clock()
                if got:
                    self._busy_until = now + _QUIET
                with self._mu:
                    self._fresh += self.reasm.expire(now)
                self._publish()
                if now >= next_log:
                    self._log_counters()
                    next_log = now + self.cfg.log_interval
            self._shutdown()
        finally:
            if self.netconsole is not None:
                self.netconsole.stop()
            self._stop_syncer()
            self._stop_storer()
            sys.setswitchinterval(switch)
            signal.set_wakeup_fd(old_fd)
            for s, handler in old.items():
                signal.signal(s, handler)
            self.close()
        st = self.stats
        self.log(f"stopped: {st['packets']} packets, {st['dumps_complete']} complete and "
                 f"{st['dumps_partial']} partial dumps this run")
        return 0

    def _publish(self) -> None:
        """Journal the dumps finalised this round: write them, and have the
        syncing thread sync the journal and hand them to the storing thread
        (synced here if it is not running), so this thread goes on
        receiving meanwhile.  If the journal fails they go on all the same
        (the database still takes them); the failure is counted and logged."""
        fresh, self._fresh = self._fresh, []
        if any(getattr(d, "log_pos", None) for d in fresh):     # durable in the packet log
            self._in_log += [d for d in fresh if getattr(d, "log_pos", None)]
            fresh = [d for d in fresh if not getattr(d, "log_pos", None)]
        if self._in_log:
            fresh += self._check_logged()
        if not fresh:
            return
        try:
            self.journal.write(fresh)
        except JournalError as err:
            self._journal_failed(err)
            with self._cv:
                self._ready.extend(fresh)
                self._cv.notify()
            return
        if self._syncer is None:
            self._sync(fresh)
            return
        with self._mu:
            self._unsynced.extend(fresh)
            self._sync_cv.notify()

    def _sync(self, dumps: list[Dump]) -> None:
        """Sync the journal, then hand ``dumps`` (written) to the storing thread."""
        try:
            self.journal.sync()
        except JournalError as err:
            self._journal_failed(err)
        else:
            if self._journal_failing:
                self.log("journal writable again")
            self._journal_failing = False
            self._made_durable(dumps, time.time(), "journal")
        with self._cv:
            self._ready.extend(dumps)
            self._cv.notify()

    def _made_durable(self, dumps: list[Dump], synced: float, where: str) -> None:
        """Count ``dumps`` durable as of ``synced`` and say so (--log-journal)."""
        with self._mu:
            self._durable += len(dumps)
            total = self._durable
        delay = max(0.0, synced - min(d.finalised for d in dumps))
        self._lag["durable"] = max(self._lag["durable"], delay)
        if self.cfg.log_journal:
            self.log(f"journal: {len(dumps)} dump(s) durable, {total} this "
                     f"run; {delay:.3f}s after they were finalised; synced at "
                     f"{_iso_us(synced)}" + (f" ({where})" if where != "journal" else ""))

    def _settle_log(self, receiver: rx.CReceiver) -> None:
        """Before ``receiver`` stops: its dumps waiting for the packet log
        are handed on once synced (within a bound), or journaled."""
        self._publish()
        mine = [d for d in self._in_log
                if d.log_pos[0] is receiver]  # type: ignore[attr-defined]
        if not mine:
            return
        others = [d for d in self._in_log
                  if d.log_pos[0] is not receiver]  # type: ignore[attr-defined]
        self._in_log = mine
        failed = self._check_logged(wait=_SHUTDOWN_LOG)
        for d in self._in_log:          # not synced in time: journaled instead
            self.journal.unhold(d)
            d.log_pos = None  # type: ignore[attr-defined]
        self._fresh += failed + self._in_log
        self._in_log = others
        self._publish()

    def _close_log(self, receiver: rx.CReceiver) -> None:
        """A stopped receiver's packet log segments (this run's: an earlier
        run's go once replayed) are written no more."""
        if receiver.log_prefix:
            self.journal.log_closed([p for s, p in numbered(receiver.log_prefix)
                                     if s >= receiver.log_first_seq])

    def _check_logged(self, wait: float = 0.0) -> list[Dump]:
        """Hand the dumps the packet log has synced to the storing thread
        (waiting up to ``wait`` seconds for the log to get there); returns
        those whose receiver's log failed, to be journaled instead."""
        end = self.clock() + wait
        while True:
            synced: dict[int, tuple[tuple[int, int], float, bool]] = {}
            for d in self._in_log:
                receiver = d.log_pos[0]  # type: ignore[attr-defined]
                if id(receiver) not in synced:
                    try:
                        st = receiver.stats()
                    except ValueError:      # stopped: what it synced is unknown
                        synced[id(receiver)] = ((0, 0), 0.0, True)
                        continue
                    synced[id(receiver)] = ((int(st["log_synced_seq"]),
                                             int(st["log_synced_off"])),
                                            st["log_synced_ns"] / 1e9, bool(st["log_error"]))
            done: list[Dump] = []
            failed: list[Dump] = []
            waiting: list[Dump] = []
            at = 0.0
            for d in self._in_log:
                receiver, pos = d.log_pos  # type: ignore[attr-defined]
                upto, when, error = synced[id(receiver)]
                if upto >= pos:
                    done.append(d)
                    at = max(at, when, d.finalised)
                elif error:
                    failed.append(d)
                else:
                    waiting.append(d)
            self._in_log = waiting
            if done:
                self._made_durable(done, at, "packet log")
                with self._cv:
                    self._ready.extend(done)
                    self._cv.notify()
            for d in failed:
                self.journal.unhold(d)
                d.log_pos = None  # type: ignore[attr-defined]
            if failed or not waiting or self.clock() >= end:
                return failed
            time.sleep(0.005)

    def _journal_failed(self, err: JournalError) -> None:
        with self._mu:
            self.stats["journal_errors"] += 1
        if not self._journal_failing:
            self.log(f"journal error: {err}; dumps go on to the database unjournaled")
        self._journal_failing = True

    def _syncing(self) -> None:
        """The syncing thread: one fdatasync for what was written meanwhile."""
        while True:
            with self._mu:
                while not self._unsynced and not self._sync_halt:
                    self._sync_cv.wait()
                dumps, self._unsynced = self._unsynced, []
            if dumps:
                self._sync(dumps)
            elif self._sync_halt:
                return

    def _stop_syncer(self) -> None:
        """Stop the syncing thread once it has synced what was written."""
        thread, self._syncer = self._syncer, None
        if thread is None:
            return
        with self._mu:
            self._sync_halt = True
            self._sync_cv.notify()
        thread.join()

    def _replay_packet_log(self) -> tuple[list[tuple[Dump, list[Path]]], list[Path], list[str]]:
        """The dumps in the packet log segments an earlier run left (its C
        receivers wrote them; not all of it was stored): each receiver's
        packets fed again, as they arrived, each dump with the segments
        that may hold its packets; the segments read; notes."""
        by_receiver: dict[str, list[Path]] = {}
        for path in self._old_logs:
            by_receiver.setdefault(path.name.rsplit(".", 1)[0], []).append(path)
        found: list[tuple[Dump, list[Path]]] = []
        read: list[Path] = []
        notes = []
        for segments in by_receiver.values():
            arrival = [0.0]
            reasm = Reassembler(self.cfg.limits, wallclock=lambda: arrival[0],
                                chunk_hash=rx.chunk_hash)
            done: list[Path] = []
            for path in segments:
                try:
                    records, clean = rx.read_log(path.read_bytes())
                except OSError as err:      # kept for a later start
                    notes.append(f"{path}: {err.strerror}")
                    continue
                if not clean:
                    notes.append(f"{path}: ends with a damaged or cut record after "
                                 f"{len(records)} packet(s)")
                done.append(path)
                for pkt, host, port, when in records:
                    arrival[0] = when
                    found += [(d, list(done)) for d in reasm.feed(pkt, host, port, when)]
            found += [(d, list(done)) for d in reasm.flush(arrival[0])]
            read += done
        return found, read, notes

    def _replay_journal(self) -> None:
        """Queue what an earlier run journaled but did not store."""
        found, notes = self.journal.replay()
        for note in notes:
            self.log(escape(f"journal: {note}"))
        latest: dict[tuple, tuple[Dump, int]] = {}  # type: ignore[type-arg]
        for d, seq in found:        # the last revision of each dump
            key = (d.source, d.port, d.boot_id, d.dump_id, d.first_packet)
            if key not in latest or d.revision >= latest[key][0].revision:
                latest[key] = (d, seq)
        # The packet log (without the C receiver it is left for a later
        # start): a dump there that the journal holds as completely is the
        # journal's; its first_packet is the C thread's arrival, not the
        # time Python first saw it, so the database is asked without it.
        logged: dict[int, list[Path]] = {}
        read: list[Path] = []
        if rx.load() is not None and self._old_logs:
            from_log, read, notes = self._replay_packet_log()
            for note in notes:
                self.log(escape(f"packet log: {note}"))
            # the most complete copy of each dump: the journal's, or the log's
            best: dict[tuple, tuple] = {}  # type: ignore[type-arg]
            for key, (d, _) in latest.items():
                k = (d.source, d.port, d.boot_id, d.dump_id)
                if k not in best or d.packets_received > best[k][0].packets_received:
                    best[k] = (d, key)
            for d, paths in from_log:
                k = (d.source, d.port, d.boot_id, d.dump_id)
                if k in best and best[k][0].packets_received >= d.packets_received:
                    continue
                if k in best:       # a less complete copy: not queued as well
                    old = best[k]
                    latest.pop(old[1], None)
                    logged.pop(id(old[0]), None)
                logged[id(d)] = paths
                latest[(id(d),)] = (d, -1)
                best[k] = (d, (id(d),))
                found.append((d, -1))
        queued = 0
        for d, seq in latest.values():
            try:
                row = self.store.stored_as(d, any_time=id(d) in logged)
            except db.ERRORS as err:    # stored twice rather than lost
                self.log(f"journal: cannot check the database ({err}); storing it again")
                row = None
            if row is not None and (row[1] == d.finalised or row[2] >= d.packets_received):
                continue
            self._spool_uid -= 1    # a uid of its own, never one of the reassembler's
            d.uid = self._spool_uid
            if row is not None:     # a repair of what is stored
                self._rows[d.uid] = row[0]
            if id(d) in logged:
                self.journal.hold(d, logged[id(d)])
            else:
                self.journal.keep(d, seq)
            self._ready.append(d)
            queued += 1
        self.journal.forget_unkept()
        self.journal.log_closed(read)
        if found:
            self.log(f"journal: {len(found)} dump(s) from an earlier run, {queued} of them "
                     "not in the database: queued for storing")

    def _storing(self) -> None:
        """The storing thread: analyse and commit, yielding to receiving;
        apply the retention policy every prune_interval."""
        next_stats = self.clock() + self.cfg.stats_interval
        next_prune = self.clock()
        while True:
            with self._cv:
                while not self._halt:
                    now = self.clock()
                    if self._ready and now >= self._busy_until and self._receiving():
                        self._busy_until = now + _QUIET
                    if now >= next_stats or (self._ready and (
                            now >= self._busy_until or len(self._ready) > _MAX_READY)):
                        break
                    self._cv.wait(min(0.02 if self._ready else 1.0, next_stats - now))
                if self._halt:
                    return
            try:
                self._store(_STORE_BUDGET)
            except Exception as err:    # a bug here must not end storing for good
                self.log(f"storing thread error {type(err).__name__}: {err}")
                time.sleep(1.0)
            if self.clock() >= next_stats:
                next_stats = self.clock() + self.cfg.stats_interval
                self._write_metrics()
            if self.clock() >= next_prune:
                next_prune = self.clock() + self.cfg.prune_interval
                self._prune()

    def metrics_text(self) -> str:
        with self._mu:
            st = dict(self.stats)
        gauges = dict(self.gauges)
        if self.netconsole is not None:
            st.update(self.netconsole.counters())
            gauges["netconsole_unsaved"] = self.netconsole.unsaved
        return render(st, gauges)

    def _write_metrics(self) -> None:
        if self.cfg.metrics_textfile is None:
            return
        try:
            write_textfile(self.cfg.metrics_textfile, self.metrics_text())
        except OSError as err:
            self.log(f"metrics: {self.cfg.metrics_textfile}: {err.strerror}")

    def _prune(self) -> None:
        policy = self.cfg.retention
        try:
            done = prune(self.store.conn, policy)
        except db.ERRORS as err:
            self.log(f"retention: database error: {err}; trying again later")
            return
        if self.netconsole is not None:
            try:
                lines = ncstore.prune(self.store.conn, self.cfg.netconsole_days and
                                      self.cfg.netconsole_days * 86400,
                                      self.cfg.netconsole_lines)
            except db.ERRORS as err:
                self.log(f"retention: netconsole lines: database error: {err}")
            else:
                if lines:
                    self.log(f"retention: pruned {lines} netconsole line(s)")
        if done.dumps:
            self.log(f"retention: pruned {done.dumps} dump(s), {done.bytes} bytes of logs "
                     f"({done.by_age} by age, {done.by_count} by count, {done.by_size} by "
                     f"size; keeping {policy.describe()})")

    def _receiving(self) -> bool:
        """Whether the C threads read datagrams since the last look (copies
        they drop do not wake the main thread)."""
        seen = 0
        for receiver in list(self.receivers):
            try:
                seen += receiver.stats()["packets"]
            except ValueError:      # stopped meanwhile
                pass
        moved = seen != self._seen_packets
        self._seen_packets = seen
        return moved

    def _stop_storer(self) -> None:
        thread, self._storer = self._storer, None
        if thread is None:
            return
        with self._cv:
            self._halt = True
            self._cv.notify()
        thread.join()

    def _shutdown(self) -> None:
        """Read what the sockets hold (within a bound), finalise, store or spool."""
        end = self.clock() + _SHUTDOWN_READ
        for receiver in self.receivers:     # all stop reading now, then each is drained
            receiver.halt()
        drained: list[rx.CReceiver] = []
        for receiver in list(self.receivers):
            self._retire(receiver)
            self._feed(receiver.finish(time.monotonic() + max(0.0, end - self.clock())),
                       receiver)
            self._fold(receiver)
            self._settle_log(receiver)
            st = receiver.stats()
            if st["exited"] and not st["ring_used"]:    # else a later start replays it
                drained.append(receiver)
            receiver.stop()
        for sock in self.socks:
            limit = max(1, sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
                        // proto.PACKET_SIZE // _BATCH + 1)
            while limit and self.clock() < end and self._read(sock) == _BATCH:
                limit -= 1
        with self._mu:
            self._fresh += self.reasm.flush()
        self._publish()
        self._stop_syncer()
        for receiver in drained:    # what it held is journaled, or held until stored
            self._close_log(receiver)
        self._stop_storer()             # this thread stores the rest
        self._store(everything=True)
        end = self.clock() + _SHUTDOWN_STORE
        while self._pending and self.clock() < end:
            time.sleep(min(0.2, max(0.0, end - self.clock())))
            self._retry_at = 0.0
            self._commit([], quiet=True)
        if self._pending:
            self._spill([d for d, _ in self._pending.values()], "the database did not take them")
            self._pending.clear()
        self.alerts.stop()              # what is queued, within a bound
        self._retry_at = 0.0
        self._commit([], quiet=True)    # its counters
        self._log_counters()
        self._write_metrics()

    def _drain_wakeups(self) -> None:
        try:
            while self._wake_r.recv(512):
                pass
        except BlockingIOError:
            pass

    def _read(self, sock: socket.socket) -> int:
        """Read up to a batch of datagrams; returns how many were read."""
        with self._mu:
            return self._read_locked(sock)

    def _read_locked(self, sock: socket.socket) -> int:
        feed = self.reasm.feed
        ready = self._fresh
        sources = self._sources
        now = self.clock()
        n = 0
        anc: list[tuple[int, int, bytes]] = []
        try:
            for n in range(1, _BATCH + 1):
                buf, anc, flags, addr = sock.recvmsg(_RECV_SIZE, _ANC_SIZE)
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
        if n > 0:
            self._last_read = time.time()
        if anc:     # the kernel's drop count for this socket, as of the last datagram
            for level, kind, data in anc:
                if level == socket.SOL_SOCKET and kind == _SO_RXQ_OVFL and len(data) >= 4:
                    total = int.from_bytes(data[:4], sys.byteorder)
                    fd = sock.fileno()
                    self.stats["kernel_drops"] += (total - self._drops.get(fd, 0)) & 0xffffffff
                    self._drops[fd] = total
        return n

    # -- storing -----------------------------------------------------------
    def _store(self, budget: float = 0.0, everything: bool = False) -> None:
        """Analyse and store finalised dumps: at least one, more within ``budget``
        seconds (all of them if ``everything``), plus the stats so far."""
        start = self.clock()
        items: list[tuple[Dump, Report]] = []
        ready = self._ready
        taken: set[int] = set()     # a newer revision in this round is no new dump
        while ready and (everything or not items or len(ready) > _MAX_READY
                         or self.clock() - start < budget):
            dump = ready.popleft()
            if dump.uid not in taken and self._over_budget(dump, None):
                self.journal.release(dump)
                continue
            rep = safe_analyse(dump)
            if dump.uid not in taken and self._over_budget(dump, rep):
                self.journal.release(dump)
                continue
            items.append((dump, rep))
            taken.add(dump.uid)
        self._commit(items)

    def _over_budget(self, dump: Dump, rep: Report | None) -> bool:
        """Whether the dump's source address has had its share; counted if so.

        Without ``rep`` (before analysis) only the budgets that need none."""
        if dump.uid < 0 or dump.uid in self._rows or dump.uid in self._pending:
            return False            # spooled, or a new revision of a dump already taken
        now = self.clock()
        for budget, counter, applies, what in self._budgets[:2] if rep is None \
                else self._budgets[2:]:
            if not applies(dump, rep) or budget.take(dump.source, now):
                continue
            with self._mu:
                self.stats[counter] += 1
                self.reasm.note(dump.source, counter)
            warned = self._warned.get((dump.source, what))
            if warned is None or now - warned >= self.cfg.budget_window:
                self._warned[(dump.source, what)] = now
                if len(self._warned) > 4096:
                    self._warned.popitem(last=False)
                self.log(escape(f"{dump.source}: over its share of {what} ({budget.burst} "
                                f"per {self.cfg.budget_window:g}s); counting, not storing, "
                                f"the rest ({counter})"))
            return True
        return False

    def _commit(self, items: list[tuple[Dump, Report]], quiet: bool = False) -> None:
        """Store analysed dumps with the stats so far, in one transaction.

        If the database fails (disk full, locked by someone else), the dumps
        are kept and retried later with a growing delay, so none is lost to
        it; beyond a memory bound they are spooled to a file.
        """
        for dump, rep in items:
            old = self._pending.pop(dump.uid, None)
            if old is not None:
                self._pending_bytes -= len(old[0].log)
                self.journal.release(old[0])        # superseded by a new revision
            self._pending[dump.uid] = (dump, rep)
            self._pending_bytes += len(dump.log)
        with self._mu:
            stats = dict(self.stats)
        delta = {k: v - self._flushed.get(k, 0) for k, v in stats.items()}
        if not self._pending and not any(delta.values()):
            return
        if self.clock() < self._retry_at:
            if self._pending_bytes > _MAX_PENDING_BYTES:
                self._spill([d for d, _ in self._pending.values()], "the database is failing")
                self._pending.clear()
                self._pending_bytes = 0
            return
        batch = list(self._pending.values())
        self._update_gauges()
        with self._mu:      # taken whole: the main thread starts a new one
            per_source, self.reasm.source_delta = self.reasm.source_delta, {}
        ids = self._save(batch, delta, per_source, quiet)
        if ids is None:             # counted again with the next ones
            with self._mu:
                into = self.reasm.source_delta
                for k, v in per_source.items():
                    into[k] = into.get(k, 0) + v
            return
        self._flushed = stats
        for (d, _), n in zip(batch, ids):
            if n is not None:   # else stored, spooled or kept by _one_by_one already
                self.journal.release(d)
        self._pending.clear()
        self._pending_bytes = 0
        recovered = bool(self._retry_delay)
        if recovered:
            self.log("database writable again")
        self._retry_delay = 0.0
        lines = []
        done = time.time()
        for (d, r), n in zip(batch, ids):
            if n is None:
                continue
            self._lag["store"] = max(self._lag["store"], done - d.finalised)
            self._rows[d.uid] = n
            self._rows.move_to_end(d.uid)
            lines.append(f"netoops-collector: {describe(d, r, n)}\n")
            self.alerts.stored(r.signature, lambda n=n: self._report(n))
        while len(self._rows) > _MAX_ROWS:
            self._rows.popitem(last=False)
        if lines:   # one write for the batch: each line is still one line
            self.err.write("".join(lines))
            self.err.flush()
        # What went to the spool while the database failed is stored now;
        # what could not be stored at all waits for the next start.
        if recovered and not self._stop and self.spool.exists():
            self._load_spool()

    def _count(self, name: str) -> None:
        with self._mu:
            self.stats[name] = self.stats.get(name, 0) + 1

    def _report(self, dump_no: int) -> dict | None:
        """Stored dump ``dump_no`` as `show --json` has it (for alerts), read
        through a connection of the storing thread's own."""
        if self._reader is None:
            self._reader = open_readonly(self.cfg.db, shared=True)   # main's at shutdown
        d = get_dump(self._reader, dump_no)
        return None if d is None else views.report_dict(d)

    def _save(self, batch: list[tuple[Dump, Report]], delta: dict[str, int],
              per_source: dict[tuple[str, str], int], quiet: bool) -> list[int | None] | None:
        """One transaction; the ids stored, or None if the database failed."""
        try:
            return self.store.save([(d, r, self._rows.get(d.uid)) for d, r in batch],
                                   delta, per_source, self.gauges)
        except db.ERRORS as err:
            self._failed(err, len(batch), quiet)
            return None
        except Exception as err:    # a bug with one dump must not lose the others
            self.log(f"storage error {type(err).__name__}: {err}; storing one by one")
        ids = self._one_by_one(batch)
        if ids is None:
            return None
        try:
            self.store.save([], delta, per_source, self.gauges)
        except db.ERRORS as err:
            self._failed(err, len(self._pending), quiet)
            return None
        return ids

    def _one_by_one(self, batch: list[tuple[Dump, Report]]) -> list[int | None] | None:
        """Store a batch dump by dump (after an error that is not the database's).

        Each dump stored is taken off the pending list at once, so a
        database error half way never stores one twice; a dump that cannot
        be stored is spooled.  None if the database failed (the rest stay
        pending)."""
        ids: list[int | None] = []
        bad: list[Dump] = []
        for d, r in batch:
            try:
                [n] = self.store.save([(d, r, self._rows.get(d.uid))])
            except db.ERRORS as err:
                self._failed(err, len(self._pending), False)
                if bad:
                    self._spill(bad, "storing them failed")
                return None
            except Exception as err:
                self.log(escape(f"dump from {d.source} boot {d.boot_id} id {d.dump_id} "
                                f"cannot be stored ({type(err).__name__}: {err})"))
                bad.append(d)
                ids.append(None)
            else:
                ids.append(n)
                self._rows[d.uid] = n
                self.journal.release(d)
                self.err.write(f"netoops-collector: {describe(d, r, n)}\n")
            old = self._pending.pop(d.uid, None)
            if old is not None:
                self._pending_bytes -= len(old[0].log)
        self.err.flush()
        if bad:
            self._spill(bad, "storing them failed")
        return [None] * len(ids)        # each one is logged already

    def _failed(self, err: Exception, n: int, quiet: bool) -> None:
        with self._mu:
            self.stats["store_errors"] += 1
        if not self._retry_delay and not quiet:
            self.log(f"database error, {n} dump(s) kept for a retry: {err}")
        self._retry_delay = min(_RETRY_MAX, max(_RETRY_FIRST, self._retry_delay * 2))
        self._retry_at = self.clock() + self._retry_delay

    def _spill(self, items: list[Dump], why: str) -> None:
        """Append dumps to the spool file; the next successful write stores them."""
        try:
            new = not self.spool.exists()
            with open(self.spool, "a", encoding="utf-8") as f:
                for d in items:     # with the row it replaces, if it is a repair
                    f.write(json.dumps(dict(dataclasses.asdict(d),
                                            dump_no=self._rows.get(d.uid))) + "\n")
                f.flush()
                os.fsync(f.fileno())    # before the journal lets them go
            if new:
                fd = os.open(self.spool.parent, os.O_RDONLY | os.O_DIRECTORY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        except OSError as err:
            self.log(f"LOST {len(items)} dump(s): {why}, and {self.spool}: {err.strerror}"
                     + (" (they stay in the journal)" if not self._journal_failing else ""))
            return
        for d in items:
            self.journal.release(d)
        with self._mu:
            self.stats["spooled"] += len(items)
        self.log(f"{len(items)} dump(s) written to {self.spool}: {why}")

    def _load_spool(self) -> None:
        """Queue the dumps of the spool file for storing, and remove it."""
        try:
            with open(self.spool, encoding="utf-8") as f:
                lines = f.readlines()
        except FileNotFoundError:
            return
        except OSError as err:
            self.log(f"{self.spool}: {err.strerror}")
            return
        dumps = []
        for line in lines:
            try:
                dumps.append(_dump_from_json(line))
            except (ValueError, TypeError, KeyError):
                self.log(f"{self.spool}: skipping a damaged line")
        for d, dump_no in dumps:    # uids of their own: never one of the reassembler's
            self._spool_uid -= 1
            d.uid = self._spool_uid
            if dump_no is not None:
                self._rows[d.uid] = dump_no
        try:                        # the spool goes: the journal keeps them meanwhile
            if dumps:
                self.journal.append([d for d, _ in dumps])
        except JournalError as err:
            self._journal_failed(err)
        for d, _ in dumps:
            self._ready.append(d)
        os.unlink(self.spool)
        if dumps:
            self.log(f"{len(dumps)} dump(s) from {self.spool} queued for storing")

    def _update_gauges(self) -> None:
        g = self.gauges
        g["inflight_dumps"] = self.reasm.inflight
        g["held_bytes"] = self.reasm.held_bytes
        g["unsaved_dumps"] = len(self._pending) + len(self._ready)
        ring = 0
        for receiver in list(self.receivers):
            try:
                ring += receiver.stats()["ring_used"]
            except ValueError:      # stopped meanwhile
                pass
        g["ring_bytes"] = ring
        g["journal_bytes"] = self.journal.bytes
        g["queue_delay_max"] = round(self._lag["queue"], 6)
        g["durable_delay_max"] = round(self._lag["durable"], 6)
        g["store_delay_max"] = round(self._lag["store"], 6)

    def _log_counters(self) -> None:
        if self.netconsole is not None:
            line = self.netconsole.summary()
            if line != self._nc_logged:
                self.log(line)
                self._nc_logged = line
        for receiver in list(self.receivers):   # copies it dropped: no wake-up for those
            self._fold(receiver)
        with self._mu:
            st = dict(self.stats)
        lag = self._lag
        self._lag = {"queue": 0.0, "durable": 0.0, "store": 0.0}    # a new interval
        if st == self._logged and not any(lag.values()):
            return
        rejected = sum(v for k, v in st.items() if k.startswith("rejected_"))
        self.log(f"counters: packets {st['packets']}, chunks {st['accepted']}, duplicates "
                 f"{st['duplicates']}, rejected {rejected}, late {st['late']}, kernel drops "
                 f"{st['kernel_drops']}; dumps complete {st['dumps_complete']}, partial "
                 f"{st['dumps_partial']}, repaired {st['dumps_repaired']}, not stored "
                 f"{st['dumps_junk_dropped'] + st['dumps_rate_dropped']} (over a source's "
                 f"share); in flight {self.reasm.inflight} "
                 f"({self.reasm.held_bytes} bytes held); unsaved {len(self._pending)}, "
                 f"database errors {st['store_errors']}, journal errors {st['journal_errors']}; "
                 f"delays (most in this interval): queued {lag['queue']:.3f}s, finalised "
                 f"to durable {lag['durable']:.3f}s, to stored {lag['store']:.3f}s; last "
                 f"datagram read at {_iso_us(self._last_read)}")
        self._logged = dict(st)

    def close(self) -> None:
        for receiver in list(self.receivers):
            self._retire(receiver)
            receiver.stop()
        for sock in self.socks:
            try:
                self.sel.unregister(sock)
            except KeyError:          # a socket read by its receiver, never registered
                pass
            sock.close()
        self.socks.clear()
        self.sel.close()
        self._wake_r.close()
        self._wake_w.close()
        if self._metrics is not None:
            self._metrics.close()
            self._metrics = None
        if self.netconsole is not None:
            self.netconsole.close()
            self.netconsole = None
        self.store.close()
        if self._reader is not None:
            self._reader.close()
        self.journal.close()
