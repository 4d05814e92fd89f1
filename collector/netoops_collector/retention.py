# SPDX-License-Identifier: GPL-2.0
"""Retention: which stored dumps go, and what their groups keep of them.

A dump goes when it is older than ``max_age``, or when newer dumps already
fill ``max_dumps`` or ``max_bytes`` (the bytes of the stored logs): the
oldest go first.  What a group (a crash signature) had in the dumps that
went, its count, boots, first and last seen, hosts and kernels, is added to
``group_history``, so that `groups` still counts them.  ``serve`` applies
the policy every minute; ``prune`` applies it by hand.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from typing import Any

from . import db

# What pruning removed, per signature.
GROUP_HISTORY_TABLE = """CREATE TABLE group_history (
    signature  TEXT PRIMARY KEY,
    dumps      INTEGER NOT NULL,
    boots      INTEGER NOT NULL,  -- per pruning: a boot pruned twice counts twice
    first_seen REAL NOT NULL,
    last_seen  REAL NOT NULL,
    title      TEXT NOT NULL,     -- of the newest dump pruned
    hosts      TEXT NOT NULL,     -- JSON list of source addresses
    kernels    TEXT NOT NULL      -- JSON list of kernel releases
)"""


_HISTORY_UPDATE = ", ".join(f"{c} = excluded.{c}" for c in (
    "dumps", "boots", "first_seen", "last_seen", "title", "hosts", "kernels"))


@dataclass(frozen=True)
class Retention:
    """Limits on what is kept; None: no limit of that kind.  The defaults
    keep a busy fleet's database bounded: 90 days, 100,000 dumps, 4 GiB of
    logs."""

    max_age: float | None = 90 * 86400.0
    max_dumps: int | None = 100_000
    max_bytes: int | None = 4 << 30

    def describe(self) -> str:
        parts = [f"{self.max_age / 86400:g} days" if self.max_age else "any age",
                 f"{self.max_dumps} dumps" if self.max_dumps else "any number of dumps",
                 f"{self.max_bytes} bytes of logs" if self.max_bytes else "any size"]
        return ", ".join(parts)


@dataclass(frozen=True)
class Pruned:
    dumps: int = 0
    bytes: int = 0
    by_age: int = 0
    by_count: int = 0
    by_size: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


def _doomed(conn: sqlite3.Connection, policy: Retention, now: float
            ) -> tuple[list[int], Pruned]:
    """The ids to remove, newest kept first, and why they go."""
    total, size, oldest = conn.execute(
        "SELECT COUNT(*), COALESCE(SUM(LENGTH(CAST(text AS BLOB))), 0),"
        " MIN(received) FROM dumps LEFT JOIN logs ON logs.dump = dumps.id").fetchone()
    cutoff = now - policy.max_age if policy.max_age else None
    if ((policy.max_dumps is None or total <= policy.max_dumps)
            and (policy.max_bytes is None or size <= policy.max_bytes)
            and (cutoff is None or oldest is None or oldest >= cutoff)):
        return [], Pruned()
    kept = kept_bytes = 0
    doomed: list[int] = []
    why = {"by_age": 0, "by_count": 0, "by_size": 0}
    freed = 0
    full = None         # once the newer dumps fill a limit, every older dump goes
    for dump_no, received, nbytes in conn.execute(
            "SELECT id, received, COALESCE(LENGTH(CAST(text AS BLOB)), 0) FROM dumps"
            " LEFT JOIN logs ON logs.dump = dumps.id ORDER BY received DESC, id DESC"):
        reason = None
        if cutoff is not None and received < cutoff:
            reason = "by_age"
        elif full:
            reason = full
        elif policy.max_dumps is not None and kept >= policy.max_dumps:
            reason = full = "by_count"
        elif policy.max_bytes is not None and kept_bytes + nbytes > policy.max_bytes:
            reason = full = "by_size"
        if reason is None:
            kept += 1
            kept_bytes += nbytes
        else:
            why[reason] += 1
            freed += nbytes
            doomed.append(dump_no)
    return doomed, Pruned(dumps=len(doomed), bytes=freed, **why)


def _merge(old: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    if old is None:
        return new
    newer = new if new["last_seen"] >= old["last_seen"] else old
    return {"signature": new["signature"], "dumps": old["dumps"] + new["dumps"],
            "boots": old["boots"] + new["boots"],
            "first_seen": min(old["first_seen"], new["first_seen"]),
            "last_seen": max(old["last_seen"], new["last_seen"]), "title": newer["title"],
            "hosts": sorted(set(old["hosts"]) | set(new["hosts"])),
            "kernels": sorted(set(old["kernels"]) | set(new["kernels"]))}


def history(conn: sqlite3.Connection) -> dict[str, dict[str, Any]]:
    """group_history by signature (empty when the table is not there)."""
    if not db.has_table(conn, "group_history"):
        return {}
    out = {}
    for row in conn.execute("SELECT signature, dumps, boots, first_seen, last_seen, title,"
                            " hosts, kernels FROM group_history"):
        sig, dumps, boots, first, last, title, hosts, kernels = row
        out[sig] = {"signature": sig, "dumps": dumps, "boots": boots, "first_seen": first,
                    "last_seen": last, "title": title, "hosts": json.loads(hosts),
                    "kernels": json.loads(kernels)}
    return out


def prune(conn: sqlite3.Connection, policy: Retention, now: float | None = None,
          dry_run: bool = False) -> Pruned:
    """Apply ``policy`` in one transaction (a writer's connection, foreign
    keys on: a dump's log, frames and modules go with it)."""
    now = time.time() if now is None else now
    cur = conn.cursor()
    cur.execute("BEGIN IMMEDIATE")
    try:
        db.serialise(cur, "prune")     # two collectors pruning one database
        doomed, result = _doomed(conn, policy, now)
        if doomed and not dry_run:
            cur.execute(db.ddl(cur, "CREATE TEMP TABLE IF NOT EXISTS prune_ids "
                                    "(id INTEGER PRIMARY KEY)"))
            cur.execute("DELETE FROM prune_ids")
            cur.executemany("INSERT INTO prune_ids VALUES (?)", [(i,) for i in doomed])
            old = history(conn)
            for sig, n, boots, first, last, last_id in cur.execute(
                    "SELECT signature, COUNT(*), COUNT(DISTINCT source || ' ' || boot_id),"
                    " MIN(received), MAX(received), MAX(id) FROM dumps"
                    " WHERE id IN (SELECT id FROM prune_ids) AND signature IS NOT NULL"
                    " GROUP BY signature").fetchall():
                new = {"signature": sig, "dumps": n, "boots": boots, "first_seen": first,
                       "last_seen": last,
                       "title": conn.execute("SELECT title FROM dumps WHERE id = ?",
                                             (last_id,)).fetchone()[0],
                       "hosts": [h for (h,) in conn.execute(
                           "SELECT DISTINCT source FROM dumps WHERE signature = ? AND id IN"
                           " (SELECT id FROM prune_ids) ORDER BY 1", (sig,))],
                       "kernels": [k for (k,) in conn.execute(
                           "SELECT DISTINCT kernel_version FROM dumps WHERE signature = ?"
                           " AND id IN (SELECT id FROM prune_ids) ORDER BY 1", (sig,))]}
                g = _merge(old.get(sig), new)
                cur.execute("INSERT INTO group_history VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                            "ON CONFLICT (signature) DO UPDATE SET " + _HISTORY_UPDATE,
                            (sig, g["dumps"], g["boots"], g["first_seen"], g["last_seen"],
                             g["title"], json.dumps(g["hosts"]), json.dumps(g["kernels"])))
            cur.execute("DELETE FROM dumps WHERE id IN (SELECT id FROM prune_ids)")
            cur.execute("DELETE FROM prune_ids")
            cur.execute("INSERT INTO stats VALUES ('dumps_pruned', ?) ON CONFLICT (name)"
                        " DO UPDATE SET value = stats.value + excluded.value", (len(doomed),))
        cur.execute("ROLLBACK" if dry_run else "COMMIT")
    except BaseException:
        cur.execute("ROLLBACK")
        raise
    return result
