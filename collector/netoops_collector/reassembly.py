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
as duplicates instead of starting a new dump.  A partial dump is remembered
with its chunks: a chunk it lacks that arrives in that window (a later copy,
a slow path) reopens it, and it is finalised again with the same ``uid`` and
a higher ``revision``, to replace what was stored.  In that window a packet
with the key that is not a copy of the finalised dump (its header differs,
or it carries other bytes for a packet_no the dump has) contradicts it and
is rejected as a conflict: two dumps of one boot have different dump_ids
(netoops_wire.h).  After the window the key is free again, so a machine that
reboots without a new boot_id and crashes with the same dump_id is still
recorded.

Work and memory are bounded by what arrived, never by what a header claims:
chunks are kept by packet_no in a dict, missing chunks are computed as
ranges, and every structure is charged in bytes.  Caps are kept per source
*address* (one host on many ports is one source): a source over its own
caps finalises its own least recently active dump; when the totals are
exceeded, the newest dump of the address with the most dumps in flight goes
first, so one address cannot evict or finalise another's dumps in progress.
The table of finalised dumps is bounded per address the same way, so a flood
from one address cannot make a real dump forget its copies.
"""

from __future__ import annotations

import time
from array import array
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from . import proto

_PREFIX_UNPACK = proto.PREFIX.unpack_from
_PACKET_SIZE, _VERSION, _ARCH = proto.PACKET_SIZE, proto.VERSION, proto.ARCH_X86
_DATA_OFFSET, _ARCH_OFFSET = proto.DATA_OFFSET, proto.ARCH_OFFSET
_TYPES = frozenset(proto.TYPES)
_IDENT_HEAD, _IDENT_TAIL = proto.IDENT_HEAD, proto.IDENT_TAIL

Key = tuple[str, int, int, int, int]     # (address, port, boot_id, dump_id, type)

# What the accounting charges, in bytes (CPython sizes, rounded up): a chunk
# kept in flight (its 1024 data bytes, the bytes object and its dict slot), a
# dump in flight or remembered (the objects, the first packet, dict slots),
# and a remembered complete dump per packet (one hash in an array).
CHUNK_COST = 1024 + 96
# (source, counter) pairs counted between two flushes; beyond this, new
# sources are counted together under OTHER_SOURCES.
MAX_SOURCE_COUNTERS = 1 << 14
OTHER_SOURCES = "(other sources)"
ENTRY_COST = _PACKET_SIZE + 1024
HASH_COST = 8

# Why a dump was finalised.
COMPLETE, TIMEOUT, CAPACITY, SHUTDOWN = "complete", "timeout", "capacity", "shutdown"

STAT_NAMES: tuple[str, ...] = (
    "packets",            # datagrams seen
    "accepted",           # chunks kept (first copy of a packet_no)
    "duplicates",         # identical copies, before or after finalisation
    "late",               # chunks that reopened or joined a dump finalised as partial
    "late_dropped",       # ... that did not fit in memory (the dump stays as stored)
    *(f"rejected_{r}" for r in proto.REASONS),
    "rejected_conflict",  # contradicts the earlier packets of its dump
    "rejected_rate",      # would start a dump beyond its address's share of new dumps
    "dumps_complete",     # dumps stored complete (a repaired dump moves here)
    "dumps_partial",      # dumps stored partial
    "dumps_repaired",     # times late chunks replaced a stored partial dump
    "partial_timeout",    # finalisations as partial by the quiet timeout,
    "partial_capacity",   # ... early (never dropped) by the memory caps,
    "partial_shutdown",   # ... at shutdown
)


@dataclass
class Limits:
    """Memory bounds, in dumps and in bytes as charged (see CHUNK_COST)."""

    quiet_timeout: float = 10.0
    # The most packets a dump may claim (1 KiB of log each).
    max_packet_count: int = proto.MAX_PACKET_COUNT
    # Dumps in flight: in total, and per source address.
    max_dumps: int = 4096
    max_bytes: int = 256 << 20
    max_dumps_per_source: int = 256
    max_bytes_per_source: int = 32 << 20
    # Finalised dumps remembered, for ``recent_ttl`` seconds after their last
    # packet: in total, and per source address.
    recent_ttl: float = 60.0
    max_recent: int = 16384
    max_recent_bytes: int = 64 << 20
    max_recent_per_source: int = 1024
    max_recent_bytes_per_source: int = 16 << 20
    # New dumps an address may start: this many at once, and as many again
    # per window after that.  A machine starts one per crash (its three
    # copies are one dump); a flood of forged headers is turned away here,
    # before it costs a dump in flight, a finalisation and an analysis.
    max_new_dumps_per_source: int = 1024
    new_dumps_window: float = 60.0

    @property
    def bound(self) -> int:
        """Most bytes the reassembler holds (in flight and remembered)."""
        return self.max_bytes + self.max_recent_bytes


@dataclass
class Dump:
    """A finalised dump, as it is stored.

    ``uid`` numbers the dumps of one reassembler; when late chunks repair a
    dump that was finalised as partial, it is finalised again with the same
    ``uid`` and a higher ``revision``, and replaces what was stored.

    A dump taken whole from the C receiver also has ``log_bytes`` (not a
    field): the bytes ``log`` was decoded from, which the journal writes
    as they are.
    """

    uid: int
    revision: int
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
    packets_received: int
    missing: list[tuple[int, int]]   # packet_no ranges (inclusive) never received
    log: str
    first_packet: float
    finalised: float
    finalised_by: str

    @property
    def complete(self) -> bool:
        return self.packets_received == self.packet_count


def format_ranges(pairs: Sequence[tuple[int, int]]) -> str:
    """[(1, 3), (7, 7)] -> "1-3,7"."""
    return ",".join(f"{a}-{b}" if b != a else f"{a}" for a, b in pairs)


def parse_ranges(text: str) -> list[tuple[int, int]]:
    """"1-3,7" -> [(1, 3), (7, 7)]."""
    out: list[tuple[int, int]] = []
    for part in filter(None, text.split(",")):
        a, _, b = part.partition("-")
        out.append((int(a), int(b or a)))
    return out


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


class SourceBudget:
    """A token bucket per source address: ``burst`` at once, refilled at
    ``burst`` per ``window`` seconds; the least recently seen sources are
    forgotten beyond ``max_sources``."""

    def __init__(self, burst: int, window: float, max_sources: int = 1 << 16) -> None:
        self.burst = burst
        self.rate = burst / window
        self.max_sources = max_sources
        self._b: OrderedDict[str, list[float]] = OrderedDict()   # source -> [tokens, when]

    def take(self, source: str, now: float) -> bool:
        b = self._b.get(source)
        if b is None:
            b = self._b[source] = [float(self.burst), now]
            if len(self._b) > self.max_sources:
                self._b.popitem(last=False)
        else:
            self._b.move_to_end(source)
            b[0] = min(float(self.burst), b[0] + (now - b[1]) * self.rate)
            b[1] = now
        if b[0] < 1.0:
            return False
        b[0] -= 1.0
        return True


@dataclass(eq=False)
class _Entry:
    """A dump in flight (or remembered as partial, with its chunks)."""

    key: Key
    uid: int
    first: bytes                # the first packet received: the header, the x86 block
    data_offset: int
    count: int
    first_wall: float
    last_seen: float
    revision: int = 0
    chunks: dict[int, bytes] = field(default_factory=dict)   # packet_no -> data
    cost: int = ENTRY_COST

    def same_dump(self, buf: bytes) -> bool:
        first = self.first
        return (buf[:_IDENT_HEAD] == first[:_IDENT_HEAD]
                and buf[_IDENT_TAIL:self.data_offset] == first[_IDENT_TAIL:self.data_offset])


@dataclass(eq=False)
class _Done:
    """A finalised dump, remembered to tell its later copies."""

    entry: _Entry                       # a complete one keeps no chunks
    hashes: array[int] | None           # complete: hash of each chunk by packet_no
    expires: float
    cost: int


@dataclass(eq=False)
class _Addr:
    """What one source address holds."""

    inflight: OrderedDict[Key, _Entry] = field(default_factory=OrderedDict)  # least active first
    nbytes: int = 0
    recent: OrderedDict[Key, None] = field(default_factory=OrderedDict)
    recent_bytes: int = 0


class Reassembler:
    """Turns datagrams into finalised :class:`Dump` s.

    ``feed``, ``expire`` and ``flush`` return the dumps they finalised.
    ``now`` arguments are monotonic seconds; wall-clock times for the stored
    dumps come from ``wallclock``.
    """

    def __init__(self, limits: Limits | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 wallclock: Callable[[], float] = time.time,
                 chunk_hash: Callable[[bytes], int] = hash) -> None:
        self.limits = limits or Limits()
        # What a complete dump remembers of each chunk, to tell a copy
        # (the C receiver's nrx_hash() when its groups are fed).
        self.chunk_hash = chunk_hash
        self.clock = clock
        self.wallclock = wallclock
        self.stats: dict[str, int] = dict.fromkeys(STAT_NAMES, 0)
        self._max_count = self.limits.max_packet_count
        self._inflight: OrderedDict[Key, _Entry] = OrderedDict()   # least active first
        self._recent: OrderedDict[Key, _Done] = OrderedDict()     # least active first
        self._addrs: dict[str, _Addr] = {}
        # Addresses by how many dumps they have in flight, for the heaviest.
        self._by_count: dict[int, dict[str, None]] = {}
        self._top = 0
        self._bytes = 0
        self._recent_bytes = 0
        self._uid = 0
        self._starts = SourceBudget(self.limits.max_new_dumps_per_source,
                                    self.limits.new_dumps_window)
        # What went wrong, per source address, since the last flush.
        self.source_delta: dict[tuple[str, str], int] = {}

    # -- introspection -------------------------------------------------
    @property
    def inflight(self) -> int:
        return len(self._inflight)

    @property
    def inflight_bytes(self) -> int:
        return self._bytes

    @property
    def recent_bytes(self) -> int:
        return self._recent_bytes

    @property
    def held_bytes(self) -> int:
        """Everything charged: dumps in flight and finalised dumps remembered."""
        return self._bytes + self._recent_bytes

    def next_deadline(self) -> float | None:
        """Monotonic time at which the stalest dump in flight times out."""
        for entry in self._inflight.values():
            return entry.last_seen + self.limits.quiet_timeout
        return None

    def note(self, source: str, name: str) -> None:
        """Count ``name`` for ``source`` (see :attr:`source_delta`)."""
        delta = self.source_delta
        key = (source, name)
        if key not in delta and len(delta) >= MAX_SOURCE_COUNTERS:
            key = (OTHER_SOURCES, name)
        delta[key] = delta.get(key, 0) + 1

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
                or not 0 <= hdr[7] < hdr[6] <= self._max_count):
            try:
                hdr = proto.check(buf, self._max_count)
            except proto.DecodeError as err:
                stats["rejected_" + err.reason] += 1
                self.note(source, "rejected_" + err.reason)
                return ()
        if now is None:
            now = self.clock()
        no = hdr[7]
        key = (source, port, hdr[8], hdr[1], hdr[5])
        data = buf[_DATA_OFFSET:]
        out: list[Dump] = []
        entry = self._inflight.get(key)
        if entry is None:
            done = self._recent.get(key)
            if done is not None and done.expires <= now:
                self._drop_recent(key)
                done = None
            if done is not None:
                entry = self._copy_of_finalised(key, done, buf, no, data, now, out)
                if entry is None:
                    return out
            elif self._starts.take(source, now):
                entry = self._start(key, buf, hdr[6], now, out)
            else:
                stats["rejected_rate"] += 1
                self.note(source, "rejected_rate")
                return ()
        elif not entry.same_dump(buf):
            stats["rejected_conflict"] += 1
            self.note(source, "rejected_conflict")
            return ()
        else:
            self._inflight.move_to_end(key)
            self._addrs[source].inflight.move_to_end(key)
            entry.last_seen = now
            have = entry.chunks.get(no)
            if have is not None:
                if have == data:
                    stats["duplicates"] += 1
                else:
                    stats["rejected_conflict"] += 1
                    self.note(source, "rejected_conflict")
                return ()
        entry.chunks[no] = data
        entry.cost += CHUNK_COST
        self._bytes += CHUNK_COST
        addr = self._addrs[source]
        addr.nbytes += CHUNK_COST
        stats["accepted"] += 1
        if len(entry.chunks) == entry.count:
            out.append(self._finalise(entry, COMPLETE, now))
        elif self._bytes > self.limits.max_bytes or \
                addr.nbytes > self.limits.max_bytes_per_source:
            self._enforce_bytes(entry, addr, now, out)
        return out

    def feed_group(self, packets: bytes | memoryview, hashes: array[int], source: str, port: int,
                   now: float | None = None) -> Sequence[Dump]:
        """Take a whole dump at once: ``packets`` holds packet_no 0 to n-1 in
        order, each a packet that passed the fast path's checks, with one
        header but for packet_no (the C receiver's :class:`rx.Group`), and
        ``hashes`` their chunk_hash.  The result is what feeding them one by
        one gives; where that could differ (part of the dump is already
        here, or it does not fit without evicting), they are fed so.
        ``packets`` may be a view of a buffer reused after this returns:
        nothing here keeps it."""
        if now is None:
            now = self.clock()
        self.whole_taken = None
        n = len(hashes)
        first = bytes(packets[:_PACKET_SIZE])
        hdr = _PREFIX_UNPACK(first)
        key = (source, port, hdr[8], hdr[1], hdr[5])
        cost = ENTRY_COST + n * CHUNK_COST
        addr = self._addrs.get(source)
        lim = self.limits
        if (len(packets) != n * _PACKET_SIZE or hdr[6] != n or n > self._max_count
                or hdr[7] != 0 or key in self._inflight or key in self._recent
                or self._bytes + cost > lim.max_bytes
                or (addr.nbytes if addr else 0) + cost > lim.max_bytes_per_source
                or not self._starts.take(source, now)):
            out: list[Dump] = []
            feed = self.feed
            for at in range(0, len(packets), _PACKET_SIZE):
                out += feed(bytes(packets[at:at + _PACKET_SIZE]), source, port, now)
            return out
        out = []
        entry = self._start(key, first, n, now, out)
        # The log straight from the packets (oldest chunk first, NULs
        # removed), as assemble() gives it for a complete dump.
        view = memoryview(packets)
        raw = b"".join([view[at + _DATA_OFFSET:at + _PACKET_SIZE]
                        for at in range((n - 1) * _PACKET_SIZE, -1, -_PACKET_SIZE)])
        charge = n * CHUNK_COST
        entry.cost += charge
        self._bytes += charge
        self._addrs[source].nbytes += charge
        stats = self.stats
        stats["packets"] += n
        stats["accepted"] += n
        dump = self._finalise(entry, COMPLETE, now, hashes, raw.replace(b"\0", b""))
        self.whole_taken = dump
        out.append(dump)
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
        while self._recent:
            key, done = next(iter(self._recent.items()))
            if done.expires > now:
                break
            self._drop_recent(key)
        return out

    def flush(self, now: float | None = None) -> list[Dump]:
        """Finalise everything in flight (at shutdown)."""
        if now is None:
            now = self.clock()
        return [self._finalise(entry, SHUTDOWN, now)
                for entry in list(self._inflight.values())]

    # -- a packet for a finalised dump ---------------------------------
    def _copy_of_finalised(self, key: Key, done: _Done, buf: bytes, no: int,
                           data: bytes, now: float, out: list[Dump]) -> _Entry | None:
        """A duplicate, a conflict, or a late chunk: then the reopened entry."""
        stats = self.stats
        entry = done.entry
        if not entry.same_dump(buf):
            stats["rejected_conflict"] += 1
            self.note(key[0], "rejected_conflict")
            return None
        done.expires = now + self.limits.recent_ttl
        self._recent.move_to_end(key)
        self._addrs[key[0]].recent.move_to_end(key)
        if done.hashes is not None:
            same = done.hashes[no] == self.chunk_hash(data)
        else:
            have = entry.chunks.get(no)
            same = have == data if have is not None else None
        if same is not None:
            if same:
                stats["duplicates"] += 1
            else:
                stats["rejected_conflict"] += 1
                self.note(key[0], "rejected_conflict")
            return None
        if not self._fits(key[0], entry.cost + CHUNK_COST):
            # Reopening would evict other work (and, under pressure, thrash):
            # the stored partial dump stands.  A later copy may still repair
            # it when Python reads the socket; the C receiver drops exact
            # copies for 30 to 60 s, so there it stays as stored.
            stats["late_dropped"] += 1
            self.note(key[0], "late_dropped")
            return None
        stats["late"] += 1
        self._drop_recent(key)
        entry.revision += 1
        entry.last_seen = now
        self._track(entry)
        return entry

    # -- admission and eviction ----------------------------------------
    def _start(self, key: Key, buf: bytes, count: int, now: float,
               out: list[Dump]) -> _Entry:
        self._admit(key[0], now, out)
        self._uid += 1
        entry = _Entry(key, self._uid, buf, _DATA_OFFSET, count, self.wallclock(), now)
        self._track(entry)
        return entry

    def _admit(self, source: str, now: float, out: list[Dump]) -> None:
        """Make room for one more dump of ``source``."""
        lim = self.limits
        addr = self._addrs.get(source)
        while addr is not None and len(addr.inflight) >= lim.max_dumps_per_source:
            out.append(self._finalise(self._least_active(addr), CAPACITY, now))
        while len(self._inflight) >= lim.max_dumps:
            out.append(self._finalise(self._heaviest_newest(), CAPACITY, now))

    def _fits(self, source: str, cost: int) -> bool:
        """Whether one more dump of ``cost`` bytes fits without finalising any."""
        lim = self.limits
        addr = self._addrs[source]
        return (len(self._inflight) < lim.max_dumps
                and len(addr.inflight) < lim.max_dumps_per_source
                and self._bytes + cost <= lim.max_bytes
                and addr.nbytes + cost <= lim.max_bytes_per_source)

    def _track(self, entry: _Entry) -> None:
        """Count a new or reopened ``entry`` as in flight."""
        source = entry.key[0]
        addr = self._addrs.get(source)
        if addr is None:
            addr = self._addrs[source] = _Addr()
        self._inflight[entry.key] = entry
        self._move(source, len(addr.inflight), len(addr.inflight) + 1)
        addr.inflight[entry.key] = entry
        addr.nbytes += entry.cost
        self._bytes += entry.cost

    def _untrack(self, entry: _Entry) -> _Addr:
        source = entry.key[0]
        addr = self._addrs[source]
        del self._inflight[entry.key]
        self._move(source, len(addr.inflight), len(addr.inflight) - 1)
        del addr.inflight[entry.key]
        addr.nbytes -= entry.cost
        self._bytes -= entry.cost
        return addr

    def _move(self, source: str, old: int, new: int) -> None:
        if old:
            bucket = self._by_count[old]
            del bucket[source]
            if not bucket:
                del self._by_count[old]
        if new:
            self._by_count.setdefault(new, {})[source] = None
        if new > self._top:
            self._top = new
        while self._top and self._top not in self._by_count:
            self._top -= 1

    def _heaviest_newest(self) -> _Entry:
        """The most recently active dump of the address with the most dumps in flight."""
        source = next(iter(self._by_count[self._top]))
        return next(reversed(self._addrs[source].inflight.values()))

    @staticmethod
    def _least_active(addr: _Addr, skip: _Entry | None = None) -> _Entry:
        for entry in addr.inflight.values():
            if entry is not skip:
                return entry
        assert skip is not None
        return skip

    def _enforce_bytes(self, current: _Entry, addr: _Addr, now: float,
                       out: list[Dump]) -> None:
        lim = self.limits
        while addr.nbytes > lim.max_bytes_per_source:
            victim = self._least_active(addr, skip=current)
            out.append(self._finalise(victim, CAPACITY, now))
            if victim is current:
                return
        while self._bytes > lim.max_bytes:
            victim = self._heaviest_newest()
            out.append(self._finalise(victim, CAPACITY, now))
            if victim is current:
                return

    # -- finalisation --------------------------------------------------
    def _finalise(self, entry: _Entry, why: str, now: float,
                  hashes: array[int] | None = None, whole: bytes | None = None) -> Dump:
        """``whole``: the log's bytes of a dump taken whole (it keeps no chunks)."""
        self._untrack(entry)
        stats = self.stats
        complete = whole is not None or len(entry.chunks) == entry.count
        if entry.revision:
            stats["dumps_repaired"] += 1
            if complete:
                stats["dumps_partial"] -= 1
                stats["dumps_complete"] += 1
        elif complete:
            stats["dumps_complete"] += 1
        else:
            stats["dumps_partial"] += 1
        if complete:
            why = COMPLETE
        else:
            stats["partial_" + why] += 1
            if why == CAPACITY:
                self.note(entry.key[0], "partial_capacity")
        dump = self._build(entry, why, whole)
        self._remember(entry, complete, now, hashes)
        return dump

    def _remember(self, entry: _Entry, complete: bool, now: float,
                  hashes: array[int] | None = None) -> None:
        key = entry.key
        lim = self.limits
        if complete:
            if hashes is None:
                chunks = entry.chunks
                chunk_hash = self.chunk_hash
                hashes = array("q", [chunk_hash(chunks[no]) for no in range(entry.count)])
            cost = ENTRY_COST + HASH_COST * entry.count
            entry.chunks = {}
            done = _Done(entry, hashes, now + lim.recent_ttl, cost)
        else:
            done = _Done(entry, None, now + lim.recent_ttl, entry.cost)
        source = key[0]
        addr = self._addrs.get(source)
        if addr is None:
            addr = self._addrs[source] = _Addr()
        self._recent[key] = done
        addr.recent[key] = None
        addr.recent_bytes += done.cost
        self._recent_bytes += done.cost
        while len(addr.recent) > lim.max_recent_per_source or \
                addr.recent_bytes > lim.max_recent_bytes_per_source:
            self._drop_recent(next(iter(addr.recent)))
        while len(self._recent) > lim.max_recent or self._recent_bytes > lim.max_recent_bytes:
            self._drop_recent(next(iter(self._recent)))

    def _drop_recent(self, key: Key) -> None:
        done = self._recent.pop(key)
        source = key[0]
        addr = self._addrs[source]
        del addr.recent[key]
        addr.recent_bytes -= done.cost
        self._recent_bytes -= done.cost
        if not addr.recent and not addr.inflight:
            del self._addrs[source]

    def _build(self, entry: _Entry, why: str, whole: bytes | None = None) -> Dump:
        pkt = proto.decode(entry.first)
        if whole is not None:
            received, missing = entry.count, []
            log = whole.decode("utf-8", "replace")
        else:
            present = sorted(entry.chunks)
            received, missing = len(present), gaps(present, entry.count)
            log = assemble(entry.chunks, entry.count)
        dump = Dump(
            uid=entry.uid, revision=entry.revision,
            source=entry.key[0], port=entry.key[1], boot_id=pkt.boot_id,
            dump_id=pkt.dump_id, type=pkt.type,
            kernel_version=proto.cstring(pkt.kernel_version),
            user_blob=proto.cstring(pkt.user_blob),
            x86_vendor=pkt.x86_vendor, x86_family=pkt.x86_family,
            x86_model=pkt.x86_model, x86_stepping=pkt.x86_stepping,
            regs=pkt.registers, packet_count=entry.count,
            packets_received=received, missing=missing, log=log,
            first_packet=entry.first_wall, finalised=self.wallclock(),
            finalised_by=why)
        if whole is not None:
            dump.log_bytes = whole  # type: ignore[attr-defined]
        return dump


def gaps(present: Sequence[int], count: int) -> list[tuple[int, int]]:
    """The ranges of packet_no in [0, count) not in the sorted ``present``."""
    out: list[tuple[int, int]] = []
    expect = 0
    for no in present:
        if no > expect:
            out.append((expect, no - 1))
        expect = no + 1
    if expect < count:
        out.append((expect, count - 1))
    return out


def gap_marker(first: int, last: int, count: int) -> str:
    """The line that stands in for missing chunks ``first..last`` in a partial log."""
    n = last - first + 1
    where = f"{first}-{last}" if n > 1 else f"{first}"
    return (f"--- netoops: {n} chunk{'s' if n > 1 else ''} of {count} missing here "
            f"(packet_no {where}, up to {n * proto.DATA_BYTES} bytes) ---")


def assemble(chunks: Mapping[int, bytes], count: int) -> str:
    """The log text: oldest chunk (highest packet_no) first, NULs removed.

    ``chunks`` maps packet_no to the data of the chunks present.  Each run
    of missing chunks is replaced by a :func:`gap_marker` line; the work is
    bounded by the chunks present, not by ``count``.
    """
    parts: list[bytes] = []
    line_start = True
    expect = count - 1                  # the next packet_no, going down
    for no in sorted(chunks, reverse=True):
        if no < expect:
            parts.append(_marker_line(no + 1, expect, count, line_start))
            line_start = True
        expect = no - 1
        text = chunks[no][:proto.DATA_BYTES].replace(b"\0", b"")
        if text:
            parts.append(text)
            line_start = text.endswith(b"\n")
    if expect >= 0:
        parts.append(_marker_line(0, expect, count, line_start))
    return b"".join(parts).decode("utf-8", "replace")


def _marker_line(first: int, last: int, count: int, line_start: bool) -> bytes:
    line = gap_marker(first, last, count).encode() + b"\n"
    return line if line_start else b"\n" + line
