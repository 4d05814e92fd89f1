# SPDX-License-Identifier: GPL-2.0
"""Netconsole lines in the database: tables, writing, and the questions
asked of them (the lines before a dump, a host's tail, who went silent).

``nc_streams`` has one row per source and boot (see netconsole.Streams);
``nc_lines`` the lines, in arrival order.  Both came after schema version
2 and are created when missing; a reader of a database without them sees
no lines.
"""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any, Iterable, Sequence

from . import db
from .netconsole import Line, Stream, printk_time, unescape

STREAMS_TABLE = """CREATE TABLE nc_streams (
    id            INTEGER PRIMARY KEY,
    source        TEXT NOT NULL,      -- address
    port          INTEGER NOT NULL,   -- the target's source port
    extended      INTEGER NOT NULL,   -- 1: extended records, 0: basic text
    release       TEXT,               -- the r flag's or sysdata's release, if sent
    first_arrival REAL NOT NULL,
    last_arrival  REAL NOT NULL,
    first_seq     INTEGER,
    last_seq      INTEGER,
    last_ts       INTEGER,            -- the kernel's timestamp of last_seq, us
    lines         INTEGER NOT NULL,
    lost          INTEGER NOT NULL,   -- sequence numbers that never came
    ended         TEXT                -- why a newer stream took over, if one did
)"""
LINES_TABLE = """CREATE TABLE nc_lines (
    id      INTEGER PRIMARY KEY,
    stream  INTEGER NOT NULL REFERENCES nc_streams (id) ON DELETE CASCADE,
    arrival REAL NOT NULL,
    seq     INTEGER,
    level   INTEGER,
    ts_us   INTEGER,                  -- the kernel's timestamp, microseconds
    cont    INTEGER NOT NULL,
    cut     INTEGER NOT NULL,         -- pieces of it never came
    text    TEXT NOT NULL,            -- extended: as sent, \\xNN escapes kept
    meta    TEXT                      -- KEY=value lines
)"""
TABLES = (("nc_streams", STREAMS_TABLE), ("nc_lines", LINES_TABLE))
INDEXES = (
    "CREATE INDEX IF NOT EXISTS nc_lines_stream ON nc_lines (stream, arrival)",
    "CREATE INDEX IF NOT EXISTS nc_streams_source ON nc_streams (source, last_arrival)",
)
_STREAM_COLS = ("id", "source", "port", "extended", "release", "first_arrival",
                "last_arrival", "first_seq", "last_seq", "last_ts", "lines", "lost", "ended")
_LINE_COLS = ("id", "stream", "arrival", "seq", "level", "ts_us", "cont", "cut", "text", "meta")
# SQLite 3.38 has ->> (faster than json_extract() by half); Debian 12 has 3.40
_JSON_ROWS = sqlite3.sqlite_version_info >= (3, 38, 0)
_INSERT_LINES = (f"INSERT INTO nc_lines ({', '.join(_LINE_COLS[1:])}) SELECT "
                 + ", ".join(f"value ->> {i}" for i in range(len(_LINE_COLS) - 1))
                 + " FROM json_each(?)")
_INSERT_ROWS = (f"INSERT INTO nc_lines ({', '.join(_LINE_COLS[1:])}) VALUES "
                f"({', '.join('?' * (len(_LINE_COLS) - 1))})")


# PostgreSQL: each collector that starts takes a block of 2^32 stream ids
# (several collectors write one database, each numbering its own streams).
PG_STREAM_BLOCKS = "CREATE SEQUENCE nc_stream_blocks"


def create(conn: sqlite3.Connection | sqlite3.Cursor) -> None:
    """Create what is missing (inside the caller's transaction, if any);
    PostgreSQL has them from the start (store._create_pg)."""
    if db.dialect(conn) == "postgresql":
        return
    for name, sql in TABLES:
        if not db.has_table(conn, name):
            conn.execute(sql)
    for sql in INDEXES:
        conn.execute(sql)


def has_tables(conn: sqlite3.Connection) -> bool:
    return all(db.has_table(conn, name) for name, _ in TABLES)


# -- the writer ---------------------------------------------------------------
def next_stream_id(conn: sqlite3.Connection) -> int:
    if db.dialect(conn) == "postgresql":
        return int(conn.execute("SELECT nextval('nc_stream_blocks')").fetchone()[0]) << 32
    return int(conn.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM nc_streams").fetchone()[0])


def latest_streams(conn: sqlite3.Connection) -> dict[tuple[str, int], Stream]:
    """Each source's newest stream, to go on with after a restart."""
    out: dict[tuple[str, int], Stream] = {}
    for row in conn.execute(
            f"SELECT {', '.join(_STREAM_COLS)} FROM nc_streams WHERE ended IS NULL "
            "ORDER BY last_arrival, id"):
        d = dict(zip(_STREAM_COLS, row))
        st = Stream(d["id"], d["source"], d["port"], bool(d["extended"]), d["first_arrival"],
                    d["last_arrival"], d["release"], d["first_seq"], d["last_seq"],
                    d["last_ts"], d["lines"], d["lost"], d["ended"])
        out[(st.source, st.port)] = st
    return out


def stream_row(s: Stream) -> tuple[Any, ...]:
    """A stream as it stands, in the order of _STREAM_COLS."""
    return (s.id, s.source, s.port, int(s.extended), s.release, s.first_arrival,
            s.last_arrival, s.first_seq, s.last_seq, s.last_ts, s.lines, s.lost, s.ended)


def write(conn: sqlite3.Connection, lines: Sequence[Line],
          streams: Iterable[Stream | tuple[Any, ...]],
          stats: dict[str, int] | None = None) -> None:
    """One transaction: the streams' rows (a :class:`Stream` or its
    stream_row()), then the lines, then counters."""
    cur = conn.cursor()
    cur.execute("BEGIN IMMEDIATE")
    try:
        cur.executemany(
            f"INSERT INTO nc_streams ({', '.join(_STREAM_COLS)}) "
            f"VALUES ({', '.join('?' * len(_STREAM_COLS))}) ON CONFLICT (id) DO UPDATE SET "
            + ", ".join(f"{c} = excluded.{c}" for c in _STREAM_COLS[1:]),
            sorted((s if isinstance(s, tuple) else stream_row(s) for s in streams),
                   key=lambda row: row[0]))
        # All the lines in one statement, as one JSON array of rows (a Line
        # is one): SQLite inserts them without coming back to Python, which
        # executemany() does for every row, waiting for the interpreter
        # lock each time while the receiving thread is busy.
        if _JSON_ROWS and db.dialect(cur) == "sqlite":
            cur.execute(_INSERT_LINES, (json.dumps(lines, separators=(",", ":")),))
        else:
            cur.executemany(_INSERT_ROWS, lines)
        for name, value in sorted((stats or {}).items()):
            if value:
                cur.execute("INSERT INTO stats (name, value) VALUES (?, ?) ON CONFLICT (name)"
                            " DO UPDATE SET value = stats.value + excluded.value", (name, value))
        cur.execute("COMMIT")
    except BaseException:
        cur.execute("ROLLBACK")
        raise


def prune(conn: sqlite3.Connection, max_age: float | None, max_lines: int | None,
          now: float | None = None, dry_run: bool = False) -> int:
    """Remove lines older than ``max_age`` seconds and the oldest beyond
    ``max_lines``, then the streams left without lines; how many lines went
    (``dry_run``: would go)."""
    if not has_tables(conn):
        return 0
    now = time.time() if now is None else now
    cur = conn.cursor()
    cur.execute("BEGIN IMMEDIATE")
    try:
        db.serialise(cur, "prune netconsole")
        gone = 0
        if max_age:     # per stream: lines are indexed by (stream, arrival)
            cutoff = now - max_age
            for (sid,) in cur.execute("SELECT id FROM nc_streams WHERE first_arrival < ?",
                                      (cutoff,)).fetchall():
                gone += cur.execute("DELETE FROM nc_lines WHERE stream = ? AND arrival < ?",
                                    (sid, cutoff)).rowcount
        if max_lines:   # ids grow: the newest max_lines ids, at most, stay
            (top,) = cur.execute("SELECT COALESCE(MAX(id), 0) FROM nc_lines").fetchone()
            if top > max_lines:
                gone += cur.execute("DELETE FROM nc_lines WHERE id <= ?",
                                    (top - max_lines,)).rowcount
        if gone:
            cur.execute("DELETE FROM nc_streams WHERE ended IS NOT NULL AND NOT EXISTS "
                        "(SELECT 1 FROM nc_lines WHERE stream = nc_streams.id)")
        cur.execute("ROLLBACK" if dry_run else "COMMIT")
    except BaseException:
        cur.execute("ROLLBACK")
        raise
    return gone


# -- questions ------------------------------------------------------------------
def _line_dict(row: Sequence[Any], source: str | None = None) -> dict[str, Any]:
    d = dict(zip(_LINE_COLS, row))
    d["cont"], d["cut"] = bool(d["cont"]), bool(d["cut"])
    if source is not None:
        d["source"] = source
    return d


def stream(conn: sqlite3.Connection, stream_id: int) -> dict[str, Any] | None:
    row = conn.execute(f"SELECT {', '.join(_STREAM_COLS)} FROM nc_streams WHERE id = ?",
                       (stream_id,)).fetchone()
    if row is None:
        return None
    d = dict(zip(_STREAM_COLS, row))
    d["extended"] = bool(d["extended"])
    return d


def streams(conn: sqlite3.Connection, source: str | None = None) -> list[dict[str, Any]]:
    if not has_tables(conn):
        return []
    where, args = ("WHERE source = ?", (source,)) if source else ("", ())
    out = []
    for row in conn.execute(f"SELECT {', '.join(_STREAM_COLS)} FROM nc_streams {where} "
                            "ORDER BY last_arrival, id", args):
        d = dict(zip(_STREAM_COLS, row))
        d["extended"] = bool(d["extended"])
        out.append(d)
    return out


def before_dump(conn: sqlite3.Connection, dump: dict[str, Any], minutes: float
                ) -> dict[str, Any] | None:
    """The lines the dump's source sent in the ``minutes`` before the dump
    came (and while it came), each marked with whether the dump's log has
    it; None if that source sent none."""
    if not has_tables(conn):
        return None
    start = dump["first_packet"] - minutes * 60
    end = max(dump["received"], dump["first_packet"]) + 1.0
    rows = conn.execute(
        f"SELECT {', '.join('l.' + c for c in _LINE_COLS)} FROM nc_lines l "
        "JOIN nc_streams s ON s.id = l.stream WHERE s.source = ? AND s.last_arrival >= ? "
        "AND l.arrival >= ? AND l.arrival <= ? ORDER BY l.arrival, l.id",
        (dump["source"], start, start, end)).fetchall()
    if not rows:
        return None
    lines = [_line_dict(r) for r in rows]
    have, first_ts, last_ts = _log_index(dump.get("log") or "")
    # The dump's own boot: the newest stream that began before the dump.
    # Lines of earlier boots in the window are shown, not compared.
    own = conn.execute("SELECT id FROM nc_streams WHERE source = ? AND first_arrival <= ? "
                       "ORDER BY first_arrival DESC, id DESC LIMIT 1",
                       (dump["source"], dump["first_packet"])).fetchone()
    lost = 0
    for ln in lines:
        if own is None or ln["stream"] != own[0]:
            ln["in_dump"] = ln["lost_from_dump"] = False
            ln["other_boot"] = True
            continue
        ln["other_boot"] = False
        ln["in_dump"] = _in_log(ln, have)
        # A line the dump lacks though the dump has lines after it: lost
        # from the dump (one of the last line's time may have come after
        # the dump was taken, as the dump's own "sent" line does).
        ln["lost_from_dump"] = (not ln["in_dump"] and ln["ts_us"] is not None
                                and first_ts is not None and last_ts is not None
                                and first_ts <= ln["ts_us"] < last_ts)
        lost += ln["lost_from_dump"]
    ids = sorted({ln["stream"] for ln in lines})
    return {"minutes": minutes, "source": dump["source"],
            "streams": [stream(conn, i) for i in ids], "lines": lines,
            "dump_stream": own[0] if own else None,
            "not_in_dump": sum(not ln["in_dump"] and not ln["other_boot"] for ln in lines),
            "lost_from_dump": lost}


def _log_index(log: str) -> tuple[set[tuple[int | None, str]], int | None, int | None]:
    """The dump log's lines as (printk time, text), and its first and last time."""
    have: set[tuple[int | None, str]] = set()
    first = last = None
    for raw in log.split("\n"):
        ts, text = printk_time(raw)
        have.add((ts, text.rstrip()))
        if ts is not None:
            first = ts if first is None else min(first, ts)
            last = ts if last is None else max(last, ts)
    return have, first, last


def _in_log(ln: dict[str, Any], have: set[tuple[int | None, str]]) -> bool:
    if ln["seq"] is not None:      # extended: the record's first line, unescaped
        text = unescape(ln["text"]).split("\n", 1)[0].rstrip()
        return (ln["ts_us"], text) in have
    ts, text = printk_time(ln["text"])
    return (ts, text.rstrip()) in have


def tail(conn: sqlite3.Connection, source: str, limit: int) -> dict[str, Any] | None:
    """The newest stream of ``source`` and its last ``limit`` lines."""
    if not has_tables(conn):
        return None
    row = conn.execute("SELECT id FROM nc_streams WHERE source = ? "
                       "ORDER BY last_arrival DESC, id DESC LIMIT 1", (source,)).fetchone()
    if row is None:
        return None
    return {"stream": stream(conn, row[0]), "lines": last_lines(conn, row[0], limit)}


def tail_from(conn: sqlite3.Connection, source: str, limit: int
              ) -> tuple[dict[str, Any] | None, int]:
    """:func:`tail`, and the newest line id of any source when it was read
    (one snapshot): what :func:`lines_after` follows on from."""
    if not has_tables(conn):
        return None, 0
    with conn:      # one read transaction for both
        conn.execute("BEGIN" if db.dialect(conn) == "sqlite" else
                     "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        got = tail(conn, source, limit)
        newest = int(conn.execute("SELECT COALESCE(MAX(id), 0) FROM nc_lines").fetchone()[0])
    return got, newest


def lines_after(conn: sqlite3.Connection, source: str, after: int,
                limit: int = 10000) -> list[dict[str, Any]]:
    """The lines of ``source`` (any of its streams) stored after line id
    ``after``, in the order they were stored: what ``tail --follow`` prints."""
    if not has_tables(conn):
        return []
    rows = conn.execute(f"SELECT {', '.join('l.' + c for c in _LINE_COLS)} FROM nc_lines l "
                        "WHERE l.id > ? AND l.stream IN "
                        "(SELECT id FROM nc_streams WHERE source = ?) ORDER BY l.id LIMIT ?",
                        (after, source, limit)).fetchall()
    return [_line_dict(r) for r in rows]


def last_lines(conn: sqlite3.Connection, stream_id: int, limit: int) -> list[dict[str, Any]]:
    rows = conn.execute(f"SELECT {', '.join(_LINE_COLS)} FROM nc_lines WHERE stream = ? "
                        "ORDER BY arrival DESC, id DESC LIMIT ?", (stream_id, limit)).fetchall()
    return [_line_dict(r) for r in reversed(rows)]


def silent(conn: sqlite3.Connection, quiet: float, lines: int = 5,
           now: float | None = None) -> list[dict[str, Any]]:
    """Sources whose newest stream stopped ``quiet`` seconds ago or more with
    no dump from them since (a dump that came up to a minute before the
    last line counts: the last lines are often the crash itself)."""
    if not has_tables(conn):
        return []
    now = time.time() if now is None else now
    out = []
    for row in conn.execute(
            "SELECT s.id FROM nc_streams s WHERE s.ended IS NULL AND s.last_arrival <= ? "
            "AND NOT EXISTS (SELECT 1 FROM nc_streams n WHERE n.source = s.source "
            "AND n.last_arrival > s.last_arrival) "
            "AND NOT EXISTS (SELECT 1 FROM dumps d WHERE d.source = s.source "
            "AND d.received >= s.last_arrival - 60) ORDER BY s.last_arrival",
            (now - quiet,)).fetchall():
        st = stream(conn, row[0])
        assert st is not None
        st["silent_for"] = now - st["last_arrival"]
        out.append({"stream": st, "lines": last_lines(conn, row[0], lines)})
    return out
