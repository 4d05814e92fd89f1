# SPDX-License-Identifier: GPL-2.0
"""Several collectors writing one PostgreSQL database (a real server, see
pgserver.py): every dump stored once however many collectors received it,
one group per signature, netconsole streams that do not collide, and the
query commands, the dashboard's data and clear errors on that database."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from collector_util import GUEST_FIXTURES, PYTHON, Serve, cli, cli_env, cli_json, packets
from netoops_collector import dashboard, store
from netoops_collector.db import ERRORS
from pgserver import Server
from test_netconsole_rx import ext

LOGS = sorted(GUEST_FIXTURES.glob("*.txt"))


def _wait_dumps(url: str, n: int, timeout: float = 60) -> list[dict[str, Any]]:
    end = time.monotonic() + timeout
    rows: list[dict[str, Any]] = []
    while time.monotonic() < end:
        rows = cli_json("--db", url, "list")
        if len(rows) >= n and all(r["complete"] for r in rows):
            return rows
        time.sleep(0.3)
    return rows


def dbname(url: str) -> str:
    return url.split("@/", 1)[1].split("?", 1)[0]


def _sender(src: str) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((src, 0))
    return s


def test_three_collectors_store_each_dump_once_in_one_database(pg: Server):
    url = pg.database()
    collectors = [Serve(url, "--quiet-timeout", "2") for _ in range(3)]
    try:
        # Each collector's own hosts: 127.0.0.{10,11,12}, every guest crash,
        # sent to all three at once so that first sightings race.
        own = []
        for c, srv in enumerate(collectors):
            def send(c: int = c, srv: Serve = srv) -> None:
                with _sender(f"127.0.0.{10 + c}") as s:
                    for k, log in enumerate(LOGS):
                        for p in packets(log.read_text(), boot_id=1000 + c, dump_id=k + 1):
                            s.sendto(p, ("127.0.0.1", srv.port))
            own.append(threading.Thread(target=send))
        for t in own:
            t.start()
        for t in own:
            t.join()
        # One host with a target on each collector: its dumps reach all three.
        with _sender("127.0.0.20") as s:
            for k, log in enumerate(LOGS[:3]):
                for p in packets(log.read_text(), boot_id=77, dump_id=k + 1):
                    for srv in collectors:
                        s.sendto(p, ("127.0.0.1", srv.port))
        # Netconsole from two hosts to different collectors.
        for c, src in ((0, "127.0.0.30"), (1, "127.0.0.31")):
            with _sender(src) as s:
                for seq in range(5):
                    s.sendto(ext(seq, f"line {seq} of {src}"), ("127.0.0.1",
                                                                 collectors[c].nc_port))
        want = 3 * len(LOGS) + 3
        rows = _wait_dumps(url, want)
        time.sleep(1)                   # anything stored twice would show now
        rows = cli_json("--db", url, "list")
    finally:
        assert [srv.stop() for srv in collectors] == [0, 0, 0]
    assert len(rows) == want, [(r["source"], r["boot_id"], r["dump_id"]) for r in rows]
    origins = {(r["source"], r["boot_id"], r["dump_id"]) for r in rows}
    assert len(origins) == want and all(r["complete"] for r in rows)
    assert {r["source"] for r in rows} == {"127.0.0.10", "127.0.0.11", "127.0.0.12",
                                           "127.0.0.20"}
    # One group per crash, however many collectors saw it first at once.
    groups = cli_json("--db", url, "groups")
    sigs = {r["signature"] for r in rows if r["signature"]}
    assert len(groups) == len(sigs)
    assert sum(g["dumps"] for g in groups) == sum(1 for r in rows if r["signature"])
    # The streams of two collectors: their own ids, each host's lines whole.
    for src in ("127.0.0.30", "127.0.0.31"):
        tail = cli_json("--db", url, "tail", "--host", src)
        assert [ln["text"] for ln in tail["lines"]] == [f"line {i} of {src}" for i in range(5)]
    conn = store.open_readonly(url)
    ids = [i for (i,) in conn.execute("SELECT id FROM nc_streams")]
    assert len(ids) == 2 and len({i >> 32 for i in ids}) == 2      # two collectors' blocks
    page = dashboard.groups(conn)
    assert sum(g["dumps"] for g in page["groups"]) == sum(g["dumps"] for g in groups)


def test_a_later_more_complete_copy_takes_the_row(pg: Server):
    """Collector A stores a partial dump, then B receives it whole: one row, whole."""
    url = pg.database()
    log = (GUEST_FIXTURES / "null_deref.txt").read_text()
    pk = packets(log, boot_id=5)
    a = Serve(url, "--quiet-timeout", "1")
    try:
        with _sender("127.0.0.40") as s:
            for p in pk[:-1]:
                s.sendto(p, ("127.0.0.1", a.port))
        a.wait_for("dump 1 from", timeout=20)
    finally:
        assert a.stop() == 0
    b = Serve(url, "--quiet-timeout", "1")
    try:
        with _sender("127.0.0.40") as s:
            for seq in range(3):        # what netconsole saw before the crash
                s.sendto(ext(seq, f"before {seq}"), ("127.0.0.1", b.nc_port))
            time.sleep(1.5)
            for p in pk:
                s.sendto(p, ("127.0.0.1", b.port))
        with _sender("127.0.0.41") as s:    # a host that goes quiet, no dump
            s.sendto(ext(0, "last words"), ("127.0.0.1", b.nc_port))
        b.wait_for("dump 1 from", timeout=20)
        time.sleep(1.5)
    finally:
        assert b.stop() == 0
    [row] = cli_json("--db", url, "list")
    assert row["id"] == 1 and row["complete"]
    shown = cli_json("--db", url, "show", "1")
    assert shown["log"] == log
    assert [ln["text"] for ln in shown["netconsole"]["lines"]] == [
        f"before {i}" for i in range(3)]
    silent = cli_json("--db", url, "silent", "--after", "1")
    assert [h["stream"]["source"] for h in silent["silent"]] == ["127.0.0.41"], silent


def test_errors_name_the_database_without_its_password(pg: Server, tmp_path: Path):
    secret = pg.url("nosuch").replace("netoops@", "netoops:hunter2@")
    res = cli("--db", secret, "list")
    assert res.returncode == 3 and "does not exist" in res.stderr
    assert "hunter2" not in res.stderr and "netoops:***@" in res.stderr
    # An empty database is not created by a reader, and not a collector's.
    empty = pg.database()
    res = cli("--db", empty, "groups")
    assert res.returncode == 3 and "serve` creates them" in res.stderr
    assert pg.psql("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'",
                   dbname(empty)).strip() == "0"
    # A database of something else is refused, and left alone.
    other = pg.database()
    pg.psql("CREATE TABLE t (x int)", dbname(other))
    with pytest.raises(store.StoreError, match="no meta table"):
        store.Store(other)


def test_a_partial_copy_never_replaces_a_whole_one(pg: Server):
    """Collector A stores a dump whole; B's partial copy of it, first new,
    then repaired with more (not all) of its chunks, leaves A's row alone."""
    from test_store import make_dump, report
    url = pg.database()
    a, b = store.Store(url), store.Store(url)
    try:
        whole = make_dump("null_deref.txt")
        [n] = a.save([(whole, report(whole), None)])
        part = make_dump("null_deref.txt", lose=(1, 2))
        assert b.save([(part, report(part), None)]) == [n]
        more = make_dump("null_deref.txt", lose=(2,))
        assert b.save([(more, report(more), n)]) == [n]
        [row] = store.list_dumps(store.open_readonly(url))
        assert row["id"] == n and row["complete"]
    finally:
        a.close()
        b.close()


def test_a_collector_reconnects_after_the_server_drops_it(pg: Server):
    from test_store import make_dump, report
    url = pg.database()
    st = store.Store(url)
    try:
        d = make_dump("gpf.txt")
        st.save([(d, report(d), None)])
        pg.psql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                f"WHERE datname = '{dbname(url)}' AND pid <> pg_backend_pid()")
        d2 = make_dump("warn.txt", dump_id=8)
        with pytest.raises(ERRORS):          # the statement that finds out
            st.save([(d2, report(d2), None)])
        st.save([(d2, report(d2), None)])    # the retry connects again
        assert len(store.list_dumps(store.open_readonly(url))) == 2
    finally:
        st.close()


def test_tail_follow_on_postgresql(pg: Server):
    url = pg.database()
    srv = Serve(url)
    follow = None
    try:
        with _sender("127.0.0.50") as s:
            s.sendto(ext(0, "first"), ("127.0.0.1", srv.nc_port))
            end = time.monotonic() + 10
            while cli("--db", url, "tail", "--host", "127.0.0.50").returncode != 0:
                assert time.monotonic() < end
                time.sleep(0.2)
            follow = subprocess.Popen(
                [PYTHON, "-m", "netoops_collector", "--db", url, "tail", "--host",
                 "127.0.0.50", "--follow", "--interval", "0.2", "--json"],
                stdout=subprocess.PIPE, text=True, env=cli_env())
            assert follow.stdout is not None
            assert json.loads(follow.stdout.readline())["text"] == "first"
            s.sendto(ext(1, "second"), ("127.0.0.1", srv.nc_port))
            assert json.loads(follow.stdout.readline())["text"] == "second"
    finally:
        if follow is not None:
            follow.send_signal(signal.SIGTERM)
            assert follow.wait(10) == 0
        assert srv.stop() == 0


def test_printed_urls_have_no_password():
    from netoops_collector.db import redact
    assert redact("postgresql://u:pw@h/db") == "postgresql://u:***@h/db"
    assert redact("postgresql://u@h/db?sslmode=require&password=pw&x=1") == \
        "postgresql://u@h/db?sslmode=require&password=***&x=1"
