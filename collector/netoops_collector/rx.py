# SPDX-License-Identifier: GPL-2.0
"""The C receive thread (``_rx.c``), loaded through ctypes.

:class:`CReceiver` starts one thread per socket that reads with
``recvmmsg()``, drops exact copies of packets it already passed on, and
queues everything else in a ring buffer; :meth:`CReceiver.take` returns the
queued datagrams with their sources.  The thread also holds the packets of
each dump until the dump is whole and queues it as one :class:`Group`, so
Python handles a dump in one step rather than one per packet; what it
holds for longer than 100 ms comes out packet by packet.  Receiving thus
never waits for reassembly, analysis or storage.  :func:`load` returns None when the shared
object was not built (``serve`` then reads the sockets itself).
"""

from __future__ import annotations

import ctypes
import os
import socket
import struct
import threading
from array import array
from pathlib import Path
from typing import Iterator, NamedTuple, Union

from . import proto

_REC = struct.Struct("<IHBB16sd")      # len, port, family, flags, address, arrival
_REC_SIZE = _REC.size                   # 32
_STAT_NAMES = ("packets", "duplicates", "kernel_drops", "ring_waits", "ring_used_max",
               "ring_used", "ovfl", "error", "exited", "grouped", "group_flushes",
               "group_bytes", "groups", "last_read_ns", "log_seq", "log_synced_seq",
               "log_synced_off", "log_synced_ns", "log_error")
DEFAULT_RING = 256 << 20
LOG_AGE = 60.0          # seconds a packet log segment is written at most
_TAKE = 4 << 20
_CUT, _GROUP, _WHOLE, _MARK = 1, 2, 4, 8
_BELOW = struct.Struct("=Q")
_POS = struct.Struct("=QQQ")     # a whole group's first and last log segment, end
_P = proto.PACKET_SIZE


class Group(NamedTuple):
    """A whole dump: its packets in packet_no order (``count`` of them, one
    header each), and :func:`chunk_hash` of each packet's data; where its
    last packet ends in the packet log, (segment, offset), or (0, 0), and
    the segment of its first packet there."""

    packets: bytes | memoryview     # from take(): valid until the next take()
    hashes: array  # type: ignore[type-arg]
    log_pos: tuple[int, int] = (0, 0)
    log_first: int = 0

    @property
    def count(self) -> int:
        return len(self.hashes)


class LogMark(NamedTuple):
    """Not a datagram: the packet log's segments below ``below`` may be
    deleted once the dumps taken from them before this are stored."""

    below: int

    @property
    def count(self) -> int:
        return 0


Datagram = Union[bytes, Group, LogMark]


class _Stats(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in _STAT_NAMES]


def library_path() -> Path | None:
    """The built shared object: $NETOOPS_RX_LIB, else beside this file."""
    env = os.environ.get("NETOOPS_RX_LIB")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parent
    found = sorted(here.glob("_netoops_rx*.so"))
    return found[0] if found else None


_lib: ctypes.CDLL | None = None


def load() -> ctypes.CDLL | None:
    global _lib
    if _lib is None:
        path = library_path()
        if path is None or not path.exists():
            return None
        lib = ctypes.CDLL(str(path), use_errno=True)
        lib.nrx_start.restype = ctypes.c_void_p
        lib.nrx_start.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_uint32,
                                  ctypes.c_char_p, ctypes.c_uint64, ctypes.c_double]
        lib.nrx_packet_hash.restype = ctypes.c_uint64
        lib.nrx_packet_hash.argtypes = [ctypes.c_char_p, ctypes.c_uint16, ctypes.c_char_p]
        lib.nrx_hash.restype = ctypes.c_uint64
        lib.nrx_hash.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        lib.nrx_notify_fd.restype = ctypes.c_int
        lib.nrx_notify_fd.argtypes = [ctypes.c_void_p]
        lib.nrx_take.restype = ctypes.c_size_t
        lib.nrx_take.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t,
                                 ctypes.c_int]
        lib.nrx_stats.restype = None
        lib.nrx_stats.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Stats)]
        lib.nrx_stop.restype = None
        lib.nrx_stop.argtypes = [ctypes.c_void_p]
        lib.nrx_halt.restype = None
        lib.nrx_halt.argtypes = [ctypes.c_void_p]
        _lib = lib
    return _lib


class CReceiver:
    """A receive thread on ``sock``; the socket stays the caller's."""

    def __init__(self, sock: socket.socket, ring_bytes: int = DEFAULT_RING,
                 max_count: int = proto.MAX_PACKET_COUNT, log_prefix: str | None = None,
                 log_seq: int = 1, log_age: float = LOG_AGE) -> None:
        """``log_prefix``: the packet log's segments are ``<log_prefix><seq>``
        (eight digits), from ``log_seq`` on, each closed beyond 64 MiB or
        ``log_age`` seconds after its first packet (see _rx.c)."""
        lib = load()
        if lib is None:
            raise OSError("the C receiver (_netoops_rx) is not built")
        self._lib = lib
        self.sock = sock
        self.ring_bytes = ring_bytes
        self.log_prefix = log_prefix
        self.log_first_seq = log_seq    # this run's segments start here
        handle = lib.nrx_start(sock.fileno(), ring_bytes, max_count,
                               os.fsencode(log_prefix) if log_prefix else None, log_seq,
                               log_age)
        if not handle:
            err = ctypes.get_errno() or 12
            raise OSError(err, f"cannot start the receive thread: {os.strerror(err)}")
        self._h: int | None = handle
        self._stop_lock = threading.Lock()     # stats() from another thread vs stop()
        self._buf = ctypes.create_string_buffer(_TAKE)
        self._view = memoryview(self._buf).cast("B")
        self._names: dict[bytes, str] = {}
        self.oldest = 0.0       # arrival (unix time) of the first datagram of the last take

    def fileno(self) -> int:
        """Readable when datagrams are queued (for a selector); see :meth:`drain`."""
        if self._h is None:
            raise ValueError("the receive thread is stopped")
        return int(self._lib.nrx_notify_fd(self._h))

    def drain(self) -> None:
        try:
            while os.read(self.fileno(), 4096):
                pass
        except BlockingIOError:
            pass

    def take(self, timeout: float = 0.0) -> Iterator[tuple[Datagram, str, int]]:
        """The queued datagrams (up to 4 MiB of them) as (bytes, address, port),
        a whole dump as (:class:`Group`, address, port), its packets a view
        of this receiver's buffer: valid until take() is called again."""
        assert self._h is not None
        n = self._lib.nrx_take(self._h, self._buf, _TAKE, int(timeout * 1000))
        if not n:
            return
        raw = self._view      # each record is copied out of it once
        names = self._names
        off = 0
        unpack = _REC.unpack_from
        self.oldest = 0.0       # of the first datagram (a mark is none)
        while off < n:
            length, port, family, flags, addr, arrival = unpack(raw, off)
            start = off + _REC_SIZE
            if flags & _MARK:
                yield LogMark(*_BELOW.unpack_from(raw, start)), "", 0
                off = start + ((length + _REC_SIZE + 7) & ~7) - _REC_SIZE
                continue
            if not self.oldest:
                self.oldest = arrival
            host = names.get(addr) if family == 4 else names.get(addr + b"6")
            if host is None:
                host = _address(family, addr)
                if len(names) > 4096:
                    names.clear()
                names[addr if family == 4 else addr + b"6"] = host
            if flags & _WHOLE:
                count = (length - _POS.size) // (_P + 8)
                hashes = array("q")
                hashes.frombytes(raw[start + count * _P:start + length - _POS.size])
                first, seq, end = _POS.unpack_from(raw, start + length - _POS.size)
                # not copied: a dump is handled before the next take()
                yield (Group(raw[start:start + count * _P], hashes, (seq, end), first),
                       host, port)
            elif flags & _GROUP:
                for at in range(start, start + length, _P):
                    yield raw[at:at + _P].tobytes(), host, port
            elif flags & _CUT:          # longer than a packet: oversize
                yield raw[start:start + length].tobytes() + b"\0", host, port
            else:
                yield raw[start:start + length].tobytes(), host, port
            off = start + ((length + _REC_SIZE + 7) & ~7) - _REC_SIZE

    def stats(self) -> dict[str, int]:
        """The thread's counters; ValueError once stopped (any thread may ask)."""
        st = _Stats()
        with self._stop_lock:
            if self._h is None:
                raise ValueError("the receive thread is stopped")
            self._lib.nrx_stats(self._h, ctypes.byref(st))
        return {name: getattr(st, name) for name in _STAT_NAMES}

    def halt(self) -> None:
        """Stop reading the socket (see :meth:`finish`)."""
        assert self._h is not None
        self._lib.nrx_halt(self._h)

    def finish(self, deadline: float) -> Iterator[tuple[Datagram, str, int]]:
        """Stop reading the socket without losing what the thread has read:
        the thread returns once the batch in hand is queued; everything
        queued is yielded (until ``deadline``, a time.monotonic() value)."""
        import time
        assert self._h is not None
        self._lib.nrx_halt(self._h)
        while time.monotonic() < deadline:
            exited = self.stats()["exited"]
            got = 0
            for item in self.take(0.01):
                got += 1
                yield item
            if exited and not got and not self.stats()["ring_used"]:
                return

    def stop(self) -> None:
        """Stop the thread (at once) and free the ring; the socket stays open."""
        with self._stop_lock:
            h, self._h = self._h, None
        if h is not None:
            self._lib.nrx_stop(h)


_LREC = struct.Struct("=IIHB5xQd16s")     # struct lrec: magic, len, port, family, check,
_LOG_MAGIC = 0x31504C4E                    # arrival, address


def read_log(buf: bytes) -> tuple[list[tuple[bytes, str, int, float]], bool]:
    """The records of a packet log segment as (packet, address, port,
    arrival), and whether it ended cleanly (not with a cut or damaged
    record, as a crash in the middle of a write leaves)."""
    lib = load()
    assert lib is not None
    out = []
    off = 0
    while off + _LREC.size <= len(buf):
        magic, length, port, family, check, arrival, addr = _LREC.unpack_from(buf, off)
        end = off + _LREC.size + length
        if magic != _LOG_MAGIC or length != _P or family not in (4, 6) or end > len(buf):
            return out, False
        pkt = buf[off + _LREC.size:end]
        if lib.nrx_packet_hash(addr, port, pkt) != check:
            return out, False
        out.append((pkt, _address(family, addr), port, arrival))
        off = end
    return out, off == len(buf)


def chunk_hash(data: bytes) -> int:
    """The hash the C thread gives each chunk of a :class:`Group`."""
    lib = load()
    assert lib is not None
    return int(lib.nrx_hash(data, len(data)))


def source_of(addr: tuple) -> tuple[str, int]:  # type: ignore[type-arg]
    """(host, port) of a socket address, an IPv4-mapped IPv6 one as IPv4."""
    host = addr[0]
    if host.startswith("::ffff:") and "." in host:
        host = host[7:]
    return host, addr[1]


def _address(family: int, addr: bytes) -> str:
    if family == 4:
        return socket.inet_ntop(socket.AF_INET, addr[:4])
    host = socket.inet_ntop(socket.AF_INET6, addr)
    if host.startswith("::ffff:") and "." in host:
        host = host[7:]
    return host
