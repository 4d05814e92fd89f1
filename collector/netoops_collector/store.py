# SPDX-License-Identifier: GPL-2.0
"""SQLite storage of finalised dumps, their derived reports and the stats.

Only ``serve`` writes (:class:`Store`); the query commands open the database
read-only (:func:`open_readonly`) and never create one.  Each batch of
finalised dumps is written in one transaction together with the stats
counted up to that moment, so a dump is either stored whole or not at all.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any, Iterable

from . import proto
from .reassembly import Dump
from .report import Report, kind_of

SCHEMA_VERSION = 1

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS dumps (
    id               INTEGER PRIMARY KEY,
    received         REAL NOT NULL,     -- unix time the dump was finalised
    first_packet     REAL NOT NULL,     -- unix time its first packet arrived
    source           TEXT NOT NULL,     -- sender address
    source_port      INTEGER NOT NULL,
    boot_id          INTEGER NOT NULL,
    dump_id          INTEGER NOT NULL,
    type             INTEGER NOT NULL,  -- wire type: 1 oops/panic, 3 soft
    kind             TEXT NOT NULL CHECK (kind IN ('oops', 'panic', 'soft')),
    kernel_version   TEXT NOT NULL,
    user_blob        TEXT NOT NULL,
    cpu_vendor       INTEGER NOT NULL,
    cpu_vendor_name  TEXT NOT NULL,
    cpu_family       INTEGER NOT NULL,
    cpu_model        INTEGER NOT NULL,
    cpu_stepping     INTEGER NOT NULL,
    {", ".join(f"{r} TEXT NOT NULL" for r in proto.REG_NAMES)},  -- 0x%016x
    packet_count     INTEGER NOT NULL,
    packets_received INTEGER NOT NULL,
    complete         INTEGER NOT NULL,  -- 1: every chunk arrived
    missing          TEXT NOT NULL,     -- JSON list of missing packet_no
    finalised_by     TEXT NOT NULL,     -- complete, timeout, capacity, shutdown
    log              TEXT NOT NULL,
    title            TEXT NOT NULL,
    crash_kind       TEXT,              -- oops, warning, panic; NULL: none found
    guilty           TEXT,
    signature        TEXT NOT NULL,
    signature_frames TEXT NOT NULL,     -- JSON list of function names
    taint            TEXT NOT NULL,
    comm             TEXT,
    frames           TEXT NOT NULL,     -- JSON list of frame objects
    rip_frame        TEXT               -- the kernel RIP frame, as text
);
CREATE INDEX IF NOT EXISTS dumps_signature ON dumps (signature);
CREATE INDEX IF NOT EXISTS dumps_title ON dumps (title);
CREATE INDEX IF NOT EXISTS dumps_received ON dumps (received);
CREATE INDEX IF NOT EXISTS dumps_origin ON dumps (source, boot_id, dump_id);
CREATE INDEX IF NOT EXISTS dumps_kernel ON dumps (kernel_version);
CREATE INDEX IF NOT EXISTS dumps_taint ON dumps (taint);
CREATE TABLE IF NOT EXISTS dump_frames (
    dump     INTEGER NOT NULL REFERENCES dumps (id),
    pos      INTEGER NOT NULL,
    func     TEXT,
    offset   INTEGER,
    size     INTEGER,
    address  TEXT,                      -- a frame without a symbol: 0x...
    module   TEXT,
    reliable INTEGER NOT NULL,
    context  TEXT NOT NULL,
    PRIMARY KEY (dump, pos)
);
CREATE INDEX IF NOT EXISTS dump_frames_func ON dump_frames (func);
CREATE TABLE IF NOT EXISTS dump_modules (
    dump  INTEGER NOT NULL REFERENCES dumps (id),
    name  TEXT NOT NULL,
    flags TEXT NOT NULL,
    PRIMARY KEY (dump, name)
);
CREATE INDEX IF NOT EXISTS dump_modules_name ON dump_modules (name);
CREATE TABLE IF NOT EXISTS stats (
    name  TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
"""

_DUMP_COLUMNS: tuple[str, ...] = (
    "received", "first_packet", "source", "source_port", "boot_id", "dump_id",
    "type", "kind", "kernel_version", "user_blob", "cpu_vendor",
    "cpu_vendor_name", "cpu_family", "cpu_model", "cpu_stepping",
    *proto.REG_NAMES, "packet_count", "packets_received", "complete",
    "missing", "finalised_by", "log", "title", "crash_kind", "guilty",
    "signature", "signature_frames", "taint", "comm", "frames", "rip_frame",
)
_INSERT_DUMP = (f"INSERT INTO dumps ({', '.join(_DUMP_COLUMNS)}) "
                f"VALUES ({', '.join('?' * len(_DUMP_COLUMNS))})")


class StoreError(Exception):
    """A database that is missing, unreadable or not a collector database."""


def default_db_path() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "share")
    return Path(base) / "netoops" / "collector.sqlite3"


def _row(dump: Dump, rep: Report) -> tuple[Any, ...]:
    values: dict[str, Any] = {
        "received": dump.finalised, "first_packet": dump.first_packet,
        "source": dump.source, "source_port": dump.port,
        "boot_id": dump.boot_id, "dump_id": dump.dump_id, "type": dump.type,
        "kind": kind_of(dump.type, dump.log),
        "kernel_version": dump.kernel_version, "user_blob": dump.user_blob,
        "cpu_vendor": dump.x86_vendor,
        "cpu_vendor_name": proto.VENDORS.get(dump.x86_vendor, f"vendor {dump.x86_vendor}"),
        "cpu_family": dump.x86_family, "cpu_model": dump.x86_model,
        "cpu_stepping": dump.x86_stepping,
        "packet_count": dump.packet_count,
        "packets_received": dump.packets_received,
        "complete": int(dump.complete), "missing": json.dumps(dump.missing),
        "finalised_by": dump.finalised_by, "log": dump.log,
        "title": rep.title, "crash_kind": rep.kind, "guilty": rep.guilty,
        "signature": rep.signature,
        "signature_frames": json.dumps(rep.signature_frames),
        "taint": rep.taint, "comm": rep.comm,
        "frames": json.dumps([f.as_dict() for f in rep.frames]),
        "rip_frame": rep.rip.text() if rep.rip else None,
    }
    for name, value in dump.regs.items():
        values[name] = f"{value:#018x}"
    return tuple(values[c] for c in _DUMP_COLUMNS)


class Store:
    """The writer's connection (used by ``serve`` only)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise StoreError(f"{self.path.parent}: cannot create: {err.strerror}") from err
        try:
            self.conn = sqlite3.connect(self.path, isolation_level=None, timeout=30)
            self.conn.execute("PRAGMA journal_mode=WAL")
            # A commit survives a crash of this process (not of the machine).
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.executescript(_SCHEMA)
            self.conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)",
                              (str(SCHEMA_VERSION),))
        except sqlite3.DatabaseError as err:
            raise StoreError(f"{self.path}: cannot use as a collector database: {err}") from err

    def save(self, items: Iterable[tuple[Dump, Report]],
             stats: dict[str, int] | None = None) -> list[int]:
        """Store dumps (and add ``stats`` deltas) in one transaction; returns ids."""
        ids: list[int] = []
        cur = self.conn.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            for dump, rep in items:
                cur.execute(_INSERT_DUMP, _row(dump, rep))
                dump_no = cur.lastrowid
                assert dump_no is not None
                ids.append(dump_no)
                cur.executemany(
                    "INSERT INTO dump_frames VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [(dump_no, i, f.func, f.offset, f.size,
                      None if f.address is None else f"{f.address:#x}", f.module,
                      int(f.reliable), f.context) for i, f in enumerate(rep.frames)])
                cur.executemany("INSERT OR IGNORE INTO dump_modules VALUES (?, ?, ?)",
                                [(dump_no, name, flags) for name, flags in rep.modules])
            if stats:
                self._add_stats(cur, stats)
            cur.execute("COMMIT")
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        return ids

    @staticmethod
    def _add_stats(cur: sqlite3.Cursor, stats: dict[str, int]) -> None:
        cur.executemany(
            "INSERT INTO stats VALUES (?, ?) "
            "ON CONFLICT (name) DO UPDATE SET value = value + excluded.value",
            [(k, v) for k, v in stats.items() if v])

    def close(self) -> None:
        self.conn.close()


# -- read side ----------------------------------------------------------------
def open_readonly(path: str | os.PathLike[str]) -> sqlite3.Connection:
    """Open an existing collector database read-only; :class:`StoreError` if not."""
    p = Path(path)
    if not p.exists():
        raise StoreError(f"{p}: no such database (has `netoops-collector serve` run? "
                         "choose another with --db)")
    if not p.is_file():
        raise StoreError(f"{p}: not a database file")
    if not os.access(p, os.R_OK):
        raise StoreError(f"{p}: not readable (permission denied)")
    try:
        conn = sqlite3.connect(p.resolve().as_uri() + "?mode=ro", uri=True, timeout=10)
        conn.row_factory = sqlite3.Row
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except sqlite3.DatabaseError as err:
        raise StoreError(f"{p}: not a netoops collector database ({err})") from err
    if row is None:
        raise StoreError(f"{p}: not a netoops collector database (no schema version)")
    if int(row[0]) > SCHEMA_VERSION:
        raise StoreError(f"{p}: schema version {row[0]} is newer than this collector")
    return conn


def _decode(row: sqlite3.Row) -> dict[str, Any]:
    out = dict(row)
    for key in ("missing", "frames", "signature_frames"):
        if key in out:
            out[key] = json.loads(out[key])
    if "complete" in out:
        out["complete"] = bool(out["complete"])
    return out


def list_dumps(conn: sqlite3.Connection, limit: int | None = None) -> list[dict[str, Any]]:
    sql = ("SELECT id, received, source, source_port, boot_id, dump_id, kind,"
           " kernel_version, title, signature, complete, packet_count,"
           " packets_received FROM dumps ORDER BY id")
    if limit:
        sql = f"SELECT * FROM ({sql} DESC LIMIT {int(limit)}) ORDER BY id"
    return [_decode(r) for r in conn.execute(sql)]


def get_dump(conn: sqlite3.Connection, dump_no: int) -> dict[str, Any] | None:
    row = conn.execute("SELECT * FROM dumps WHERE id = ?", (dump_no,)).fetchone()
    if row is None:
        return None
    out = _decode(row)
    out["registers"] = {r: out.pop(r) for r in proto.REG_NAMES}
    # netoops sends zeros when the dump has no fault (a plain panic, a
    # lockup, a soft dump), never registers of its own.
    out["fault_registers"] = any(int(str(v), 0) for v in out["registers"].values())
    out["modules"] = [{"name": n, "flags": f} for n, f in conn.execute(
        "SELECT name, flags FROM dump_modules WHERE dump = ? ORDER BY rowid", (dump_no,))]
    return out


def groups(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """Dumps per signature: counts, first and last seen, kernels and hosts."""
    out = []
    for r in conn.execute(
            "SELECT signature, COUNT(*) AS dumps,"
            " COUNT(DISTINCT source || ' ' || boot_id) AS boots,"
            " COUNT(DISTINCT source) AS host_count,"
            " MIN(received) AS first_seen, MAX(received) AS last_seen,"
            " MAX(id) AS last_id"
            " FROM dumps GROUP BY signature ORDER BY dumps DESC, last_seen DESC"):
        g = dict(r)
        g["title"] = conn.execute("SELECT title FROM dumps WHERE id = ?",
                                  (g["last_id"],)).fetchone()[0]
        g["kernels"] = [k for (k,) in conn.execute(
            "SELECT DISTINCT kernel_version FROM dumps WHERE signature = ? ORDER BY 1",
            (g["signature"],))]
        g["hosts"] = [h for (h,) in conn.execute(
            "SELECT DISTINCT source FROM dumps WHERE signature = ? ORDER BY 1",
            (g["signature"],))]
        g["ids"] = [i for (i,) in conn.execute(
            "SELECT id FROM dumps WHERE signature = ? ORDER BY id", (g["signature"],))]
        out.append(g)
    return out


def stats(conn: sqlite3.Connection) -> dict[str, Any]:
    counters = {name: value for name, value in conn.execute(
        "SELECT name, value FROM stats ORDER BY name")}
    row = conn.execute(
        "SELECT COUNT(*), COALESCE(SUM(complete), 0), COUNT(DISTINCT signature)"
        " FROM dumps").fetchone()
    return {"counters": counters,
            "stored": {"dumps": row[0], "complete": row[1], "partial": row[0] - row[1],
                       "signatures": row[2]}}
