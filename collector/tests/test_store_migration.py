# SPDX-License-Identifier: GPL-2.0
"""Upgrading a schema-version-1 database to version 2.

fixtures/schema_v1.sql is a database made by the version-1 collector (commit
a356953, before schema version 2): fixtures/make_schema_v1.py, run against
that commit's package (``git archive a356953 collector | tar -x -C
/tmp/v1src``, then ``PYTHONPATH=/tmp/v1src/collector``), stored five dumps
from fixtures/*.txt through its Reassembler and Store (two complete oopses
of one signature, two partial dumps with packet_no 2 and 1, 2, 4 missing, a
soft dump) and wrote the ``iterdump()`` of the database to schema_v1.sql and
what its read side returned (``list``/``show``/``groups``/``stats`` as JSON)
to schema_v1.json, the expected values here.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from collector_util import FIXTURES
from netoops_collector import store, views

V1_SQL = (FIXTURES / "schema_v1.sql").read_text()
V1 = json.loads((FIXTURES / "schema_v1.json").read_text())


def v1_db(path: Path, *edits: str) -> Path:
    """A version-1 database from the fixture, with ``edits`` (SQL) applied."""
    conn = sqlite3.connect(path)
    conn.executescript(V1_SQL)
    for sql in edits:
        conn.execute(sql)
    conn.commit()
    conn.close()
    return path


def dump_text(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def expected_show(n: int) -> dict[str, Any]:
    """What version 2 shows of dump ``n``: version 1's, with the missing
    packet_no as ranges, no signature without crash text and the JSON
    format version."""
    d = {"format": views.FORMAT, **V1["show"][str(n)]}
    pairs: list[list[int]] = []
    for no in d["missing"]:
        if pairs and no == pairs[-1][1] + 1:
            pairs[-1][1] = no
        else:
            pairs.append([no, no])
    d["missing"] = pairs
    if d["crash_kind"] is None:
        d["signature"] = None
    return d


def show(conn: sqlite3.Connection, n: int) -> dict[str, Any]:
    """Dump ``n`` as `show --json` prints it."""
    d = store.get_dump(conn, n)
    assert d is not None, n
    return json.loads(views.show_json(d))


def no_crash_text() -> set[int]:
    return {int(n) for n, d in V1["show"].items() if d["crash_kind"] is None}


def test_the_fixture_is_a_version_1_database(tmp_path: Path):
    conn = sqlite3.connect(v1_db(tmp_path / "v1.sqlite3"))
    assert conn.execute("SELECT value FROM meta").fetchone() == ("1",)
    assert {"log", "frames"} <= {r[1] for r in conn.execute("PRAGMA table_info(dumps)")}
    assert [d["missing"] for d in V1["show"].values()] == [[], [], [2], [1, 2, 4], []]
    assert no_crash_text() == {5}


def test_upgrade_keeps_every_dump(tmp_path: Path):
    path = v1_db(tmp_path / "c.sqlite3")
    st = store.Store(path)
    assert st.upgraded_from == 1
    st.close()
    conn = store.open_readonly(path)
    want_list = [{"format": views.FORMAT,
                  **(dict(r, signature=None) if r["id"] in no_crash_text() else r)}
                 for r in V1["list"]]
    assert json.loads(views.list_json(store.list_dumps(conn))) == want_list
    for n in (1, 2, 3, 4, 5):
        assert show(conn, n) == expected_show(n), n
    assert show(conn, 3)["missing"] == [[2, 2]]
    assert show(conn, 4)["missing"] == [[1, 2], [4, 4]]
    assert len(show(conn, 1)["frames"]) == 16
    # the groups, less the one a soft dump made of its title alone
    assert json.loads(views.groups_json(store.groups(conn))) == \
        [{"format": views.FORMAT, **g, "pruned": 0} for g in V1["groups"]
         if not set(g["ids"]) <= no_crash_text()]
    assert store.ungrouped(conn) == 1
    st_v1 = V1["stats"]
    assert store.stats(conn) == {
        "counters": st_v1["counters"],
        "stored": dict(st_v1["stored"], signatures=st_v1["stored"]["signatures"] - 1,
                       no_crash_text=1),
        "sources": [], "gauges": {}}


def test_the_upgraded_schema_is_the_new_schema(tmp_path: Path):
    old = v1_db(tmp_path / "old.sqlite3")
    store.Store(old).close()
    new = tmp_path / "new.sqlite3"
    store.Store(new).close()

    def shape(path: Path) -> dict[str, Any]:
        conn = sqlite3.connect(path)
        tables = [t for (t,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        out: dict[str, Any] = {"meta": conn.execute("SELECT * FROM meta").fetchall()}
        for t in tables:
            out[t] = (conn.execute(f"PRAGMA table_info({t})").fetchall(),
                      conn.execute(f"PRAGMA foreign_key_list({t})").fetchall(),
                      sorted((i[1], i[2]) for i in conn.execute(f"PRAGMA index_list({t})")))
        out["indexes"] = conn.execute("SELECT name, tbl_name FROM sqlite_master"
                                      " WHERE type = 'index' ORDER BY name").fetchall()
        conn.close()
        return out
    assert shape(old) == shape(new)


def test_a_second_open_changes_nothing(tmp_path: Path):
    path = v1_db(tmp_path / "c.sqlite3")
    store.Store(path).close()
    once = dump_text(path)
    st = store.Store(path)
    assert st.upgraded_from is None
    st.close()
    assert dump_text(path) == once


def test_the_upgraded_database_cascades(tmp_path: Path):
    path = v1_db(tmp_path / "c.sqlite3")
    st = store.Store(path)
    st.conn.execute("DELETE FROM dumps WHERE id = 1")
    for table in ("logs", "dump_frames", "dump_modules"):
        assert st.conn.execute(f"SELECT COUNT(*) FROM {table} WHERE dump = 1"
                               ).fetchone()[0] == 0
        assert st.conn.execute(f"SELECT COUNT(*) FROM {table} WHERE dump = 2"
                               ).fetchone()[0] > 0
    st.close()


def test_a_view_of_the_dumps_does_not_stop_the_upgrade(tmp_path: Path):
    path = v1_db(tmp_path / "c.sqlite3", "CREATE VIEW titles AS SELECT id, title FROM dumps")
    store.Store(path).close()
    conn = store.open_readonly(path)
    assert conn.execute("SELECT title FROM titles WHERE id = 3").fetchone()[0] == \
        V1["show"]["3"]["title"]


def test_ids_with_gaps_are_kept_and_orphans_dropped(tmp_path: Path):
    # Version 1 did not enforce its foreign keys: deleting a dump by hand
    # left its frames and modules behind.
    path = v1_db(tmp_path / "c.sqlite3", "DELETE FROM dumps WHERE id = 2")
    store.Store(path).close()
    conn = store.open_readonly(path)
    assert [r["id"] for r in store.list_dumps(conn)] == [1, 3, 4, 5]
    assert show(conn, 4) == expected_show(4)
    assert conn.execute("SELECT COUNT(*) FROM dump_frames WHERE dump = 2").fetchone()[0] == 0
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []


def test_frames_that_disagree_with_their_json_are_rebuilt_from_it(tmp_path: Path):
    path = v1_db(tmp_path / "c.sqlite3", "DELETE FROM dump_frames WHERE dump = 1 AND pos = 3",
                 "UPDATE dump_frames SET func = 'edited' WHERE dump = 2 AND pos = 0")
    store.Store(path).close()
    conn = store.open_readonly(path)
    for n in (1, 2):
        assert show(conn, n)["frames"] == expected_show(n)["frames"]


@pytest.mark.parametrize("edit, message", [
    ("UPDATE dumps SET missing = 'oops' WHERE id = 3", "dump 3: cannot read its missing list"),
    ("UPDATE dumps SET frames = '[{}]' WHERE id = 2", "dump 2: cannot read its frames"),
    # fails at the very end, after the tables are rebuilt
    (None, "no such table: main.nowhere"),
], ids=["missing", "frames", "late-failure"])
def test_a_failed_upgrade_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          edit: str | None, message: str):
    path = v1_db(tmp_path / "c.sqlite3", *filter(None, [edit]))
    if edit is None:
        monkeypatch.setattr(store, "_INDEXES", (*store._INDEXES, "CREATE INDEX x ON nowhere (x)"))
    before = dump_text(path)
    with pytest.raises(store.StoreError, match=message):
        store.Store(path)
    assert dump_text(path) == before


def test_a_newer_database_is_refused_byte_for_byte_unchanged(tmp_path: Path):
    path = v1_db(tmp_path / "c.sqlite3", "UPDATE meta SET value = '3'")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(store.StoreError, match="schema version 3 is newer"):
        store.Store(path)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    with pytest.raises(store.StoreError, match="schema version 3 is newer"):
        store.open_readonly(path)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_the_reader_refuses_version_1_and_says_serve_upgrades_it(tmp_path: Path):
    path = v1_db(tmp_path / "c.sqlite3")
    with pytest.raises(store.StoreError,
                       match=r"schema version 1 is older .* `netoops-collector serve` "
                             "upgrades it"):
        store.open_readonly(path)
