# SPDX-License-Identifier: GPL-2.0
"""Storage failures never stop receiving and never lose a received dump;
shutdown ends within a bound under traffic."""

from __future__ import annotations

import io
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from collector_util import Clock, Serve, cli_json, fixture, packets
from netoops_collector import store
from netoops_collector.server import ServeConfig, Server, spool_path


def server(db: Path) -> tuple[Server, Clock, io.StringIO]:
    clock = Clock()
    err = io.StringIO()
    return Server(ServeConfig(db=db), err=err, clock=clock), clock, err


def feed(srv: Server, log: str, boot: int) -> None:
    for p in packets(log, boot_id=boot):
        srv._ready.extend(srv.reasm.feed(p, "192.0.2.2", 6666, srv.clock()))


def stored(db: Path) -> list[int]:
    conn = store.open_readonly(db)
    try:
        return [r["boot_id"] for r in store.list_dumps(conn)]
    finally:
        conn.close()


def test_a_locked_database_keeps_the_dumps_and_retries_with_a_delay(tmp_path: Path):
    db = tmp_path / "c.sqlite3"
    srv, clock, err = server(db)
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")              # another writer holds the lock
    feed(srv, fixture("null_deref.txt"), 1)
    srv._store(everything=True)
    assert "database error, 1 dump(s) kept for a retry" in err.getvalue()
    assert srv.stats["store_errors"] == 1 and len(srv._pending) == 1
    feed(srv, fixture("gpf.txt"), 2)
    srv._store(everything=True)                  # within the delay: not even tried
    assert srv.stats["store_errors"] == 1 and len(srv._pending) == 2
    time.sleep(1.0)                              # real time: the delay is wall clock
    other.execute("ROLLBACK")
    other.close()
    clock.t += 1.5
    srv._store()
    assert not srv._pending and "database writable again" in err.getvalue()
    # the delay from finalised to stored is measured, logged and kept as a gauge
    assert srv._lag["store"] >= 1.0
    srv._log_counters()
    line = err.getvalue().splitlines()[-1]
    assert "to stored 1." in line, line
    srv.close()
    assert stored(db) == [1, 2]


def test_a_dump_that_cannot_be_stored_is_spooled_and_stored_at_the_next_start(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    db = tmp_path / "c.sqlite3"
    srv, clock, err = server(db)
    real_row = store._row

    def broken(dump, rep):  # type: ignore[no-untyped-def]
        if dump.boot_id == 2:
            raise ValueError("a collector bug")
        return real_row(dump, rep)
    monkeypatch.setattr(store, "_row", broken)
    feed(srv, fixture("null_deref.txt"), 1)
    feed(srv, fixture("gpf.txt"), 2)
    feed(srv, fixture("warn.txt"), 3)
    srv._store(everything=True)
    assert "cannot be stored (ValueError: a collector bug)" in err.getvalue()
    srv._stop = True                              # (the spool is reloaded at the next start)
    srv._store(everything=True)
    srv.close()
    assert stored(db) == [1, 3]
    assert spool_path(db).exists()
    monkeypatch.setattr(store, "_row", real_row)
    srv, clock, err = server(db)
    srv._load_spool()
    srv._store(everything=True)
    srv.close()
    assert stored(db) == [1, 3, 2] and not spool_path(db).exists()
    assert cli_json("--db", db, "show", "3")["title"].startswith("general protection fault")


def test_a_repair_that_is_spooled_replaces_its_row_at_the_next_start(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    db = tmp_path / "c.sqlite3"
    srv, clock, err = server(db)
    pkts = packets(fixture("null_deref.txt"), boot_id=4)
    for p in pkts[1:]:                            # chunk 0 lost: stored partial
        srv._ready.extend(srv.reasm.feed(p, "192.0.2.2", 6666, clock.t))
    clock.t += 11
    srv._ready.extend(srv.reasm.expire(clock.t))
    srv._store(everything=True)
    real_row = store._row

    def broken(dump, rep):  # type: ignore[no-untyped-def]
        if dump.revision:
            raise ValueError("a collector bug")
        return real_row(dump, rep)
    monkeypatch.setattr(store, "_row", broken)
    srv._ready.extend(srv.reasm.feed(pkts[0], "192.0.2.2", 6666, clock.t))   # the repair
    srv._store(everything=True)
    srv._stop = True
    srv.close()
    assert "cannot be stored" in err.getvalue() and spool_path(db).exists()
    monkeypatch.setattr(store, "_row", real_row)
    srv, clock, err = server(db)
    srv._load_spool()
    srv._store(everything=True)
    srv.close()
    [row] = cli_json("--db", db, "list")
    assert row["id"] == 1 and row["complete"] is True


def test_shutdown_ends_within_a_bound_under_traffic(tmp_path: Path):
    db = tmp_path / "c.sqlite3"
    srv = Serve(db)
    stop = threading.Event()
    pkts = packets(fixture("null_deref.txt"), copies=3, boot_id=5)

    def flood() -> None:
        import socket
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        i = 0
        while not stop.is_set():
            s.sendto(pkts[i % len(pkts)], ("127.0.0.1", srv.port))
            i += 1
        s.close()
    t = threading.Thread(target=flood)
    t.start()
    try:
        srv.wait_for("dump 1 from")
        start = time.monotonic()
        assert srv.stop(timeout=15) == 0
        took = time.monotonic() - start
    finally:
        stop.set()
        t.join()
        srv.kill()
    assert took < 10, took                        # 2 s of reading + 5 s of storing at most
    assert stored(db) == [5]
