# SPDX-License-Identifier: GPL-2.0
"""Reassembly of netoops packets into dumps.

A dump is identified by (source address, source port, boot_id, dump_id,
type).  The kernel sends every dump three times; the first copy of each
packet_no is kept, identical copies are counted as duplicates, and packets
may arrive in any order.  A dump is finalised as soon as every packet_no is
in, or as a partial dump after a quiet timeout, when the memory caps need
room, or at shutdown.  A partial dump records exactly which chunks are
missing and still shows the ones that arrived.

After a dump is finalised its key is remembered for ``recent_ttl`` seconds
after the last packet seen for it, so that the second and third copies count
as duplicates (or, for a partial dump, as late packets) instead of starting a
new dump.  In that window a packet with the key that is not a copy of the
finalised dump (its header differs, or it carries other bytes for a
packet_no the dump has) contradicts it and is rejected as a conflict: two
dumps of one boot have different dump_ids (netoops_wire.h).  After the
window the key is free again, so a machine that reboots without a new
boot_id and crashes with the same dump_id is still recorded.
"""

from __future__ import annotations

import time
from array import array
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable, Sequence

from . import proto

_PREFIX_UNPACK = proto.PREFIX.unpack_from
_PACKET_SIZE, _VERSION, _ARCH = proto.PACKET_SIZE, proto.VERSION, proto.ARCH_X86
_DATA_OFFSET, _ARCH_OFFSET = proto.DATA_OFFSET, proto.ARCH_OFFSET
_TYPES, _MAX_COUNT = frozenset(proto.TYPES), proto.MAX_PACKET_COUNT
_IDENT_HEAD, _IDENT_TAIL = proto.IDENT_HEAD, proto.IDENT_TAIL

Key = tuple[str, int, int, int, int]     # (address, port, boot_id, dump_id, type)
Source = tuple[str, int]                 # (address, port)

# Why a dump was finalised.
COMPLETE, TIMEOUT, CAPACITY, SHUTDOWN = "complete", "timeout", "capacity", "shutdown"

STAT_NAMES: tuple[str, ...] = (
    "packets",            # datagrams seen
    "accepted",           # chunks kept (first copy of a packet_no)
    "duplicates",         # identical copies, before or after finalisation
    "late",               # new chunks for a dump already finalised as partial
    *(f"rejected_{r}" for r in proto.REASONS),
    "rejected_conflict",  # contradicts the earlier packets of its dump
    "dumps_complete",
    "dumps_partial",
    "partial_timeout",    # partial dumps finalised by the quiet timeout,
    "partial_capacity",   # ... finalised early (not dropped) by the memory caps,
    "partial_shutdown",   # ... finalised at shutdown
)


@dataclass
class Limits:
    """Memory bounds on the dumps in flight."""

    quiet_timeout: float = 10.0
    max_dumps: int = 512
    max_bytes: int = 128 << 20
    max_dumps_per_source: int = 8
    max_bytes_per_source: int = 32 << 20
    # How long after its last packet, and how many, finalised keys are remembered.
    recent_ttl: float = 60.0
    max_recent: int = 8192
    max_recent_packets: int = 1 << 20     # packet hashes kept for them (8 bytes each)


@dataclass
class Dump:
    """A finalised dump, as it is stored."""

    source: str
    port: int
    boot_id: int
    dump_id: int
    type: int
    kernel_version: str
    user_blob: str
    x86_vendor: int
    x86_family: int
    x86_model: int
    x86_stepping: int
    regs: dict[str, int]
    packet_count: int
    missing: list[int]
    log: str
    first_packet: float
    finalised: float
    finalised_by: str

    @property
    def complete(self) -> bool:
        return not self.missing

    @property
    def packets_received(self) -> int:
        return self.packet_count - len(self.missing)


def ranges(numbers: list[int]) -> str:
    """[1, 2, 3, 7] -> "1-3,7"."""
    out: list[str] = []
    start = prev = None
    for n in sorted(numbers):
        if prev is not None and n == prev + 1:
            prev = n
            continue
        if start is not None:
            out.append(f"{start}-{prev}" if prev != start else f"{start}")
        start = prev = n
    if start is not None:
        out.append(f"{start}-{prev}" if prev != start else f"{start}")
    return ",".join(out)


@dataclass(eq=False)
class _InFlight:
    key: Key
    head: bytes                 # packet bytes [0, 16)
    tail: bytes                 # packet bytes [20, data_offset)
    data_offset: int
    count: int
    first_wall: float
    last_seen: float
    chunks: list[bytes | None] = field(default_factory=list)
    got: int = 0
    nbytes: int = 0


@dataclass(eq=False)
class _Done:
    head: bytes
    tail: bytes
    hashes: array[int]          # by packet_no: hash of the packet kept
    missing: frozenset[int]     # packet_no that never arrived
    expires: float


class Reassembler:
    """Turns datagrams into finalised :class:`Dump` s.

    ``feed``, ``expire`` and ``flush`` return the dumps they finalised.
    ``now`` arguments are monotonic seconds; wall-clock times for the stored
    dumps come from ``wallclock``.
    """

    def __init__(self, limits: Limits | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 wallclock: Callable[[], float] = time.time) -> None:
        self.limits = limits or Limits()
        self.clock = clock
        self.wallclock = wallclock
        self.stats: dict[str, int] = dict.fromkeys(STAT_NAMES, 0)
        self._inflight: OrderedDict[Key, _InFlight] = OrderedDict()  # LRU first
        self._recent: OrderedDict[Key, _Done] = OrderedDict()
        self._recent_packets = 0
        self._src_dumps: dict[Source, int] = {}
        self._src_bytes: dict[Source, int] = {}
        self._bytes = 0

    # -- introspection -------------------------------------------------
    @property
    def inflight(self) -> int:
        return len(self._inflight)

    @property
    def inflight_bytes(self) -> int:
        return self._bytes

    def next_deadline(self) -> float | None:
        """Monotonic time at which the stalest dump in flight times out."""
        for entry in self._inflight.values():
            return entry.last_seen + self.limits.quiet_timeout
        return None

    # -- input ---------------------------------------------------------
    def feed(self, buf: bytes, source: str, port: int,
             now: float | None = None) -> Sequence[Dump]:
        """Take one datagram from ``source``:``port``; returns finalised dumps."""
        stats = self.stats
        stats["packets"] += 1
        # Fast path for the standard layout; proto.check() says what is wrong.
        hdr = _PREFIX_UNPACK(buf) if len(buf) == _PACKET_SIZE else None
        if (hdr is None or hdr[0] != _VERSION or hdr[2] != _DATA_OFFSET or hdr[3] != _ARCH
                or hdr[4] != _ARCH_OFFSET or hdr[5] not in _TYPES
                or not 0 <= hdr[7] < hdr[6] <= _MAX_COUNT):
            try:
                hdr = proto.check(buf)
            except proto.DecodeError as err:
                stats["rejected_" + err.reason] += 1
                return ()
        if now is None:
            now = self.clock()
        data_offset, count, no = hdr[2], hdr[6], hdr[7]
        key = (source, port, hdr[8], hdr[1], hdr[5])
        entry = self._inflight.get(key)
        out: list[Dump] = []
        if entry is None:
            done = self._recent.get(key)
            if done is not None and done.expires <= now:
                del self._recent[key]
                self._recent_packets -= len(done.hashes)
                done = None
            if done is not None:
                if no < len(done.hashes) and no not in done.missing \
                        and done.hashes[no] == hash(buf):
                    stats["duplicates"] += 1
                elif (no in done.missing and buf[:_IDENT_HEAD] == done.head
                        and buf[_IDENT_TAIL:data_offset] == done.tail):
                    stats["late"] += 1
                else:
                    stats["rejected_conflict"] += 1
                    return ()
                done.expires = now + self.limits.recent_ttl
                self._recent.move_to_end(key)
                return ()
            entry = self._start(key, buf, data_offset, count, now, out)
        elif buf[:_IDENT_HEAD] != entry.head or buf[_IDENT_TAIL:data_offset] != entry.tail:
            stats["rejected_conflict"] += 1
            return ()
        else:
            self._inflight.move_to_end(key)
            entry.last_seen = now
        chunks = entry.chunks
        have = chunks[no]
        if have is not None:
            stats["duplicates" if have == buf else "rejected_conflict"] += 1
            return ()
        chunks[no] = buf
        entry.got += 1
        size = len(buf)
        entry.nbytes += size
        self._bytes += size
        src = (source, port)
        self._src_bytes[src] += size
        stats["accepted"] += 1
        if entry.got == entry.count:
            out.append(self._finalise(entry, COMPLETE, now))
        elif self._bytes > self.limits.max_bytes or \
                self._src_bytes[src] > self.limits.max_bytes_per_source:
            self._enforce_bytes(entry, src, now, out)
        return out

    def expire(self, now: float | None = None) -> list[Dump]:
        """Finalise the dumps that have been quiet for the quiet timeout."""
        if now is None:
            now = self.clock()
        out: list[Dump] = []
        quiet = self.limits.quiet_timeout
        while self._inflight:
            entry = next(iter(self._inflight.values()))
            if entry.last_seen + quiet > now:
                break
            out.append(self._finalise(entry, TIMEOUT, now))
        self._forget(now)
        return out

    def flush(self, now: float | None = None) -> list[Dump]:
        """Finalise everything in flight (at shutdown)."""
        if now is None:
            now = self.clock()
        return [self._finalise(entry, SHUTDOWN, now)
                for entry in list(self._inflight.values())]

    # -- internals -----------------------------------------------------
    def _start(self, key: Key, buf: bytes, data_offset: int, count: int,
               now: float, out: list[Dump]) -> _InFlight:
        src = (key[0], key[1])
        lim = self.limits
        while self._src_dumps.get(src, 0) >= lim.max_dumps_per_source:
            victim = self._oldest(src)
            assert victim is not None      # the source has dumps in flight
            out.append(self._finalise(victim, CAPACITY, now))
        while len(self._inflight) >= lim.max_dumps:
            victim = self._oldest(None)
            assert victim is not None
            out.append(self._finalise(victim, CAPACITY, now))
        entry = _InFlight(key, buf[:proto.IDENT_HEAD],
                          buf[proto.IDENT_TAIL:data_offset], data_offset, count,
                          self.wallclock(), now, [None] * count)
        self._inflight[key] = entry
        self._src_dumps[src] = self._src_dumps.get(src, 0) + 1
        self._src_bytes.setdefault(src, 0)
        return entry

    def _enforce_bytes(self, current: _InFlight, src: Source, now: float,
                       out: list[Dump]) -> None:
        lim = self.limits
        while self._src_bytes[src] > lim.max_bytes_per_source:
            victim = self._oldest(src, skip=current) or current
            out.append(self._finalise(victim, CAPACITY, now))
            if victim is current:
                return
        while self._bytes > lim.max_bytes:
            victim = self._oldest(None, skip=current) or current
            out.append(self._finalise(victim, CAPACITY, now))
            if victim is current:
                return

    def _oldest(self, src: Source | None, skip: _InFlight | None = None) -> _InFlight | None:
        """The least recently active dump in flight (of ``src`` if given)."""
        for entry in self._inflight.values():
            if entry is not skip and (src is None or entry.key[:2] == src):
                return entry
        return None

    def _finalise(self, entry: _InFlight, why: str, now: float) -> Dump:
        key = entry.key
        del self._inflight[key]
        src = (key[0], key[1])
        self._src_dumps[src] -= 1
        self._src_bytes[src] -= entry.nbytes
        if not self._src_dumps[src]:
            del self._src_dumps[src], self._src_bytes[src]
        self._bytes -= entry.nbytes
        stats = self.stats
        missing = [no for no, c in enumerate(entry.chunks) if c is None]
        if missing:
            stats["dumps_partial"] += 1
            stats["partial_" + why] += 1
        else:
            stats["dumps_complete"] += 1
            why = COMPLETE
        self._remember(key, entry, now)
        return self._build(entry, missing, why)

    def _remember(self, key: Key, entry: _InFlight, now: float) -> None:
        old = self._recent.pop(key, None)
        if old is not None:
            self._recent_packets -= len(old.hashes)
        chunks = entry.chunks
        self._recent[key] = _Done(
            entry.head, entry.tail,
            array("q", [0 if c is None else hash(c) for c in chunks]),
            frozenset(no for no, c in enumerate(chunks) if c is None),
            now + self.limits.recent_ttl)
        self._recent_packets += len(chunks)
        while self._recent and (len(self._recent) > self.limits.max_recent or
                                self._recent_packets > self.limits.max_recent_packets):
            _, done = self._recent.popitem(last=False)
            self._recent_packets -= len(done.hashes)

    def _forget(self, now: float) -> None:
        while self._recent:
            key, done = next(iter(self._recent.items()))
            if done.expires > now:
                break
            del self._recent[key]
            self._recent_packets -= len(done.hashes)

    def _build(self, entry: _InFlight, missing: list[int], why: str) -> Dump:
        first = next(c for c in entry.chunks if c is not None)
        pkt = proto.decode(first)
        return Dump(
            source=entry.key[0], port=entry.key[1], boot_id=pkt.boot_id,
            dump_id=pkt.dump_id, type=pkt.type,
            kernel_version=proto.cstring(pkt.kernel_version),
            user_blob=proto.cstring(pkt.user_blob),
            x86_vendor=pkt.x86_vendor, x86_family=pkt.x86_family,
            x86_model=pkt.x86_model, x86_stepping=pkt.x86_stepping,
            regs=pkt.registers, packet_count=entry.count, missing=missing,
            log=assemble(entry.chunks, entry.data_offset),
            first_packet=entry.first_wall, finalised=self.wallclock(),
            finalised_by=why)


def gap_marker(missing: list[int], count: int) -> str:
    """The line that stands in for missing chunks in a partial log."""
    n = len(missing)
    return (f"--- netoops: {n} chunk{'s' if n > 1 else ''} of {count} missing here "
            f"(packet_no {ranges(missing)}, up to {n * proto.DATA_BYTES} bytes) ---")


def assemble(chunks: Sequence[bytes | None], data_offset: int = proto.DATA_OFFSET) -> str:
    """The log text: oldest chunk (highest packet_no) first, NULs removed.

    Each run of missing chunks is replaced by a :func:`gap_marker` line.
    """
    count = len(chunks)
    parts: list[bytes] = []
    gap: list[int] = []
    end = data_offset + proto.DATA_BYTES
    line_start = True

    for no in range(count - 1, -1, -1):
        chunk = chunks[no]
        if chunk is None:
            gap.append(no)
            continue
        if gap:
            parts.append(_marker_line(gap, count, line_start))
            gap.clear()
            line_start = True
        text = chunk[data_offset:end].replace(b"\0", b"")
        if text:
            parts.append(text)
            line_start = text.endswith(b"\n")
    if gap:
        parts.append(_marker_line(gap, count, line_start))
    return b"".join(parts).decode("utf-8", "replace")


def _marker_line(gap: list[int], count: int, line_start: bool) -> bytes:
    line = gap_marker(sorted(gap), count).encode() + b"\n"
    return line if line_start else b"\n" + line
