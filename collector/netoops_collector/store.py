# SPDX-License-Identifier: GPL-2.0
"""SQLite storage of finalised dumps, their derived reports and the stats.

Only ``serve`` writes (:class:`Store`); the query commands open the database
read-only (:func:`open_readonly`) and never create one.  Each batch of
finalised dumps is written in one transaction together with the stats
counted up to that moment, so a dump is either stored whole or not at all.

Schema version 2 keeps each log in ``logs`` (so listing dumps never reads
one), each frame once (in ``dump_frames``), the missing packet_no as range
text ("1-3,7") and a NULL signature for a dump without crash text.  Every
connection enforces the foreign keys: deleting a ``dumps`` row deletes its
log, frames and modules.  The writer upgrades a version-1 database in one
transaction when it opens it; the read-only side refuses one and says so.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from pathlib import Path
from typing import Any, Sequence

from . import db, ncstore, proto
from .query import Filter
from .reassembly import Dump, format_ranges, parse_ranges
from .retention import GROUP_HISTORY_TABLE, history
from .report import Report, kind_of

SCHEMA_VERSION = 2

_REG_COLUMNS = ",\n".join(f"    {r:<16} TEXT NOT NULL" for r in proto.REG_NAMES)


def _dumps_table(name: str) -> str:
    return f"""CREATE TABLE {name} (
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
{_REG_COLUMNS},  -- 0x%016x
    packet_count     INTEGER NOT NULL,
    packets_received INTEGER NOT NULL,
    complete         INTEGER NOT NULL,  -- 1: every chunk arrived
    missing          TEXT NOT NULL,     -- packet_no never received: "1-3,7"; "" if none
    finalised_by     TEXT NOT NULL,     -- complete, timeout, capacity, shutdown
    title            TEXT NOT NULL,
    crash_kind       TEXT,              -- oops, warning, panic; NULL: none found
    guilty           TEXT,
    signature        TEXT,              -- NULL: no crash text (never grouped)
    signature_frames TEXT NOT NULL,     -- JSON list of function names
    taint            TEXT NOT NULL,
    comm             TEXT,
    rip_frame        TEXT               -- the kernel RIP frame, as text
)"""


def _frames_table(name: str) -> str:
    return f"""CREATE TABLE {name} (
    dump     INTEGER NOT NULL REFERENCES dumps (id) ON DELETE CASCADE,
    pos      INTEGER NOT NULL,
    func     TEXT,
    offset   INTEGER,
    size     INTEGER,
    address  TEXT,                      -- a frame without a symbol: 0x...
    module   TEXT,
    reliable INTEGER NOT NULL,
    context  TEXT NOT NULL,
    PRIMARY KEY (dump, pos)
)"""


def _modules_table(name: str) -> str:
    return f"""CREATE TABLE {name} (
    dump  INTEGER NOT NULL REFERENCES dumps (id) ON DELETE CASCADE,
    name  TEXT NOT NULL,
    flags TEXT NOT NULL,
    PRIMARY KEY (dump, name)
)"""


# SQLite keeps the modules in their rowid order; PostgreSQL in this column.
_PG_MODULES_SEQ = "ALTER TABLE dump_modules ADD COLUMN seq BIGINT GENERATED ALWAYS AS IDENTITY"


_META_TABLE = """CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
)"""
_STATS_TABLE = """CREATE TABLE stats (
    name  TEXT PRIMARY KEY,
    value INTEGER NOT NULL
)"""
# Counters of what went wrong per source address (rejected datagrams,
# conflicts, dumps finalised early or not stored): who sends junk.
_SOURCE_STATS_TABLE = """CREATE TABLE source_stats (
    source TEXT NOT NULL,
    name   TEXT NOT NULL,
    value  INTEGER NOT NULL,
    PRIMARY KEY (source, name)
)"""
# The latest values of what is measured, not counted (delays, memory held).
_GAUGES_TABLE = """CREATE TABLE gauges (
    name  TEXT PRIMARY KEY,
    value REAL NOT NULL
)"""
_LOGS_TABLE = """CREATE TABLE logs (
    dump INTEGER PRIMARY KEY REFERENCES dumps (id) ON DELETE CASCADE,
    text TEXT NOT NULL
)"""
# The dashboard's aggregates (per group: counts, kernels, hosts, a trend)
# read only this index, not the wide rows: 10,000 dumps in milliseconds.
_DASHBOARD_INDEX = ("CREATE INDEX IF NOT EXISTS dumps_dashboard ON dumps "
                    "(signature, received, kernel_version, source, boot_id)")
# groups() looks dumps up by signature; the origin identifies a dump; the
# frame and module indexes answer "which dumps went through f / had m
# loaded".  A dumps row holds no log any more, so a scan for anything else
# (title, kernel, taint, time) is cheap.
_INDEXES = (
    "CREATE INDEX dumps_signature ON dumps (signature)",
    "CREATE INDEX dumps_origin ON dumps (source, boot_id, dump_id)",
    "CREATE INDEX dump_frames_func ON dump_frames (func)",
    "CREATE INDEX dump_modules_name ON dump_modules (name)",
    _DASHBOARD_INDEX,
)

_DUMP_COLUMNS: tuple[str, ...] = (
    "received", "first_packet", "source", "source_port", "boot_id", "dump_id",
    "type", "kind", "kernel_version", "user_blob", "cpu_vendor",
    "cpu_vendor_name", "cpu_family", "cpu_model", "cpu_stepping",
    *proto.REG_NAMES, "packet_count", "packets_received", "complete",
    "missing", "finalised_by", "title", "crash_kind", "guilty",
    "signature", "signature_frames", "taint", "comm", "rip_frame",
)
_INSERT_DUMP = (f"INSERT INTO dumps (id, {', '.join(_DUMP_COLUMNS)}) "
                f"VALUES ({', '.join('?' * (len(_DUMP_COLUMNS) + 1))})")
_INSERT_NEW = (f"INSERT INTO dumps ({', '.join(_DUMP_COLUMNS)}) "
               f"VALUES ({', '.join('?' * len(_DUMP_COLUMNS))}) RETURNING id")
# The keys of get_dump(), in the order `show --json` has always printed them.
_SHOW_KEYS: tuple[str, ...] = tuple(
    k for k in ("id", *_DUMP_COLUMNS[:_DUMP_COLUMNS.index("title")], "log",
                *_DUMP_COLUMNS[_DUMP_COLUMNS.index("title"):-1], "frames", "rip_frame")
    if k not in proto.REG_NAMES)
_FRAME_COLUMNS = "func, offset, size, address, module, reliable, context"


class StoreError(Exception):
    """A database that is missing, unreadable or not a collector database."""


def default_db_path(sqlite_only: bool = False) -> Any:
    """$NETOOPS_DB (a file or a postgresql:// URL), else collector.sqlite3
    in $STATE_DIRECTORY (a systemd unit's StateDirectory=, /var/lib/netoops
    for netoops-collector.service), else under $XDG_DATA_HOME/netoops or
    ~/.local/share/netoops."""
    env = os.environ.get("NETOOPS_DB")
    if env and not (sqlite_only and db.is_url(env)):
        return parse_db(env)
    state = os.environ.get("STATE_DIRECTORY", "").split(":")[0]
    if state:
        return Path(state) / "collector.sqlite3"
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "share")
    return Path(base) / "netoops" / "collector.sqlite3"


def parse_db(text: str) -> Path | str:
    """``--db``: a PostgreSQL URL as it is, anything else a SQLite file."""
    return text if db.is_url(text) else Path(text)


def display(where: Path | str) -> str:
    """The database, to print (a URL without its password)."""
    return db.redact(where) if db.is_url(where) else str(where)


def local_base(where: Path | str) -> Path:
    """Where ``serve`` keeps its own files (journal, spool): beside a SQLite
    file, or for PostgreSQL in the default directory, named after the
    database (with no password in the name)."""
    if not db.is_url(where):
        return Path(where)
    digest = hashlib.sha256(db.redact(str(where)).encode()).hexdigest()[:12]
    return default_db_path(sqlite_only=True).with_name(f"postgresql-{digest}")


# -- schema version -------------------------------------------------------------
def _schema_version(conn: db.Connection, where: Path | str) -> int | None:
    """The schema version; None for an empty database (no tables at all).

    :class:`StoreError` if the file is not a collector database.
    """
    if db.dialect(conn) == "postgresql":
        sql = ("SELECT table_name FROM information_schema.tables "
               "WHERE table_schema = current_schema()")
    else:
        sql = "SELECT name FROM sqlite_master WHERE type = 'table'"
    try:
        tables = {name for (name,) in conn.execute(sql)}
        if not tables:
            return None
        if "meta" not in tables:
            raise StoreError(f"{where}: not a netoops collector database (no meta table)")
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except db.ERRORS as err:
        raise StoreError(f"{where}: not a netoops collector database ({err})") from err
    if row is None:
        raise StoreError(f"{where}: not a netoops collector database (no schema version)")
    try:
        return int(row[0])
    except (TypeError, ValueError):
        raise StoreError(f"{where}: not a netoops collector database "
                         f"(schema version {row[0]!r})") from None


def _too_new(where: Path | str, version: int) -> StoreError:
    return StoreError(f"{where}: schema version {version} is newer than this collector's "
                      f"({SCHEMA_VERSION}); use a newer netoops-collector")


_TABLES = (_META_TABLE, _STATS_TABLE, _SOURCE_STATS_TABLE, _GAUGES_TABLE, GROUP_HISTORY_TABLE,
           _dumps_table("dumps"), _LOGS_TABLE, _frames_table("dump_frames"),
           _modules_table("dump_modules"))


def _create(cur: sqlite3.Cursor) -> None:
    for sql in (*_TABLES, *_INDEXES):
        cur.execute(sql)
    cur.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))


def _create_pg(cur: db.PgCursor) -> None:
    """The same schema in PostgreSQL, netconsole's tables with it."""
    for sql in (*_TABLES, *(sql for _, sql in ncstore.TABLES)):
        cur.execute(db.pg_ddl(sql))
    cur.execute(_PG_MODULES_SEQ)
    for sql in (*_INDEXES, *ncstore.INDEXES, ncstore.PG_STREAM_BLOCKS):
        cur.execute(sql)
    cur.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))


# -- migration from schema version 1 ----------------------------------------------
def _columns(cur: sqlite3.Cursor, table: str) -> set[str]:
    return {row[1] for row in cur.execute(f"PRAGMA table_info({table})")}


def _pairs(numbers: Sequence[int]) -> list[tuple[int, int]]:
    """[1, 2, 3, 7] -> [(1, 3), (7, 7)]."""
    out: list[tuple[int, int]] = []
    for n in sorted(set(numbers)):
        if out and n == out[-1][1] + 1:
            out[-1] = (out[-1][0], n)
        else:
            out.append((n, n))
    return out


def _v1_missing(text: str, dump_no: int) -> str:
    """A version-1 ``missing`` (JSON list of packet_no) as range text."""
    try:
        numbers = json.loads(text)
        if not isinstance(numbers, list) or not all(type(n) is int for n in numbers):
            raise ValueError("not a list of integers")
    except ValueError as err:
        raise StoreError(f"dump {dump_no}: cannot read its missing list {text!r}: {err}") \
            from None
    return format_ranges(_pairs(numbers))


def _frame_row(dump_no: int, pos: int, f: dict[str, Any]) -> tuple[Any, ...]:
    return (dump_no, pos, f["func"], f["offset"], f["size"], f["address"], f["module"],
            int(f["reliable"]), f["context"])


def _v1_frames(cur: sqlite3.Cursor, dump_no: int, text: str) -> None:
    """Check that ``dump_frames`` holds what the version-1 JSON ``frames`` says.

    They were written together, so they agree; if someone edited one of
    them, the JSON (what `show` printed) wins and the rows are rewritten.
    """
    try:
        want = json.loads(text)
        if want != _frames(cur, dump_no):
            rows = [_frame_row(dump_no, i, f) for i, f in enumerate(want)]
            cur.execute("DELETE FROM dump_frames WHERE dump = ?", (dump_no,))
            cur.executemany("INSERT INTO dump_frames VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    except (ValueError, TypeError, KeyError) as err:
        raise StoreError(f"dump {dump_no}: cannot read its frames: {err!r}") from None


def _check_v1(cur: sqlite3.Cursor, where: Path) -> None:
    """:class:`StoreError` unless the version-1 tables have what is copied."""
    need = {"dumps": {"id", "log", "frames", "missing", *_DUMP_COLUMNS},
            "dump_frames": {"dump", "pos"}, "dump_modules": {"dump", "name", "flags"},
            "stats": {"name", "value"}}
    for table, columns in need.items():
        lacking = columns - _columns(cur, table)
        if lacking:
            raise StoreError(f"{where}: schema version 1 but {table} lacks "
                             f"{', '.join(sorted(lacking))}; not upgrading it")


def _rebuild_dumps(cur: sqlite3.Cursor) -> None:
    """dumps -> dumps_v2 (ids kept) and logs; ``missing`` as range text."""
    missing = [(_v1_missing(text, dump_no), dump_no) for dump_no, text in
               cur.execute("SELECT id, missing FROM dumps").fetchall()]
    copied = [c if c != "signature" else
              "CASE WHEN crash_kind IS NULL THEN NULL ELSE signature END"
              for c in _DUMP_COLUMNS]
    cur.execute(_dumps_table("dumps_v2"))
    cur.execute(f"INSERT INTO dumps_v2 (id, {', '.join(_DUMP_COLUMNS)}) "
                f"SELECT id, {', '.join(copied)} FROM dumps")
    cur.executemany("UPDATE dumps_v2 SET missing = ? WHERE id = ?", missing)
    cur.execute(_LOGS_TABLE)
    cur.execute("INSERT INTO logs (dump, text) SELECT id, log FROM dumps")


def _rebuild_children(cur: sqlite3.Cursor) -> None:
    """dump_frames and dump_modules -> *_v2, with cascading keys, no orphans."""
    cur.execute(_frames_table("dump_frames_v2"))
    cur.execute(f"INSERT INTO dump_frames_v2 (dump, pos, {_FRAME_COLUMNS}) "
                f"SELECT dump, pos, {_FRAME_COLUMNS} FROM dump_frames "
                "WHERE dump IN (SELECT id FROM dumps)")
    cur.execute(_modules_table("dump_modules_v2"))
    cur.execute("INSERT INTO dump_modules_v2 (dump, name, flags) "
                "SELECT dump, name, flags FROM dump_modules "
                "WHERE dump IN (SELECT id FROM dumps) ORDER BY rowid")


def _migrate_1_to_2(cur: sqlite3.Cursor, where: Path) -> None:
    """Rebuild a version-1 database as version 2 (foreign keys off, in a transaction).

    Ids are kept; logs move to ``logs``; the frames JSON goes (after
    :func:`_v1_frames`); ``missing`` becomes range text; a dump without crash
    text (version 1 gave it crash_kind NULL and a signature of its title
    alone, grouping unrelated dumps) gets a NULL signature; frame and module
    rows of dumps that no longer exist (version 1 did not enforce the foreign
    keys) are dropped.  Each table is rebuilt the SQLite way: create the new
    one, copy, drop the old one, rename.
    """
    _check_v1(cur, where)
    for dump_no, frames in cur.execute("SELECT id, frames FROM dumps").fetchall():
        _v1_frames(cur, dump_no, frames)
    _rebuild_dumps(cur)
    _rebuild_children(cur)
    for table in ("dump_frames", "dump_modules", "dumps"):
        cur.execute(f"DROP TABLE {table}")       # and its indexes
    for table in ("dumps", "dump_frames", "dump_modules"):
        cur.execute(f"ALTER TABLE {table}_v2 RENAME TO {table}")
    for sql in _INDEXES:
        cur.execute(sql)
    cur.execute(_SOURCE_STATS_TABLE)
    cur.execute(_GAUGES_TABLE)
    cur.execute(GROUP_HISTORY_TABLE)
    broken = cur.execute("PRAGMA foreign_key_check").fetchall()
    if broken:
        raise StoreError(f"{where}: upgrade left rows without their dump: {broken[:5]}")
    cur.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                (str(SCHEMA_VERSION),))


# -- the writer -------------------------------------------------------------------
def _row(dump: Dump, rep: Report) -> list[Any]:
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
        "complete": int(dump.complete), "missing": format_ranges(dump.missing),
        "finalised_by": dump.finalised_by,
        "title": rep.title, "crash_kind": rep.kind, "guilty": rep.guilty,
        "signature": rep.signature,
        "signature_frames": json.dumps(rep.signature_frames),
        "taint": rep.taint, "comm": rep.comm,
        "rip_frame": rep.rip.text() if rep.rip else None,
    }
    for name, value in dump.regs.items():
        values[name] = f"{value:#018x}"
    return [values[c] for c in _DUMP_COLUMNS]


def _connect_pg(url: str, readonly: bool = False) -> db.PgConnection:
    """A PostgreSQL database, its schema created if it has none (one
    collector creates it; the others wait for it on a lock)."""
    name = db.redact(url)
    try:
        conn = db.PgConnection(url, readonly)
    except ImportError as err:
        raise StoreError(f"{name}: {err}") from None
    except db.ERRORS as err:
        raise StoreError(f"{name}: cannot connect: {str(err).strip()}") from err
    try:
        version = _schema_version(conn, name)
        if version is None and not readonly:
            cur = conn.cursor()
            cur.execute("BEGIN")
            try:
                db.serialise(cur, "schema")
                version = _schema_version(conn, name)       # again, under the lock
                if version is None:
                    _create_pg(cur)
                    version = SCHEMA_VERSION
                cur.execute("COMMIT")
            except BaseException:
                cur.execute("ROLLBACK")
                raise
        if version is None:
            raise StoreError(f"{name}: not a netoops collector database (no tables; "
                             "`netoops-collector serve` creates them)")
        if version != SCHEMA_VERSION:
            raise _too_new(name, version) if version > SCHEMA_VERSION else \
                StoreError(f"{name}: unknown schema version {version}")
    except StoreError:
        conn.close()
        raise
    except db.ERRORS as err:
        conn.close()
        raise StoreError(f"{name}: cannot use as a collector database: {err}") from err
    return conn


class Store:
    """The writer's connection (used by ``serve`` only).

    Opening creates a new database, upgrades a version-1 one, and refuses
    (:class:`StoreError`, nothing changed) a newer or a foreign one.
    ``busy_timeout`` is how long a statement waits for another writer's
    lock before it fails with ``database is locked``.
    """

    def __init__(self, path: str | os.PathLike[str], busy_timeout: float = 1.0) -> None:
        self.upgraded_from: int | None = None     # the version migrated, if any
        self.url = str(path) if db.is_url(path) else None
        self.path = Path(path) if self.url is None else Path()
        self.name = db.redact(self.url) if self.url else str(self.path)
        if self.url is None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise StoreError(f"{self.path.parent}: cannot create: {err.strerror}") from err
        self.conn: Any = self.connect(busy_timeout)

    def connect(self, busy_timeout: float = 1.0) -> Any:
        """Open, check and if need be create or upgrade the database."""
        if self.url is not None:
            return _connect_pg(self.url)
        try:
            # One thread at a time: serve opens it, its storing thread uses it.
            conn = sqlite3.connect(self.path, isolation_level=None, timeout=busy_timeout,
                                   check_same_thread=False)
        except sqlite3.Error as err:
            raise StoreError(f"{self.path}: cannot open: {err}") from err
        try:
            version = _schema_version(conn, self.path)    # reads only
            if version is not None and version > SCHEMA_VERSION:
                raise _too_new(self.path, version)
            conn.execute("PRAGMA journal_mode=WAL")
            # A commit survives a crash of this process (not of the machine).
            # FULL: a dump leaves serve's journal once its commit returns,
            # so the commit must survive a power loss too.
            conn.execute("PRAGMA synchronous=FULL")
            if version != SCHEMA_VERSION:
                self._prepare(conn)
            else:       # made before these tables were added to version 2
                for name, sql in (("source_stats", _SOURCE_STATS_TABLE),
                                  ("gauges", _GAUGES_TABLE),
                                  ("group_history", GROUP_HISTORY_TABLE)):
                    if not _has_table(conn, name):
                        conn.execute(sql)
                conn.execute(_DASHBOARD_INDEX)
            conn.execute("PRAGMA foreign_keys=ON")
        except StoreError:
            conn.close()
            raise
        except sqlite3.DatabaseError as err:
            conn.close()
            raise StoreError(f"{self.path}: cannot use as a collector database: {err}") \
                from err
        return conn

    def _prepare(self, conn: sqlite3.Connection) -> None:
        """Create or upgrade the schema in one transaction (another writer waits)."""
        # Off while tables are rebuilt (a no-op inside a transaction), or
        # dropping the old dumps table would delete or orphan its children.
        conn.execute("PRAGMA foreign_keys=OFF")
        # Renaming dumps_v2 to dumps then leaves alone, instead of checking
        # against the half-built schema, any view someone made of the dumps.
        conn.execute("PRAGMA legacy_alter_table=ON")
        cur = conn.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            version = _schema_version(conn, self.path)   # again, under the lock
            if version is None:
                _create(cur)
            elif version == 1:
                _migrate_1_to_2(cur, self.path)
                self.upgraded_from = 1
            elif version != SCHEMA_VERSION:
                raise _too_new(self.path, version) if version > SCHEMA_VERSION else \
                    StoreError(f"{self.path}: unknown schema version {version}")
            cur.execute("COMMIT")
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        finally:
            conn.execute("PRAGMA legacy_alter_table=OFF")

    @property
    def dialect(self) -> str:
        return db.dialect(self.conn)

    def save(self, items: Sequence[tuple[Dump, Report, int | None]],
             stats: dict[str, int] | None = None,
             source_stats: dict[tuple[str, str], int] | None = None,
             gauges: dict[str, float] | None = None) -> list[int]:
        """Store dumps (and add ``stats`` and per-source ``(source, name)``
        deltas) in one transaction; returns ids.

        Each item is ``(dump, report, dump_no)``: ``dump_no`` None stores a
        new dump; an id replaces that stored dump (its row, log, frames and
        modules) in place, keeping the id: a partial dump repaired by late
        chunks.
        """
        ids: list[int] = []
        cur = self.conn.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            # The dumps' locks, in one order for every collector: no cycles.
            for key in sorted({self._identity(d) for d, _, _ in items}):
                db.serialise(cur, key)
            for dump, rep, dump_no in items:
                ids.append(self._put(cur, dump, rep, dump_no))
            if stats:
                self._add_stats(cur, stats)
            if source_stats:
                cur.executemany(
                    "INSERT INTO source_stats VALUES (?, ?, ?) ON CONFLICT (source, name) "
                    "DO UPDATE SET value = source_stats.value + excluded.value",
                    [(src, name, v) for (src, name), v in sorted(source_stats.items()) if v])
            if gauges:
                cur.executemany("INSERT INTO gauges VALUES (?, ?) ON CONFLICT (name) "
                                "DO UPDATE SET value = excluded.value",
                                sorted(gauges.items()))
            cur.execute("COMMIT")
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        return ids

    @staticmethod
    def _identity(dump: Dump) -> str:
        return f"dump {dump.source} {dump.boot_id} {dump.dump_id}"

    @staticmethod
    def _stored_elsewhere(cur: db.PgCursor, dump: Dump, dump_no: int | None
                          ) -> tuple[int, int] | None:
        """PostgreSQL: (id, packets_received) of the row that holds this dump
        now: row ``dump_no`` if given and still there, else the same source,
        boot and dump id, type and size as another collector stored it; or
        None.  save() holds the lock of that identity."""
        if dump_no is not None:
            row = cur.execute("SELECT id, packets_received FROM dumps WHERE id = ?",
                              (dump_no,)).fetchone()
            if row is not None:
                return int(row[0]), int(row[1])
        row = cur.execute(
            "SELECT id, packets_received FROM dumps WHERE source = ? AND boot_id = ? AND "
            "dump_id = ? AND type = ? AND packet_count = ? ORDER BY id LIMIT 1",
            (dump.source, dump.boot_id, dump.dump_id, dump.type, dump.packet_count)).fetchone()
        return None if row is None else (int(row[0]), int(row[1]))

    @classmethod
    def _put(cls, cur: Any, dump: Dump, rep: Report, dump_no: int | None) -> int:
        if db.dialect(cur) == "postgresql":
            # Other collectors write here too: the most complete copy of a
            # dump keeps its row, whoever stored it and whichever came first.
            held = cls._stored_elsewhere(cur, dump, dump_no)
            if held is not None and held[1] >= dump.packets_received:
                return held[0]
            dump_no = held[0] if held is not None else None
        if dump_no is not None:     # the log, frames and modules go with it
            cur.execute("DELETE FROM dumps WHERE id = ?", (dump_no,))
        if dump_no is None:
            (new,) = cur.execute(_INSERT_NEW, _row(dump, rep)).fetchone()
        else:
            cur.execute(_INSERT_DUMP, [dump_no, *_row(dump, rep)])
            new = dump_no
        cur.execute("INSERT INTO logs VALUES (?, ?)", (new, dump.log))
        cur.executemany(
            "INSERT INTO dump_frames VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [_frame_row(new, i, f.as_dict()) for i, f in enumerate(rep.frames)])
        cur.executemany("INSERT OR IGNORE INTO dump_modules (dump, name, flags) VALUES (?, ?, ?)",
                        [(new, name, flags) for name, flags in rep.modules])
        return new

    @staticmethod
    def _add_stats(cur: sqlite3.Cursor, stats: dict[str, int]) -> None:
        cur.executemany(
            "INSERT INTO stats VALUES (?, ?) "
            "ON CONFLICT (name) DO UPDATE SET value = stats.value + excluded.value",
            [(k, v) for k, v in sorted(stats.items()) if v])

    def stored_as(self, dump: Dump, any_time: bool = False) -> tuple[int, float, int] | None:
        """The row stored for ``dump`` or an earlier revision of it: (id,
        received, packets_received), or None.  ``any_time``: whenever its
        first packet came (a dump rebuilt from the packet log, whose clock
        is the C thread's), the most complete such row."""
        if any_time:
            row = self.conn.execute(
                "SELECT id, received, packets_received FROM dumps WHERE source = ? AND "
                "boot_id = ? AND dump_id = ? AND source_port = ? AND type = ? AND "
                "packet_count = ? ORDER BY packets_received DESC, id DESC",
                (dump.source, dump.boot_id, dump.dump_id, dump.port, dump.type,
                 dump.packet_count)).fetchone()
        else:
            row = self.conn.execute(
                "SELECT id, received, packets_received FROM dumps WHERE source = ? AND "
                "boot_id = ? AND dump_id = ? AND source_port = ? AND first_packet = ? "
                "ORDER BY id DESC",
                (dump.source, dump.boot_id, dump.dump_id, dump.port,
                 dump.first_packet)).fetchone()
        return None if row is None else (int(row[0]), float(row[1]), int(row[2]))

    def close(self) -> None:
        self.conn.close()


# -- read side ----------------------------------------------------------------
def open_readonly(path: str | os.PathLike[str], shared: bool = False) -> Any:
    """Open an existing collector database read-only; :class:`StoreError` if not.

    A version-1 database is refused: ``serve`` upgrades it when it starts.
    ``shared``: usable by a thread other than the one that opened it (one
    at a time).
    """
    if db.is_url(path):
        return _connect_pg(str(path), readonly=True)
    p = Path(path)
    if not p.exists():
        raise StoreError(f"{p}: no such database (has `netoops-collector serve` run? "
                         "choose another with --db)")
    if not p.is_file():
        raise StoreError(f"{p}: not a database file")
    if not os.access(p, os.R_OK):
        raise StoreError(f"{p}: not readable (permission denied)")
    try:
        conn = sqlite3.connect(p.resolve().as_uri() + "?mode=ro", uri=True, timeout=10,
                               check_same_thread=not shared)
        conn.execute("PRAGMA foreign_keys=ON")
    except sqlite3.DatabaseError as err:
        raise StoreError(f"{p}: not a netoops collector database ({err})") from err
    try:
        version = _schema_version(conn, p)
        if version is None:
            raise StoreError(f"{p}: not a netoops collector database (no tables)")
        if version > SCHEMA_VERSION:
            raise _too_new(p, version)
        if version < SCHEMA_VERSION:
            raise StoreError(f"{p}: schema version {version} is older than this "
                             f"collector's ({SCHEMA_VERSION}); `netoops-collector serve` "
                             "upgrades it when it starts")
    except StoreError:
        conn.close()
        raise
    conn.row_factory = sqlite3.Row
    return conn


def _frame_dict(row: sqlite3.Row | tuple[Any, ...]) -> dict[str, Any]:
    """A ``dump_frames`` row as :meth:`report.Frame.as_dict` made it."""
    func, offset, size, address, module, reliable, context = row
    if func:
        where = f"{func}+{offset or 0:#x}/{size or 0:#x}"
    else:
        where = f"{int(address, 16) if address else 0:#x}"
    text = f"{'' if reliable else '? '}{where}{f' [{module}]' if module else ''}"
    return {"func": func, "offset": offset, "size": size, "module": module,
            "reliable": bool(reliable), "context": context, "address": address,
            "text": text}


def _frames(conn: sqlite3.Connection | sqlite3.Cursor, dump_no: int) -> list[dict[str, Any]]:
    return [_frame_dict(tuple(r)) for r in conn.execute(
        f"SELECT {_FRAME_COLUMNS} FROM dump_frames WHERE dump = ? ORDER BY pos", (dump_no,))]


def _decode(row: sqlite3.Row) -> dict[str, Any]:
    out = dict(row)
    if "missing" in out:
        out["missing"] = [[lo, hi] for lo, hi in parse_ranges(out["missing"])]
    if "signature_frames" in out:
        out["signature_frames"] = json.loads(out["signature_frames"])
    if "complete" in out:
        out["complete"] = bool(out["complete"])
    return out


def list_dumps(conn: sqlite3.Connection, limit: int | None = None,
               filt: Filter = Filter()) -> list[dict[str, Any]]:
    """One row per dump that ``filt`` takes, oldest first (the last
    ``limit``); never reads a log."""
    where, params = filt.where(conn)
    sql = ("SELECT id, received, source, source_port, boot_id, dump_id, kind,"
           " kernel_version, title, signature, complete, packet_count,"
           f" packets_received FROM dumps WHERE {where} ORDER BY id")
    if limit:
        sql = f"SELECT * FROM ({sql} DESC LIMIT {int(limit)}) AS newest ORDER BY id"
    return [_decode(r) for r in conn.execute(sql, params)]


def dump_ids(conn: sqlite3.Connection, filt: Filter = Filter()) -> list[int]:
    """The ids of the dumps ``filt`` takes, oldest first."""
    where, params = filt.where(conn)
    return [i for (i,) in conn.execute(f"SELECT id FROM dumps WHERE {where} ORDER BY id",
                                       params)]


def get_dump(conn: sqlite3.Connection, dump_no: int) -> dict[str, Any] | None:
    """Everything about one dump: the row, log, frames, registers and modules."""
    row = conn.execute("SELECT dumps.*, COALESCE(logs.text, '') AS log FROM dumps"
                       " LEFT JOIN logs ON logs.dump = dumps.id WHERE dumps.id = ?",
                       (dump_no,)).fetchone()
    if row is None:
        return None
    d = _decode(row)
    d["frames"] = _frames(conn, dump_no)
    out = {k: d[k] for k in _SHOW_KEYS}
    out["registers"] = {r: d[r] for r in proto.REG_NAMES}
    # netoops sends zeros when the dump has no fault (a plain panic, a
    # lockup, a soft dump), never registers of its own.
    out["fault_registers"] = any(int(str(v), 0) for v in out["registers"].values())
    out["modules"] = [{"name": n, "flags": f} for n, f in conn.execute(
        "SELECT name, flags FROM dump_modules WHERE dump = ? ORDER BY rowid", (dump_no,))]
    return out


def groups(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """Dumps per signature: counts, first and last seen, kernels and hosts,
    with what pruning removed (retention.history); ``ids`` are the dumps
    still stored.

    A dump without crash text (NULL signature) is in no group; see
    :func:`ungrouped`.
    """
    past = history(conn)
    out = []
    for r in conn.execute(
            "SELECT signature, COUNT(*) AS dumps,"
            " COUNT(DISTINCT source || ' ' || boot_id) AS boots,"
            " MIN(received) AS first_seen, MAX(received) AS last_seen,"
            " MAX(id) AS last_id"
            " FROM dumps WHERE signature IS NOT NULL GROUP BY signature"):
        g = dict(r)
        g["title"] = conn.execute("SELECT title FROM dumps WHERE id = ?",
                                  (g["last_id"],)).fetchone()[0]
        g["kernels"] = [k for (k,) in conn.execute(
            "SELECT DISTINCT kernel_version FROM dumps WHERE signature = ? ORDER BY 1",
            (g["signature"],))]
        g["hosts"] = [h for (h,) in conn.execute(
            "SELECT DISTINCT source FROM dumps WHERE signature = ? ORDER BY 1",
            (g["signature"],))]
        old = past.pop(g["signature"], None)
        if old is not None:
            g.update(dumps=g["dumps"] + old["dumps"], boots=g["boots"] + old["boots"],
                     first_seen=min(g["first_seen"], old["first_seen"]),
                     hosts=sorted(set(g["hosts"]) | set(old["hosts"])),
                     kernels=sorted(set(g["kernels"]) | set(old["kernels"])))
        g["pruned"] = old["dumps"] if old else 0
        g["ids"] = [i for (i,) in conn.execute(
            "SELECT id FROM dumps WHERE signature = ? ORDER BY id", (g["signature"],))]
        out.append(g)
    out += [dict(g, pruned=g["dumps"], ids=[], last_id=None) for g in past.values()]
    for g in out:
        g["host_count"] = len(g["hosts"])
    keys = ("signature", "dumps", "boots", "host_count", "first_seen", "last_seen",
            "last_id", "title", "kernels", "hosts", "ids", "pruned")
    out.sort(key=lambda g: (-g["dumps"], -g["last_seen"]))
    return [{k: g[k] for k in keys} for g in out]


def known_signatures(conn: sqlite3.Connection) -> set[str]:
    """Every signature stored, or pruned (retention.history)."""
    return {s for (s,) in conn.execute(
        "SELECT DISTINCT signature FROM dumps WHERE signature IS NOT NULL")} | set(history(conn))


def ungrouped(conn: sqlite3.Connection) -> int:
    """How many dumps have no crash text (a NULL signature)."""
    return int(conn.execute("SELECT COUNT(*) FROM dumps WHERE signature IS NULL"
                            ).fetchone()[0])


def stats(conn: sqlite3.Connection) -> dict[str, Any]:
    counters = {name: value for name, value in conn.execute(
        "SELECT name, value FROM stats ORDER BY name")}
    row = conn.execute(
        "SELECT COUNT(*), COALESCE(SUM(complete), 0), COUNT(DISTINCT signature)"
        " FROM dumps").fetchone()
    return {"counters": counters,
            "stored": {"dumps": row[0], "complete": row[1], "partial": row[0] - row[1],
                       "signatures": row[2], "no_crash_text": ungrouped(conn)},
            "sources": source_stats(conn),
            "gauges": _gauges(conn)}


def _has_table(conn: db.Connection, name: str) -> bool:
    return db.has_table(conn, name)


def _gauges(conn: sqlite3.Connection) -> dict[str, float]:
    if not _has_table(conn, "gauges"):
        return {}
    return dict(conn.execute("SELECT name, value FROM gauges ORDER BY name"))


def source_stats(conn: sqlite3.Connection, limit: int = 20) -> list[dict[str, Any]]:
    """The sources with the most rejected or dropped traffic, with their counters."""
    if not _has_table(conn, "source_stats"):
        return []
    top = [src for (src,) in conn.execute(
        "SELECT source FROM source_stats GROUP BY source ORDER BY SUM(value) DESC, source "
        "LIMIT ?", (limit,))]
    return [{"source": src, "counters": dict(conn.execute(
        "SELECT name, value FROM source_stats WHERE source = ? ORDER BY name", (src,)))}
        for src in top]
