# SPDX-License-Identifier: GPL-2.0
"""SQLite storage: contents, atomicity, durability across restarts, read-only
opens, replacing a repaired dump, foreign keys, and what the writer refuses."""

from __future__ import annotations

import dataclasses
import itertools
import sqlite3
import time
from pathlib import Path
from typing import Any, Sequence

import pytest

from collector_util import fixture
from netoops_collector.db import ERRORS
from netoops_collector import gen, proto, store
from netoops_collector.reassembly import Dump
from netoops_collector.report import Report, analyse

_UIDS = itertools.count(1)


def _pairs(numbers: Sequence[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for n in sorted(numbers):
        if out and n == out[-1][1] + 1:
            out[-1] = (out[-1][0], n)
        else:
            out.append((n, n))
    return out


def partial_log(text: str, lose: Sequence[int]) -> str:
    """``text`` as a partial dump shows it: a marker line for each lost run."""
    chunks = proto.split_log(text.encode())
    parts: list[str] = []
    for no in range(len(chunks) - 1, -1, -1):        # oldest chunk first
        if no not in lose:
            parts.append(chunks[no].decode())
        elif no + 1 == len(chunks) or no + 1 not in lose:
            head = "" if not parts or parts[-1].endswith("\n") else "\n"
            parts.append(f"{head}--- netoops: chunks of {len(chunks)} missing here ---\n")
    return "".join(parts)


def make_dump(name: str, src: str = "192.0.2.2", boot_id: int = 1, lose: Sequence[int] = (),
              soft: bool = False, **fields: Any) -> Dump:
    """A finalised dump of fixture ``name`` as the reassembler makes it,
    without ``lose``'s chunks; ``fields`` override any Dump field."""
    text = fixture(name)
    count = len(proto.split_log(text.encode()))
    now = time.time()
    dump = Dump(uid=next(_UIDS), revision=0, source=src, port=2004, boot_id=boot_id,
                dump_id=7, type=proto.TYPE_SOFT if soft else proto.TYPE_OOPS,
                kernel_version="6.1.0-netoops", user_blob="rack=7",
                x86_vendor=0, x86_family=6, x86_model=85, x86_stepping=7,
                regs={r: gen.SAMPLE_REGS[r] for r in proto.REG_NAMES},
                packet_count=count, packets_received=count - len(set(lose)),
                missing=_pairs(lose), log=partial_log(text, lose) if lose else text,
                first_packet=now - 1, finalised=now,
                finalised_by="shutdown" if lose else "complete")
    return dataclasses.replace(dump, **fields)


def report(dump: Dump, **fields: Any) -> Report:
    return dataclasses.replace(analyse(dump.log, soft=dump.type == proto.TYPE_SOFT), **fields)


def save(st: store.Store, *dumps: Dump, stats: dict[str, int] | None = None) -> list[int]:
    return st.save([(d, report(d), None) for d in dumps], stats)


def test_stored_fields(where: Path | str):
    db = where
    st = store.Store(db)
    [n] = save(st, make_dump("null_deref_panic.txt"))
    st.close()
    conn = store.open_readonly(db)
    d = store.get_dump(conn, n)
    assert d is not None
    assert (d["source"], d["source_port"], d["boot_id"], d["dump_id"]) == ("192.0.2.2", 2004, 1, 7)
    assert (d["type"], d["kind"], d["complete"], d["missing"]) == (1, "panic", True, [])
    assert d["kernel_version"] == "6.1.0-netoops" and d["user_blob"] == "rack=7"
    assert (d["cpu_vendor_name"], d["cpu_family"], d["cpu_model"], d["cpu_stepping"]) == \
        ("Intel", 6, 85, 7)
    assert d["registers"]["rip"] == "0xffffffffc0005009"
    assert set(d["registers"]) == set(proto.REG_NAMES)
    assert d["title"] == "BUG: kernel NULL pointer dereference in nto_crash_null_deref"
    assert d["taint"] == "GOE" and d["guilty"] == "nto_crash_null_deref"
    assert d["log"] == fixture("null_deref_panic.txt")
    assert [m["name"] for m in d["modules"]][:3] == ["nto_crash", "netoops", "netpoll_targets"]
    assert d["frames"][0]["func"] == "__die" and d["rip_frame"].startswith("nto_crash_null")
    # the frames come back as the report made them, text and all
    rep = analyse(fixture("null_deref_panic.txt"))
    assert d["frames"] == [f.as_dict() for f in rep.frames]
    assert any(f["address"] for f in d["frames"])          # a frame without a symbol
    # derived data is indexed and queryable
    if store.db.dialect(conn) == "sqlite":
        plans = " ".join(r[3] for r in conn.execute(
            "EXPLAIN QUERY PLAN SELECT id FROM dumps WHERE signature = ?", (d["signature"],)))
        assert "dumps_signature" in plans
    assert conn.execute("SELECT COUNT(*) FROM dump_frames WHERE func = 'call_timer_fn'"
                        ).fetchone()[0] == 0
    assert conn.execute("SELECT dump FROM dump_modules WHERE name = 'virtio_net'"
                        ).fetchone()[0] == n


def columns(conn: Any, table: str) -> list[str]:
    """``table``'s columns, in order, on either back end."""
    if store.db.dialect(conn) == "sqlite":
        return [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
    return [r[0] for r in conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
        "ORDER BY ordinal_position", (table,))]


def test_the_schema_keeps_logs_and_frames_once(where: Path | str):
    store.Store(where).close()
    conn = store.open_readonly(where)
    fks = []
    cols = set(columns(conn, "dumps"))
    assert not cols & {"log", "frames"} and {"missing", "signature"} <= cols
    assert columns(conn, "logs") == ["dump", "text"]
    if store.db.dialect(conn) == "postgresql":
        fks = conn.execute(
            "SELECT conrelid::regclass::text, confrelid::regclass::text, confdeltype "
            "FROM pg_constraint WHERE contype = 'f' ORDER BY 1").fetchall()
        assert fks == [("dump_frames", "dumps", "c"), ("dump_modules", "dumps", "c"),
                       ("logs", "dumps", "c"), ("nc_lines", "nc_streams", "c")]
    for child in ("logs", "dump_frames", "dump_modules") if not fks else ():
        [fk] = conn.execute(f"PRAGMA foreign_key_list({child})").fetchall()
        assert (fk["table"], fk["from"], fk["to"], fk["on_delete"]) == \
            ("dumps", "dump", "id", "CASCADE")
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'"
                        ).fetchone()[0] == "2"


def test_partial_and_soft_dumps(where: Path | str):
    st = store.Store(where)
    a, b = save(st, make_dump("gpf.txt", lose=(1, 2)), make_dump("soft_dump.txt", soft=True))
    conn = store.open_readonly(where)
    da, db_ = store.get_dump(conn, a), store.get_dump(conn, b)
    assert da and db_
    assert (da["complete"], da["missing"], da["finalised_by"]) == (False, [[1, 2]], "shutdown")
    assert (da["packet_count"], da["packets_received"]) == (4, 2)
    assert conn.execute("SELECT missing FROM dumps WHERE id = ?", (a,)).fetchone()[0] == "1-2"
    assert conn.execute("SELECT missing FROM dumps WHERE id = ?", (b,)).fetchone()[0] == ""
    assert (db_["kind"], db_["title"]) == ("soft", "soft dump")


def test_missing_ranges_round_trip(where: Path | str):
    st = store.Store(where)
    [n] = save(st, make_dump("soft_lockup.txt", lose=(0, 2, 3, 5)))
    d = store.get_dump(store.open_readonly(where), n)
    assert d and d["missing"] == [[0, 0], [2, 3], [5, 5]]


def test_restart_keeps_every_finalised_dump_and_accumulates_stats(tmp_path: Path):
    db = tmp_path / "deep" / "dir" / "c.sqlite3"
    st = store.Store(db)
    save(st, make_dump("gpf.txt"), stats={"packets": 10, "duplicates": 4})
    st.close()
    st = store.Store(db)           # a restarted collector
    assert st.upgraded_from is None
    save(st, make_dump("warn.txt"), stats={"packets": 5, "rejected_version": 1})
    st.close()
    conn = store.open_readonly(db)
    assert [r["title"] for r in store.list_dumps(conn)] == [
        "general protection fault in nto_crash_gpf", "WARNING in nto_crash_init"]
    assert store.stats(conn)["counters"] == {"packets": 15, "duplicates": 4,
                                             "rejected_version": 1}


def test_a_failing_batch_stores_nothing(where: Path | str):
    st = store.Store(where)
    good = make_dump("gpf.txt")
    bad = make_dump("warn.txt", dump_id=8)
    bad.regs = {"rip": 1}          # missing registers: the insert fails half-way
    with pytest.raises(KeyError):
        save(st, good, bad, stats={"packets": 3})
    conn = store.open_readonly(where)
    assert store.list_dumps(conn) == [] and store.stats(conn)["counters"] == {}
    for table in ("dump_frames", "logs", "dump_modules"):
        assert conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] == 0


def test_save_with_a_dump_no_replaces_that_dump_in_place(where: Path | str):
    st = store.Store(where)
    partial = make_dump("null_deref.txt", lose=(1,), finalised_by="timeout")
    stale = report(partial, modules=[("stale_mod", "O")],
                   frames=report(make_dump("gpf.txt")).frames * 3)
    [n, other] = st.save([(partial, stale, None), (make_dump("warn.txt"), report(partial), None)])
    repaired = dataclasses.replace(make_dump("null_deref.txt"), uid=partial.uid, revision=1)
    rep = report(repaired)
    third = make_dump("gpf.txt", src="192.0.2.9")
    assert st.save([(third, report(third), None), (repaired, rep, n)],
                   {"late": 1}) == [other + 1, n]
    conn = store.open_readonly(where)
    d = store.get_dump(conn, n)
    assert d is not None
    assert (d["complete"], d["missing"], d["finalised_by"]) == (True, [], "complete")
    assert d["log"] == fixture("null_deref.txt")
    assert d["frames"] == [f.as_dict() for f in rep.frames]
    assert d["modules"] == [{"name": m, "flags": f} for m, f in rep.modules]
    assert [r["id"] for r in store.list_dumps(conn)] == [n, other, other + 1]
    for table in ("logs", "dump_frames", "dump_modules"):   # nothing of the old one left
        assert conn.execute(f"SELECT COUNT(*) FROM {table} WHERE dump = ?", (n,)).fetchone()[0] \
            == {"logs": 1, "dump_frames": len(rep.frames), "dump_modules": len(rep.modules)}[table]
    assert store.stats(conn)["counters"] == {"late": 1}


def test_foreign_keys_cascade_from_a_dump_to_its_log_frames_and_modules(where: Path | str):
    st = store.Store(where)
    a, b = save(st, make_dump("null_deref.txt"), make_dump("null_deref_panic.txt"))
    sqlite = st.dialect == "sqlite"         # PostgreSQL always enforces them
    assert not sqlite or st.conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    st.conn.execute("DELETE FROM dumps WHERE id = ?", (a,))
    conn = store.open_readonly(where)
    assert not sqlite or conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    for table in ("logs", "dump_frames", "dump_modules"):
        left = {n for (n,) in conn.execute(f"SELECT DISTINCT dump FROM {table}")}
        assert left == {b}, table
    with pytest.raises(ERRORS):    # no log without its dump
        st.conn.execute("INSERT INTO logs VALUES (99, 'x')")


def test_listing_never_reads_a_log(tmp_path: Path):
    st = store.Store(tmp_path / "c.sqlite3")
    save(st, make_dump("null_deref.txt"), make_dump("gpf.txt", lose=(2,)))
    conn = store.open_readonly(tmp_path / "c.sqlite3")
    read: set[str] = set()

    def watch(action: int, table: str | None, *_: Any) -> int:
        if action == sqlite3.SQLITE_READ and table:
            read.add(table)
        return sqlite3.SQLITE_OK
    conn.set_authorizer(watch)
    assert len(store.list_dumps(conn)) == 2 and len(store.list_dumps(conn, 1)) == 1
    assert "dumps" in read and "logs" not in read
    store.get_dump(conn, 1)
    assert "logs" in read                    # (the watch works)


def test_groups(where: Path | str):
    st = store.Store(where)
    save(st, make_dump("null_deref.txt", src="192.0.2.2"),
         make_dump("null_deref_panic.txt", src="192.0.2.3"),
         make_dump("null_deref.txt", src="192.0.2.3", boot_id=2),
         make_dump("sysrq_panic.txt"))
    groups = store.groups(store.open_readonly(where))
    assert [(g["dumps"], g["boots"], g["host_count"]) for g in groups] == [(3, 3, 2), (1, 1, 1)]
    assert groups[0]["hosts"] == ["192.0.2.2", "192.0.2.3"]
    assert groups[0]["ids"] == [1, 2, 3] and groups[0]["kernels"] == ["6.1.0-netoops"]
    assert groups[0]["first_seen"] <= groups[0]["last_seen"]


def test_dumps_without_crash_text_are_not_grouped(where: Path | str):
    st = store.Store(where)
    dumps = [make_dump("soft_dump.txt", soft=True), make_dump("soft_dump.txt", soft=True,
                                                             boot_id=2),
             make_dump("gpf.txt"), make_dump("gpf.txt", boot_id=3)]
    ids = st.save([(d, report(d, signature=None) if d.type == proto.TYPE_SOFT else report(d),
                    None) for d in dumps])
    conn = store.open_readonly(where)
    assert [(g["ids"], g["title"]) for g in store.groups(conn)] == \
        [(ids[2:], "general protection fault in nto_crash_gpf")]
    assert store.ungrouped(conn) == 2
    assert store.stats(conn)["stored"] == {"dumps": 4, "complete": 4, "partial": 0,
                                           "signatures": 1, "no_crash_text": 2}
    d = store.get_dump(conn, ids[0])
    assert d and d["signature"] is None


@pytest.mark.parametrize("timeout", [{}, {"busy_timeout": 0.2}])
def test_a_locked_database_fails_fast(tmp_path: Path, timeout: dict[str, float]):
    store.Store(tmp_path / "c.sqlite3").close()
    other = sqlite3.connect(tmp_path / "c.sqlite3", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")            # another writer holds the lock
    st = store.Store(tmp_path / "c.sqlite3", **timeout)     # opening needs no lock
    start = time.monotonic()
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        save(st, make_dump("gpf.txt"))
    assert time.monotonic() - start < 5         # serve keeps the batch for a retry
    other.execute("ROLLBACK")
    assert save(st, make_dump("gpf.txt")) == [1]


def _snapshot(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.parent.iterdir())}


@pytest.mark.parametrize("make, message", [
    (lambda c: c.executescript("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);"
                               "INSERT INTO meta VALUES ('schema_version', '3');"),
     "schema version 3 is newer than this collector's"),
    (lambda c: c.execute("CREATE TABLE t (x)"), "not a netoops collector database"),
    (lambda c: c.execute("CREATE TABLE meta (key, value)"), "no schema version"),
], ids=["newer", "foreign", "no-version"])
def test_the_writer_refuses_and_changes_nothing(tmp_path: Path, make: Any, message: str):
    path = tmp_path / "c.sqlite3"
    conn = sqlite3.connect(path)
    make(conn)
    conn.commit()
    conn.close()
    before = _snapshot(path)
    with pytest.raises(store.StoreError, match=message):
        store.Store(path)
    assert _snapshot(path) == before


def test_the_writer_refuses_junk_and_takes_an_empty_file(tmp_path: Path):
    junk = tmp_path / "junk"
    junk.write_bytes(b"definitely not sqlite" * 100)
    with pytest.raises(store.StoreError, match="not a netoops collector database"):
        store.Store(junk)
    assert junk.read_bytes() == b"definitely not sqlite" * 100
    empty = tmp_path / "empty.sqlite3"
    empty.touch()
    store.Store(empty).close()
    assert store.list_dumps(store.open_readonly(empty)) == []


def test_readonly_open_refuses_and_never_creates(tmp_path: Path):
    missing = tmp_path / "none" / "c.sqlite3"
    with pytest.raises(store.StoreError, match="no such database"):
        store.open_readonly(missing)
    assert not missing.exists() and not missing.parent.exists()
    with pytest.raises(store.StoreError, match="not a database file"):
        store.open_readonly(tmp_path)
    junk = tmp_path / "junk"
    junk.write_bytes(b"definitely not sqlite" * 100)
    with pytest.raises(store.StoreError, match="not a netoops collector database"):
        store.open_readonly(junk)
    other = tmp_path / "other.sqlite3"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.close()
    with pytest.raises(store.StoreError, match="not a netoops collector database"):
        store.open_readonly(other)


def test_readonly_connection_cannot_write(where: Path | str):
    store.Store(where).close()
    conn = store.open_readonly(where)
    with pytest.raises(ERRORS):
        conn.execute("DELETE FROM dumps")


def test_default_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.delenv("NETOOPS_DB", raising=False)
    # systemd's StateDirectory= (netoops-collector.service: /var/lib/netoops)
    monkeypatch.setenv("STATE_DIRECTORY", f"{tmp_path}/state:{tmp_path}/other")
    assert store.default_db_path() == tmp_path / "state" / "collector.sqlite3"
    monkeypatch.setenv("NETOOPS_DB", str(tmp_path / "x.db"))
    assert store.default_db_path() == tmp_path / "x.db"
    monkeypatch.delenv("NETOOPS_DB")
    monkeypatch.delenv("STATE_DIRECTORY")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert store.default_db_path() == tmp_path / "netoops" / "collector.sqlite3"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert store.default_db_path() == tmp_path / ".local/share/netoops/collector.sqlite3"
