# SPDX-License-Identifier: GPL-2.0
"""Netconsole datagrams: parsing, fragment reassembly, streams per boot.

Two formats arrive on the netconsole port (Documentation/networking/
netconsole.rst):

* basic: console text as printed, any number of lines per datagram, the
  last one possibly cut (the rest follows in the next datagram);
* extended (``+`` on the target): one printk record per datagram,
  ``[<release>,]<prio>,<seq>,<ts_us>,<flags>[,<key>=<value>...];<text>``,
  then a newline and `` KEY=value`` lines (the record's dictionary, and the
  target's userdata and sysdata: ``cpu``, ``taskname``, ``release``,
  ``msgid``).  A record too long for one datagram comes in pieces whose
  header has ``ncfrag=<offset>/<total>``; the body is cut at any byte.

Nothing here does I/O: :class:`Streams` takes datagrams with their source
and arrival time and returns the lines to store, each in its stream (one
source, one boot), counting what was lost on the way.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

DEFAULT_PORT = 6666
MAX_TEXT = 8192             # bytes of one line's text kept (the rest cut)
MAX_RECORD = 64 << 10       # a fragmented record's total, at most
FRAG_TIMEOUT = 5.0          # seconds a record's missing pieces are waited for
MAX_FRAGS = 1024            # records in pieces at once
PARTIAL_TIMEOUT = 2.0       # seconds a basic line without its newline waits
REORDER = 256               # a late record is at most this far behind
BOOT_BACK = 1_000_000       # us the timestamp may go back before it is a new boot
MAX_STREAMS = 65536         # sources followed at once (the least recent go)
_MAX_SEQ = (1 << 63) - 1    # what SQLite's integers hold

_HEAD = re.compile(rb"^(?:([^,;\s]+),)?(\d{1,10}),(\d{1,20}),(\d{1,20}),([^,;]*)((?:,[^;]*)?);")
_FRAG = re.compile(rb"(?:^|,)ncfrag=(\d{1,10})/(\d{1,10})(?:,|$)")
_ESC = re.compile(rb"\\x([0-9a-fA-F]{2})")
_TIME = re.compile(r"^(?:<\d+>)?\[\s*(\d+)\.(\d{6})\](?:\[\s*[TC]\d+\])?\s?")


@dataclass
class Record:
    """One extended record, whole: what a line is made of."""

    prio: int
    seq: int
    ts_us: int
    cont: bool
    text: str                   # as sent: non-printable bytes escaped \\xNN
    meta: list[str]             # the KEY=value lines, without their space
    release: str | None = None
    cut: bool = False           # pieces of it never came


class Line(NamedTuple):
    """A line to store, in stream ``stream`` (see :class:`Streams`): a tuple
    in the order of the columns it is inserted into (ncstore.write)."""

    stream: int
    arrival: float
    seq: int | None
    level: int | None
    ts_us: int | None
    cont: bool
    cut: bool
    text: str
    meta: str | None = None     # KEY=value lines, "\n"-separated


@dataclass
class Stream:
    """One source's lines of one boot."""

    id: int
    source: str
    port: int
    extended: bool
    first_arrival: float
    last_arrival: float
    release: str | None = None
    first_seq: int | None = None
    last_seq: int | None = None
    last_ts: int | None = None
    lines: int = 0
    lost: int = 0
    ended: str | None = None    # why a newer stream of its source took over
    # seqs skipped (counted lost) that may still come late, newest last
    gaps: list[tuple[int, int]] = field(default_factory=list)
    recent: OrderedDict[int, int] = field(default_factory=OrderedDict)  # seq -> ts_us

    def row(self) -> dict[str, object]:
        return {k: getattr(self, k) for k in (
            "id", "source", "port", "extended", "first_arrival", "last_arrival", "release",
            "first_seq", "last_seq", "lines", "lost", "ended")}


def unescape(text: str) -> str:
    """The kernel's ``\\xNN`` escapes of an extended record undone.  The
    kernel escapes every byte of UTF-8 text beyond ASCII: the bytes are put
    back, then decoded."""
    if "\\x" not in text:
        return text
    raw = _ESC.sub(lambda m: bytes([int(m.group(1), 16)]), text.encode("utf-8"))
    return raw.decode("utf-8", "replace")


def printk_time(line: str) -> tuple[int | None, str]:
    """A log line's ``[   12.345678]`` time in microseconds (or None), and
    its text after the time."""
    m = _TIME.match(line)
    if not m:
        return None, line
    return int(m.group(1)) * 1_000_000 + int(m.group(2)), line[m.end():]


def _text(raw: bytes) -> str:
    return raw[:MAX_TEXT].decode("utf-8", "replace")


def is_extended(data: bytes) -> bool:
    return _HEAD.match(data) is not None


def _meta(rest: bytes) -> str | None:
    """The KEY=value lines after a record's text, one per line, without the
    space the kernel puts in front."""
    if not rest:
        return None
    text = ("\n" + rest[:MAX_TEXT].decode("utf-8", "replace")).replace("\n ", "\n")
    return text.strip("\n") or None


def parse_body(body: bytes) -> tuple[str, list[str]]:
    """An extended record's body: its text and its KEY=value lines (the
    text's own newlines are escaped, so every later line is one)."""
    text, _, rest = body.partition(b"\n")
    meta = _meta(rest)
    return _text(text), meta.split("\n") if meta else []


def describe(data: bytes) -> dict[str, object]:
    """One datagram as it stands, for comparing with other decoders (the
    Wireshark dissector): extended or not, the header's fields, the text
    (an ncfrag piece's part of it), the KEY=value lines."""
    m = _HEAD.match(data)
    if m is None:
        return {"extended": False, "text": _text(data.rstrip(b"\n"))}
    frag = _FRAG.search(m.group(6)) if m.group(6) else None
    text, meta = parse_body(data[m.end():])
    return {"extended": True,
            "release": m.group(1).decode("ascii", "replace") if m.group(1) else None,
            "prio": int(m.group(2)), "seq": int(m.group(3)), "ts_us": int(m.group(4)),
            "flags": m.group(5).decode("ascii", "replace"),
            "frag": (int(frag.group(1)), int(frag.group(2))) if frag else None,
            "text": text, "meta": meta}


@dataclass
class _Pieces:
    head: tuple[bytes | None, int, int, int, bytes]
    total: int
    first: float
    parts: dict[int, bytes] = field(default_factory=dict)
    have: int = 0


class Streams:
    """Datagrams in, lines out, per source and boot.

    ``next_id`` gives new stream ids (the store's, so that they survive a
    restart); ``known`` the latest stream of each source at start.  A
    source's extended records start a new stream (a new boot) when their
    release changes, or when a sequence number goes back that is neither a
    late record filling a gap nor a copy of a recent one.  Basic text
    starts a new stream at the kernel's banner (``Linux version``).
    """

    def __init__(self, next_id: Callable[[], int],
                 known: dict[tuple[str, int], Stream] | None = None) -> None:
        self.next_id = next_id
        self.current: dict[tuple[str, int], Stream] = dict(known or {})
        self.changed: dict[int, Stream] = {}        # streams to write back
        self._frags: OrderedDict[tuple[str, int, int], _Pieces] = OrderedDict()
        self._partial: dict[tuple[str, int], tuple[bytes, float]] = {}
        self.stats = {"netconsole_datagrams": 0, "netconsole_lines": 0,
                      "netconsole_lost": 0, "netconsole_late": 0,
                      "netconsole_duplicates": 0, "netconsole_fragments": 0,
                      "netconsole_cut": 0, "netconsole_malformed": 0,
                      "netconsole_boots": 0}

    # -- input -----------------------------------------------------------
    def feed(self, data: bytes, source: str, port: int, now: float) -> list[Line]:
        """The lines ``data`` completes (none while a record is in pieces)."""
        self.stats["netconsole_datagrams"] += 1
        m = _HEAD.match(data)
        if m is None:
            return self._basic(data, source, port, now)
        release = m.group(1).decode("ascii", "replace") if m.group(1) else None
        prio, seq, ts = int(m.group(2)), int(m.group(3)), int(m.group(4))
        if seq > _MAX_SEQ or ts > _MAX_SEQ:
            self.stats["netconsole_malformed"] += 1
            return []
        flags, extra = m.group(5), m.group(6)
        body = data[m.end():]
        frag = _FRAG.search(extra) if extra else None
        if frag is None:
            st = self.current.get((source, port))
            if (st is not None and st.extended and st.last_seq is not None
                    and seq == st.last_seq + 1
                    and (st.last_ts is None or ts >= st.last_ts - BOOT_BACK)
                    and (release is None or release == st.release)
                    and (st.release is not None or b"release=" not in body)):
                # The common case, kept short: the next record of a stream.
                text, _, rest = body.partition(b"\n")
                st.last_seq, st.last_ts = seq, ts
                recent = st.recent
                recent[seq] = ts
                if len(recent) > REORDER:
                    recent.popitem(last=False)
                st.lines += 1
                st.last_arrival = now
                self.changed[st.id] = st
                self.current[(source, port)] = self.current.pop((source, port))  # most recent
                self.stats["netconsole_lines"] += 1
                return [Line(st.id, now, seq, prio & 7, ts, b"c" in flags, False,
                             text[:MAX_TEXT].decode("utf-8", "replace"), _meta(rest))]
            text, meta = parse_body(body)
            rec = Record(prio, seq, ts, b"c" in flags, text, meta, release)
            return self._record(rec, source, port, now)
        off, total = int(frag.group(1)), int(frag.group(2))
        if total > MAX_RECORD or off + len(body) > total:
            self.stats["netconsole_malformed"] += 1
            return []
        self.stats["netconsole_fragments"] += 1
        key = (source, port, seq)
        out: list[Line] = []
        pieces = self._frags.get(key)
        if pieces is None:
            if len(self._frags) >= MAX_FRAGS:
                out += self._give_up(next(iter(self._frags)), now)
            pieces = self._frags[key] = _Pieces((m.group(1), prio, seq, ts, flags), total, now)
        if off not in pieces.parts:
            pieces.parts[off] = body
            pieces.have += len(body)
        if pieces.have >= pieces.total:
            body, whole = self._join(pieces)
            if whole:           # overlapping pieces may still leave a hole
                del self._frags[key]
                text, meta = parse_body(body)
                rec = Record(prio, seq, ts, b"c" in flags, text, meta, release)
                out += self._record(rec, source, port, now)
        return out

    def expire(self, now: float) -> list[Line]:
        """Records whose pieces stopped coming (stored marked cut), basic
        text that never got its newline (stored as it is: a line printed
        without one); and the sources followed beyond MAX_STREAMS, the
        least recent first, are forgotten (their streams stay stored)."""
        out: list[Line] = []
        while self._frags:
            key, pieces = next(iter(self._frags.items()))
            if pieces.first + FRAG_TIMEOUT > now:
                break
            out += self._give_up(key, now)
        for key, (text, since) in list(self._partial.items()):
            if since + PARTIAL_TIMEOUT <= now:
                del self._partial[key]
                out += self._basic_line(text, key[0], key[1], now, cut=False)
        while len(self.current) > MAX_STREAMS:     # a dict keeps the most recent last
            del self.current[next(iter(self.current))]
        return out

    def next_deadline(self) -> float | None:
        times = [p.first + FRAG_TIMEOUT for p in list(self._frags.values())[:1]]
        times += [since + PARTIAL_TIMEOUT for _, since in self._partial.values()]
        return min(times) if times else None

    def take_changed(self) -> list[Stream]:
        out, self.changed = list(self.changed.values()), {}
        return out

    # -- extended --------------------------------------------------------
    @staticmethod
    def _join(pieces: _Pieces) -> tuple[bytes, bool]:
        """The body from offset 0 as far as the pieces reach, and whether
        that is all of it."""
        out, at = [], 0
        for off in sorted(pieces.parts):
            if off > at:
                break
            part = pieces.parts[off]
            out.append(part[at - off:])
            at = max(at, off + len(part))
        return b"".join(out), at >= pieces.total

    def _give_up(self, key: tuple[str, int, int], now: float) -> list[Line]:
        pieces = self._frags.pop(key)
        body, whole = self._join(pieces)
        rel, prio, seq, ts, flags = pieces.head
        text, meta = parse_body(body)
        rec = Record(prio, seq, ts, b"c" in flags, text, meta,
                     rel.decode("ascii", "replace") if rel else None, cut=not whole)
        out = self._record(rec, key[0], key[1], now)
        if out and not whole:
            self.stats["netconsole_cut"] += 1
        return out

    def _record(self, rec: Record, source: str, port: int, now: float) -> list[Line]:
        st = self.current.get((source, port))
        if st is not None and not st.extended:
            if st.lines:
                st.ended = "extended records"
                self.changed[st.id] = st
            st = None
        if st is not None and st.last_seq is not None:
            verdict = self._place(st, rec)
            if verdict in ("copy", "stale"):
                self.stats["netconsole_duplicates"] += 1
                return []
            if verdict == "boot":
                st.ended = "a new boot"
                self.changed[st.id] = st
                st = None
        if st is None:
            st = self._open(source, port, True, now, rec.release)
            st.first_seq = rec.seq
        elif rec.seq > (st.last_seq if st.last_seq is not None else -1):
            skipped = rec.seq - st.last_seq - 1 if st.last_seq is not None else 0
            if skipped > 0:
                st.lost += skipped
                self.stats["netconsole_lost"] += skipped
                st.gaps.append((st.last_seq + 1, rec.seq - 1))
                del st.gaps[:-64]
        if st.last_seq is None or rec.seq > st.last_seq:
            st.last_seq, st.last_ts = rec.seq, rec.ts_us
        st.recent[rec.seq] = rec.ts_us
        while len(st.recent) > REORDER:
            st.recent.popitem(last=False)
        if rec.release and not st.release:
            st.release = rec.release
        for m in rec.meta:
            if m.startswith("release=") and not st.release:
                st.release = m[8:]
        return [self._line(st, now, Line(
            st.id, now, rec.seq, rec.prio & 7, rec.ts_us, rec.cont, rec.cut, rec.text,
            "\n".join(rec.meta) or None))]

    def _place(self, st: Stream, rec: Record) -> str:
        """"next", "late" (fills a gap), "copy", "stale" (at most REORDER
        behind, seen or not: after a restart the collector does not know)
        or "boot" for ``rec`` in ``st``.  A new boot: a new release, or a
        timestamp that goes back (the sequence number may go on, if the
        collector missed the reboot), or a sequence number far behind."""
        assert st.last_seq is not None
        if rec.release and st.release and rec.release != st.release:
            return "boot"
        if st.last_ts is not None and rec.ts_us < st.last_ts - BOOT_BACK:
            return "boot"
        if rec.seq > st.last_seq:
            return "next"
        if st.recent.get(rec.seq) == rec.ts_us:
            return "copy"
        if st.last_seq - rec.seq > REORDER:
            return "boot"
        if rec.seq not in st.recent:
            for i, (lo, hi) in enumerate(st.gaps):
                if lo <= rec.seq <= hi:
                    parts = [(lo, rec.seq - 1), (rec.seq + 1, hi)]
                    st.gaps[i:i + 1] = [(a, b) for a, b in parts if a <= b]
                    st.lost -= 1
                    self.stats["netconsole_lost"] -= 1
                    self.stats["netconsole_late"] += 1
                    return "late"
        return "stale"

    # -- basic -------------------------------------------------------------
    def _basic(self, data: bytes, source: str, port: int, now: float) -> list[Line]:
        key = (source, port)
        held = self._partial.pop(key, None)
        if held is not None:
            data = held[0] + data
        *whole, rest = data.split(b"\n")
        out: list[Line] = []
        for raw in whole:
            out += self._basic_line(raw, source, port, now, cut=False)
        if rest:
            if len(rest) > MAX_TEXT:
                out += self._basic_line(rest, source, port, now, cut=True)
            else:
                self._partial[key] = (rest, held[1] if held else now)
        return out

    def _basic_line(self, raw: bytes, source: str, port: int, now: float,
                    cut: bool) -> list[Line]:
        text = _text(raw.rstrip(b"\r"))
        ts, body = printk_time(text)
        st = self.current.get((source, port))
        if st is not None and (st.extended or body.startswith("Linux version ")):
            if st.lines:
                st.ended = "a new boot" if not st.extended else "basic text"
                self.changed[st.id] = st
                st = None
        if st is None:
            st = self._open(source, port, False, now, None)
        return [self._line(st, now, Line(st.id, now, None, None, ts, False, cut, text))]

    # -- streams -------------------------------------------------------------
    def _open(self, source: str, port: int, extended: bool, now: float,
              release: str | None) -> Stream:
        st = Stream(self.next_id(), source, port, extended, now, now, release)
        self.current[(source, port)] = st
        self.stats["netconsole_boots"] += 1
        return st

    def _line(self, st: Stream, now: float, line: Line) -> Line:
        key = (st.source, st.port)
        self.current[key] = self.current.pop(key, st)      # the most recent last
        st.lines += 1
        st.last_arrival = now
        self.changed[st.id] = st
        self.stats["netconsole_lines"] += 1
        return line
