# SPDX-License-Identifier: GPL-2.0
"""SQLite storage: contents, atomicity, durability across restarts, read-only opens."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from collector_util import fixture, packets
from netoops_collector import proto, store
from netoops_collector.reassembly import Dump, Reassembler
from netoops_collector.report import analyse


def make_dump(name: str, src: str = "192.0.2.2", boot_id: int = 1, lose: tuple[int, ...] = (),
              soft: bool = False) -> Dump:
    r = Reassembler()
    out: list[Dump] = []
    for p in packets(fixture(name), boot_id=boot_id, user_blob="rack=7",
                     type=proto.TYPE_SOFT if soft else proto.TYPE_OOPS):
        if proto.decode(p).packet_no not in lose:
            out += r.feed(p, src, 2004)
    out += r.flush()
    assert len(out) == 1
    return out[0]


def save(st: store.Store, *dumps: Dump, stats: dict[str, int] | None = None) -> list[int]:
    return st.save([(d, analyse(d.log, soft=d.type == 3)) for d in dumps], stats)


def test_stored_fields(tmp_path: Path):
    db = tmp_path / "c.sqlite3"
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
    # derived data is indexed and queryable
    plans = " ".join(r[3] for r in conn.execute(
        "EXPLAIN QUERY PLAN SELECT id FROM dumps WHERE signature = ?", (d["signature"],)))
    assert "dumps_signature" in plans
    assert conn.execute("SELECT COUNT(*) FROM dump_frames WHERE func = 'call_timer_fn'"
                        ).fetchone()[0] == 0
    assert conn.execute("SELECT dump FROM dump_modules WHERE name = 'virtio_net'"
                        ).fetchone()[0] == n


def test_partial_and_soft_dumps(tmp_path: Path):
    st = store.Store(tmp_path / "c.sqlite3")
    a, b = save(st, make_dump("gpf.txt", lose=(1, 2)), make_dump("soft_dump.txt", soft=True))
    conn = store.open_readonly(tmp_path / "c.sqlite3")
    da, db_ = store.get_dump(conn, a), store.get_dump(conn, b)
    assert da and db_
    assert (da["complete"], da["missing"], da["finalised_by"]) == (False, [1, 2], "shutdown")
    assert (db_["kind"], db_["title"]) == ("soft", "soft dump")


def test_restart_keeps_every_finalised_dump_and_accumulates_stats(tmp_path: Path):
    db = tmp_path / "deep" / "dir" / "c.sqlite3"
    st = store.Store(db)
    save(st, make_dump("gpf.txt"), stats={"packets": 10, "duplicates": 4})
    st.close()
    st = store.Store(db)           # a restarted collector
    save(st, make_dump("warn.txt"), stats={"packets": 5, "rejected_version": 1})
    st.close()
    conn = store.open_readonly(db)
    assert [r["title"] for r in store.list_dumps(conn)] == [
        "general protection fault in nto_crash_gpf", "WARNING in nto_crash_init"]
    assert store.stats(conn)["counters"] == {"packets": 15, "duplicates": 4,
                                             "rejected_version": 1}


def test_a_failing_batch_stores_nothing(tmp_path: Path):
    st = store.Store(tmp_path / "c.sqlite3")
    good = make_dump("gpf.txt")
    bad = make_dump("warn.txt")
    bad.regs = {"rip": 1}          # missing registers: the insert fails half-way
    with pytest.raises(KeyError):
        save(st, good, bad, stats={"packets": 3})
    conn = store.open_readonly(tmp_path / "c.sqlite3")
    assert store.list_dumps(conn) == [] and store.stats(conn)["counters"] == {}
    assert conn.execute("SELECT COUNT(*) FROM dump_frames").fetchone()[0] == 0


def test_groups(tmp_path: Path):
    st = store.Store(tmp_path / "c.sqlite3")
    save(st, make_dump("null_deref.txt", src="192.0.2.2"),
         make_dump("null_deref_panic.txt", src="192.0.2.3"),
         make_dump("null_deref.txt", src="192.0.2.3", boot_id=2),
         make_dump("sysrq_panic.txt"))
    groups = store.groups(store.open_readonly(tmp_path / "c.sqlite3"))
    assert [(g["dumps"], g["boots"], g["host_count"]) for g in groups] == [(3, 3, 2), (1, 1, 1)]
    assert groups[0]["hosts"] == ["192.0.2.2", "192.0.2.3"]
    assert groups[0]["ids"] == [1, 2, 3] and groups[0]["kernels"] == ["6.1.0-netoops"]
    assert groups[0]["first_seen"] <= groups[0]["last_seen"]


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


def test_readonly_connection_cannot_write(tmp_path: Path):
    store.Store(tmp_path / "c.sqlite3").close()
    conn = store.open_readonly(tmp_path / "c.sqlite3")
    with pytest.raises(sqlite3.OperationalError):
        conn.execute("DELETE FROM dumps")


def test_default_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert store.default_db_path() == tmp_path / "netoops" / "collector.sqlite3"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert store.default_db_path() == tmp_path / ".local/share/netoops/collector.sqlite3"
