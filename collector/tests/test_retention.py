# SPDX-License-Identifier: GPL-2.0
"""Retention: dumps go by age, count and size, oldest first; their groups
keep their counts and first and last seen; `prune` and `serve` apply it."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from collector_util import Serve, cli
from netoops_collector import store
from netoops_collector.retention import Retention, prune
from test_store import make_dump, report

T0 = 1_780_000_000.0
HOUR = 3600.0
SIG_A, SIG_B, SIG_C = ("a" * 40, "b" * 40, "c" * 40)
# id: (fixture, signature, host, kernel); dump n is received at T0 + (n-1) h
DUMPS = {1: ("null_deref.txt", SIG_A, "192.0.2.2", "6.1.0-a"),
         2: ("null_deref_panic.txt", SIG_A, "192.0.2.3", "6.1.0-b"),
         3: ("soft_lockup.txt", SIG_B, "192.0.2.2", "6.1.0-a"),
         4: ("null_deref.txt", SIG_A, "192.0.2.4", "6.1.0-a"),
         5: ("sysrq_panic.txt", SIG_C, "192.0.2.2", "6.1.0-a"),
         6: ("soft_dump.txt", None, "192.0.2.2", "6.1.0-a")}
NOW = T0 + 5 * HOUR + 60


def make_db(path: Path) -> Path:
    st = store.Store(path)
    items = []
    for n, (name, sig, host, kernel) in DUMPS.items():
        t = T0 + (n - 1) * HOUR
        d = make_dump(name, src=host, kernel_version=kernel, finalised=t,
                      first_packet=t - 1, boot_id=n, soft=sig is None)
        items.append((d, report(d, signature=sig), None))
    st.save(items, {})
    st.close()
    return path


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return make_db(tmp_path / "r.sqlite3")


@pytest.fixture
def any_db(where: Path | str) -> Path | str:
    """The same, on each back end."""
    return make_db(where)


def writer(path: Path) -> store.Store:
    return store.Store(path)


def ids(path: Path) -> list[int]:
    conn = store.open_readonly(path)
    try:
        return [r["id"] for r in store.list_dumps(conn)]
    finally:
        conn.close()


def groups(path: Path) -> dict[str, dict]:
    conn = store.open_readonly(path)
    try:
        return {g["signature"]: g for g in store.groups(conn)}
    finally:
        conn.close()


def log_bytes(path: Path, *dump_ids: int) -> int:
    conn = sqlite3.connect(path)
    try:
        return sum(len(t.encode()) for (t,) in conn.execute(
            f"SELECT text FROM logs WHERE dump IN ({','.join('?' * len(dump_ids))})",
            dump_ids))
    finally:
        conn.close()


def test_by_age_oldest_go_and_groups_keep_their_counts(db: Path):
    before = groups(db)
    st = writer(db)
    done = prune(st.conn, Retention(max_age=2.5 * HOUR, max_dumps=None, max_bytes=None),
                 now=NOW)
    st.close()
    assert (done.dumps, done.by_age, done.by_count, done.by_size) == (3, 3, 0, 0)
    assert done.bytes == log_bytes(make_db(db.parent / "copy.sqlite3"), 1, 2, 3)
    assert ids(db) == [4, 5, 6]
    after = groups(db)
    a = after[SIG_A]
    for key in ("dumps", "boots", "first_seen", "last_seen", "host_count", "hosts",
                "kernels"):
        assert a[key] == before[SIG_A][key], key
    assert (a["dumps"], a["pruned"], a["ids"]) == (3, 2, [4])
    assert a["first_seen"] == T0 and a["kernels"] == ["6.1.0-a", "6.1.0-b"]
    # a group whose every dump went is still there, with no dump to show
    b = after[SIG_B]
    assert (b["dumps"], b["pruned"], b["ids"], b["first_seen"]) == (1, 1, [], T0 + 2 * HOUR)
    assert b["title"] == before[SIG_B]["title"]
    # the removed dumps' logs, frames and modules went with them
    conn = sqlite3.connect(db)
    for table in ("logs", "dump_frames", "dump_modules"):
        assert conn.execute(f"SELECT COUNT(*) FROM {table} WHERE dump <= 3").fetchone() == (0,)
    assert conn.execute("SELECT value FROM stats WHERE name = 'dumps_pruned'").fetchone() == (3,)
    conn.close()


def test_by_count_and_by_size_the_newest_stay(db: Path):
    st = writer(db)
    done = prune(st.conn, Retention(max_age=None, max_dumps=4, max_bytes=None), now=NOW)
    assert (done.dumps, done.by_count) == (2, 2) and ids(db) == [3, 4, 5, 6]
    fit = log_bytes(db, 5, 6)
    done = prune(st.conn, Retention(max_age=None, max_dumps=None, max_bytes=fit), now=NOW)
    assert (done.dumps, done.by_size) == (2, 2) and ids(db) == [5, 6]
    # nothing to do: nothing changes, nothing is counted
    again = prune(st.conn, Retention(max_age=None, max_dumps=2, max_bytes=fit), now=NOW)
    st.close()
    assert again.dumps == 0
    g = groups(db)
    # pruned twice: the counts add up
    assert (g[SIG_A]["dumps"], g[SIG_A]["pruned"], g[SIG_A]["ids"]) == (3, 3, [])
    assert g[SIG_A]["hosts"] == ["192.0.2.2", "192.0.2.3", "192.0.2.4"]
    assert g[SIG_A]["last_seen"] == T0 + 3 * HOUR
    assert g[SIG_C]["pruned"] == 0 and g[SIG_C]["ids"] == [5]


def test_dry_run_changes_nothing(db: Path):
    st = writer(db)
    done = prune(st.conn, Retention(max_age=None, max_dumps=1, max_bytes=None), now=NOW,
                 dry_run=True)
    st.close()
    assert done.dumps == 5
    assert ids(db) == [1, 2, 3, 4, 5, 6]
    assert all(g["pruned"] == 0 for g in groups(db).values())


def test_prune_command(any_db: Path | str):
    db = any_db
    res = cli("--db", db, "prune", "--keep-dumps", "2", "--keep-days", "0", "--dry-run",
              "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["format"] == 1 and out["dry_run"] is True and out["dumps"] == 4
    assert ids(db) == [1, 2, 3, 4, 5, 6]
    # every dump is far older than the default 90 days... of the real now
    res = cli("--db", db, "prune", "--keep-days", "0", "--keep-dumps", "2")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("removed 4 dump(s), ")
    assert ids(db) == [5, 6]
    grp = json.loads(cli("--db", db, "groups", "--json").stdout)
    assert {g["signature"]: g["dumps"] for g in grp} == {SIG_A: 3, SIG_B: 1, SIG_C: 1}
    assert "(and 3 pruned)" in cli("--db", db, "groups").stdout


@pytest.mark.parametrize("args, status, message", [
    (("--keep-dumps", "-1"), 2, "must be 0 (no limit) or more"),
    (("--keep-days", "soon"), 2, "not a number"),
])
def test_prune_refuses_bad_limits(db: Path, args: tuple[str, ...], status: int, message: str):
    res = cli("--db", db, "prune", *args)
    assert res.returncode == status and message in res.stderr
    assert ids(db) == [1, 2, 3, 4, 5, 6]


def test_prune_never_creates_a_database(tmp_path: Path):
    res = cli("--db", tmp_path / "none.sqlite3", "prune")
    assert res.returncode == 3 and "no such database" in res.stderr
    assert not (tmp_path / "none.sqlite3").exists()


def test_serve_applies_the_policy(db: Path):
    srv = Serve(db, "--keep-dumps", "2", "--keep-days", "0")
    try:
        line = srv.wait_for("retention: pruned", timeout=10)
    finally:
        assert srv.stop() == 0
    assert "pruned 4 dump(s)" in line and "4 by count" in line
    assert "keeping any age, 2 dumps, 4294967296 bytes of logs" in srv.wait_for("keeping")
    assert ids(db) == [5, 6]
