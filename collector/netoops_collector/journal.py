# SPDX-License-Identifier: GPL-2.0
"""The journal: finalised dumps made durable before they are analysed.

``serve`` appends every dump it finalises to ``<db>.journal.<n>`` and
syncs the file (``fdatasync``) once per receive round, before analysis and
the SQLite commit, which run behind in their own thread.  A dump is kept in
the journal until it is stored in the database (or in the spool file, or
counted and dropped by a source budget); a segment whose dumps are all
stored is deleted, the current one is emptied.  At start, the dumps of the
segments left by a collector that died are stored, except those its
database already holds.

A record: ``NJR1``, u32 length of the JSON metadata (the :class:`Dump`
without its log), u32 length of the log (UTF-8), u32 CRC-32 of both; then
the metadata and the log.  A record cut short by a crash, or damaged,
ends what is read of its segment.
"""

from __future__ import annotations

import dataclasses
import json
import os
import struct
import threading
import zlib
from pathlib import Path

from .reassembly import Dump

_HEAD = struct.Struct("<4sIII")
_MAGIC = b"NJR1"
SEGMENT_BYTES = 64 << 20        # a segment is closed beyond this


class JournalError(OSError):
    """The journal could not be written or synced."""


_META = tuple(f.name for f in dataclasses.fields(Dump) if f.name != "log")


def encode_parts(dump: Dump) -> tuple[bytes, bytes]:
    """A record as its head (with the metadata) and its log, not joined:
    the log is most of it, and is written from where it is."""
    meta = {name: getattr(dump, name) for name in _META}    # no deep copy of the log
    log = getattr(dump, "log_bytes", None)     # decoded with "replace", as on replay
    if log is None:
        log = dump.log.encode("utf-8", "surrogateescape")
    raw = json.dumps(meta, separators=(",", ":")).encode()
    return _HEAD.pack(_MAGIC, len(raw), len(log), zlib.crc32(log, zlib.crc32(raw))) + raw, log


def encode(dump: Dump) -> bytes:
    return b"".join(encode_parts(dump))


def numbered(prefix: str) -> list[tuple[int, Path]]:
    """The files ``<prefix><n>`` (n all digits), as (n, path) by n: the
    journal's segments, and a C receiver's packet log segments."""
    base = Path(prefix)
    out = []
    for p in base.parent.glob(base.name + "*"):
        tail = p.name[len(base.name):]
        if tail.isdigit():
            out.append((int(tail), p))
    return sorted(out)


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def _write_all(fd: int, parts: list[bytes]) -> None:
    """Write ``parts`` in order with writev(), however little each call takes."""
    views = [memoryview(p) for p in parts if p]
    i = 0
    while i < len(views):
        n = os.writev(fd, views[i:i + 1024])    # IOV_MAX
        while n:
            if n >= len(views[i]):
                n -= len(views[i])
                i += 1
            else:
                views[i] = views[i][n:]
                n = 0


def decode(buf: bytes) -> tuple[list[Dump], bool]:
    """The dumps of a segment, and whether it ended cleanly."""
    out: list[Dump] = []
    off = 0
    while off + _HEAD.size <= len(buf):
        magic, nmeta, nlog, crc = _HEAD.unpack_from(buf, off)
        start = off + _HEAD.size
        end = start + nmeta + nlog
        if magic != _MAGIC or end > len(buf):
            return out, False
        raw, log = buf[start:start + nmeta], buf[start + nmeta:end]
        if zlib.crc32(log, zlib.crc32(raw)) != crc:
            return out, False
        try:
            meta = json.loads(raw)
            meta["missing"] = [tuple(r) for r in meta["missing"]]
            out.append(Dump(log=log.decode("utf-8", "replace"), **meta))
        except (ValueError, TypeError, KeyError):
            return out, False
        off = end
    return out, off == len(buf)


class Journal:
    """Segments ``<db>.journal.<n>``; thread-safe (the receive loop appends,
    the storing thread releases)."""

    def __init__(self, db: Path, segment_bytes: int = SEGMENT_BYTES) -> None:
        self.dir = db.parent
        self.prefix = db.name + ".journal."
        self.segment_bytes = segment_bytes
        self._lock = threading.Lock()
        self._where: dict[tuple[int, int], int] = {}    # (uid, revision) -> segment
        self._count: dict[int, int] = {}                # segment -> dumps not stored
        # Packet log segments (the C receiver's) that hold dumps not stored.
        self._held: dict[tuple[int, int], list[Path]] = {}  # (uid, revision) -> segments
        self._held_count: dict[Path, int] = {}
        self._closed: set[Path] = set()     # no longer written: deleted when emptied
        found = self.segments()
        self._seq = found[-1][0] + 1 if found else 1
        self._fd = -1
        self._size = 0
        self.bytes = 0          # in all segments

    def path(self, seq: int) -> Path:
        return self.dir / f"{self.prefix}{seq:08d}"

    def packet_log_prefix(self, receiver: int) -> str:
        """Where C receiver number ``receiver`` writes its packet log:
        ``<db>.packets<receiver>.<seq>``."""
        return str(self.dir / f"{self.prefix[:-len('journal.')]}packets{receiver}.")

    def packet_logs(self) -> list[Path]:
        """Every packet log segment of every receiver, oldest first in each."""
        stem = self.prefix[:-len("journal.")] + "packets"
        found = []
        for p in self.dir.glob(stem + "*"):
            receiver, _, seq = p.name[len(stem):].partition(".")
            if receiver.isdigit() and seq.isdigit():
                found.append((int(receiver), int(seq), p))
        return [p for _, _, p in sorted(found)]

    def segments(self) -> list[tuple[int, Path]]:
        return numbered(str(self.dir / self.prefix))

    # -- the receive loop ------------------------------------------------
    def write(self, dumps: list[Dump]) -> None:
        """Write ``dumps`` (not yet synced: see :meth:`sync`)."""
        parts = [part for d in dumps for part in encode_parts(d)]
        size = sum(len(p) for p in parts)
        with self._lock:
            try:
                if self._fd < 0:
                    self._fd = os.open(self.path(self._seq),
                                       os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC,
                                       0o600)
                    self._sync_dir()
                try:
                    _write_all(self._fd, parts)
                except OSError:     # no torn record for later ones to follow
                    os.ftruncate(self._fd, self._size)
                    raise
                seq = self._seq
                if self._size + size >= self.segment_bytes:
                    os.fdatasync(self._fd)      # closed: synced here, not by sync()
                    os.close(self._fd)
                    self._fd = -1
                    self._seq += 1
            except OSError as err:
                raise JournalError(err.errno, f"{self.path(self._seq)}: {err.strerror}") \
                    from None
            for d in dumps:
                old = self._where.get((d.uid, d.revision))
                self._where[(d.uid, d.revision)] = seq
                self._count[seq] = self._count.get(seq, 0) + 1
                if old is not None:     # counted after the new one: never empties it
                    self._drop(old)
            self._size = 0 if seq != self._seq else self._size + size
            self.bytes += size

    def sync(self) -> None:
        """Make what was written durable.  The lock is not held meanwhile, so
        writing and releasing go on (the current file is synced through a
        duplicate descriptor; a segment closed since was synced on closing)."""
        with self._lock:
            if self._fd < 0:
                return
            try:
                fd = os.dup(self._fd)
            except OSError as err:
                raise JournalError(err.errno, f"journal: {err.strerror}") from None
        try:
            os.fdatasync(fd)
        except OSError as err:
            raise JournalError(err.errno, f"{self.path(self._seq)}: {err.strerror}") from None
        finally:
            os.close(fd)

    def append(self, dumps: list[Dump]) -> None:
        """Write ``dumps`` and sync: when this returns they survive a crash."""
        self.write(dumps)
        self.sync()

    def _sync_dir(self) -> None:
        fd = os.open(self.dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    # -- the storing thread ----------------------------------------------
    def release(self, dump: Dump) -> None:
        """``dump`` is stored (or deliberately not): the journal may forget it."""
        with self._lock:
            seq = self._where.pop((dump.uid, dump.revision), None)
            if seq is not None:
                self._drop(seq)
            for path in self._held.pop((dump.uid, dump.revision), ()):
                self._unhold(path)

    # -- the packet log ----------------------------------------------------
    def hold(self, dump: Dump, paths: list[Path]) -> None:
        """``dump`` is durable in packet log segments ``paths`` (not in a
        segment of this journal): they stay until it is released."""
        with self._lock:
            self._held[(dump.uid, dump.revision)] = paths
            for path in paths:
                self._held_count[path] = self._held_count.get(path, 0) + 1

    def unhold(self, dump: Dump) -> None:
        """``dump`` goes into this journal after all (the packet log failed)."""
        with self._lock:
            for path in self._held.pop((dump.uid, dump.revision), ()):
                self._unhold(path)

    def _unhold(self, path: Path) -> None:
        left = self._held_count[path] - 1
        if left:
            self._held_count[path] = left
            return
        del self._held_count[path]
        if path in self._closed:
            self._closed.discard(path)
            _remove(path)

    def log_closed(self, paths: list[Path]) -> None:
        """These packet log segments are written no more: delete those that
        hold nothing to store, and the others once they do not."""
        with self._lock:
            for path in paths:
                if path in self._held_count:
                    self._closed.add(path)
                else:
                    _remove(path)

    def _drop(self, seq: int) -> None:
        left = self._count[seq] - 1
        if left:
            self._count[seq] = left
            return
        del self._count[seq]
        if seq != self._seq:
            self._unlink(seq)
        elif self._fd >= 0:      # the current segment: emptied in place
            try:
                os.ftruncate(self._fd, 0)
            except OSError:
                return
            self.bytes -= self._size
            self._size = 0

    def _unlink(self, seq: int) -> None:
        path = self.path(seq)
        try:
            self.bytes -= path.stat().st_size
            path.unlink()
        except OSError:
            pass

    # -- start -------------------------------------------------------------
    def replay(self) -> tuple[list[tuple[Dump, int]], list[str]]:
        """The dumps of the segments found at start (before any append), with
        their segment, and a note for each segment that ended damaged."""
        dumps: list[tuple[Dump, int]] = []
        notes = []
        for seq, path in self.segments():
            try:
                buf = path.read_bytes()
            except OSError as err:
                notes.append(f"{path}: {err.strerror}")
                continue
            got, clean = decode(buf)
            if not clean:
                notes.append(f"{path}: ends with a damaged or cut record after "
                             f"{len(got)} dump(s)")
            dumps += [(d, seq) for d in got]
            self.bytes += len(buf)
        return dumps, notes

    def keep(self, dump: Dump, seq: int) -> None:
        """A replayed dump to be stored: its segment stays until it is."""
        with self._lock:
            self._where[(dump.uid, dump.revision)] = seq
            self._count[seq] = self._count.get(seq, 0) + 1

    def forget_unkept(self) -> None:
        """Delete the segments found at start that hold nothing to store."""
        with self._lock:
            for seq, _ in self.segments():
                if seq < self._seq and not self._count.get(seq):
                    self._unlink(seq)

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
            if not self._count.get(self._seq):
                self._unlink(self._seq)
