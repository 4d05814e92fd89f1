# SPDX-License-Identifier: GPL-2.0
"""The query commands, run as `/usr/bin/python3 -m netoops_collector`."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import tempfile
from pathlib import Path

import pytest

from collector_util import FIXTURES, PYTHON, cli, cli_env
from conftest import BACKENDS
from netoops_collector import store
from test_store import make_dump, report


def new_db(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
           name: str) -> Path | str:
    """An empty database on the back end of ``request.param``."""
    if request.param == "postgresql":
        return request.getfixturevalue("pg").database()
    return tmp_path_factory.mktemp(name) / "c.sqlite3"


@pytest.fixture(scope="module", params=BACKENDS)
def db(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path | str:
    path = new_db(request, tmp_path_factory, "cli")
    st = store.Store(path)
    dumps = [make_dump("null_deref.txt", src="192.0.2.2"),
             make_dump("null_deref_panic.txt", src="2001:db8::3"),
             make_dump("soft_lockup.txt", lose=(1, 2, 4)),
             make_dump("soft_dump.txt", soft=True)]
    reports = [report(d) for d in dumps[:3]] + [report(dumps[3], signature=None)]
    st.save([(d, r, None) for d, r in zip(dumps, reports)],
            {"packets": 42, "duplicates": 20, "rejected_version": 2, "dumps_complete": 3,
             "dumps_partial": 1, "partial_shutdown": 1})
    st.close()
    return path


def test_list(db: Path):
    res = cli("--db", db, "list")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].split()[:4] == ["ID", "RECEIVED", "(UTC)", "HOST"]
    assert len(lines) == 5
    assert "BUG: kernel NULL pointer dereference in nto_crash_null_deref" in lines[1]
    assert "2001:db8::3" in lines[2] and " panic " in lines[2]
    assert " 3/6 " in lines[3]                       # partial: 3 of 6 chunks
    assert "soft dump" in lines[4]


def test_list_json_and_db_after_the_command(db: Path):
    res = cli("list", "--db", db, "--json")
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)
    assert [r["id"] for r in rows] == [1, 2, 3, 4]
    assert [r["kind"] for r in rows] == ["oops", "panic", "panic", "soft"]
    assert [r["complete"] for r in rows] == [True, True, False, True]
    assert rows[0]["received"].endswith("Z") and isinstance(rows[0]["received_unix"], float)
    assert rows[0]["kernel_version"] == "6.1.0-netoops"
    assert rows[0]["signature"] == rows[1]["signature"]
    res = cli("--db", db, "list", "--limit", "2", "--json")
    assert [r["id"] for r in json.loads(res.stdout)] == [3, 4]


def test_show(db: Path):
    res = cli("--db", db, "show", "3")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "title      BUG: soft lockup" in out
    assert "NO: 3 of 6 chunks missing (packet_no 1-2,4; 0 is the newest)" in out
    assert "rip ffffffffc0005009" in out and "orig_rax ffffffffffffffff" in out
    assert "--- netoops: chunks of 6 missing here ---" in out
    assert out.rstrip().endswith(
        "---[ end Kernel panic - not syncing: softlockup: hung tasks ]---")
    res = cli("--db", db, "show", "1")
    assert "taint      GO (out-of-tree module)" in res.stdout
    assert "  ? __die+0x1f/0x70\n" in res.stdout          # the frames, rebuilt
    assert "signature  none (no crash text" in cli("--db", db, "show", "4").stdout


def test_show_json(db: Path):
    res = cli("--db", db, "show", "1", "--json")
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)
    assert d["id"] == 1 and d["kind"] == "oops" and d["complete"] is True
    assert d["registers"]["rsp"] == "0xffffc900001e7c70"
    assert d["signature_frames"][0] == "nto_crash_null_deref"
    assert d["modules"][0] == {"name": "nto_crash", "flags": "O+"}
    assert d["log"].startswith("[    0.000000] Linux version")
    assert d["missing"] == [] and d["frames"][0]["text"] == "? __die+0x1f/0x70"
    d = json.loads(cli("--db", db, "show", "3", "--json").stdout)
    assert d["missing"] == [[1, 2], [4, 4]] and d["complete"] is False
    assert json.loads(cli("--db", db, "show", "4", "--json").stdout)["signature"] is None


def test_groups(db: Path):
    res = cli("--db", db, "groups")
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[0].endswith(
        "2 dumps, 2 boots, 2 hosts: BUG: kernel NULL pointer dereference in "
        "nto_crash_null_deref")
    assert res.stdout.splitlines()[-1].startswith("1 dump without crash text")
    groups = json.loads(cli("--db", db, "groups", "--json").stdout)
    assert [g["dumps"] for g in groups] == [2, 1]
    assert 4 not in [i for g in groups for i in g["ids"]]
    assert groups[0]["hosts"] == ["192.0.2.2", "2001:db8::3"]
    assert groups[0]["first_seen"].endswith("Z")


def test_stats(db: Path):
    res = cli("--db", db, "stats")
    assert res.returncode == 0, res.stderr
    assert "packets received     42" in res.stdout
    assert "rejected           2 (version 2)" in res.stdout
    st = json.loads(cli("--db", db, "stats", "--json").stdout)
    assert st["counters"]["duplicates"] == 20
    assert st["stored"] == {"dumps": 4, "complete": 3, "partial": 1, "signatures": 2,
                            "no_crash_text": 1}
    assert "2 signatures, 1 without crash text" in res.stdout


def test_bad_id(db: Path):
    res = cli("--db", db, "show", "99")
    assert res.returncode == 1
    assert "no dump with id 99" in res.stderr and res.stdout == ""


@pytest.mark.parametrize("args", [
    ["show", "abc"], ["show"], ["bogus"], [], ["list", "--limit", "0"],
    ["serve", "--listen", "nonsense"], ["serve", "--listen", "1.2.3.4:99999"],
    ["serve", "--quiet-timeout", "-1"], ["list", "--frobnicate"],
])
def test_bad_arguments(args: list[str], tmp_path: Path):
    res = cli("--db", tmp_path / "x.sqlite3", *args)
    assert res.returncode == 2, res.stderr
    assert "usage:" in res.stderr
    assert not (tmp_path / "x.sqlite3").exists()


@pytest.mark.parametrize("command", [["list"], ["show", "1"], ["groups"], ["stats"],
                                     ["list", "--json"]])
def test_missing_database_is_an_error_and_is_not_created(command: list[str], tmp_path: Path):
    path = tmp_path / "sub" / "c.sqlite3"
    res = cli("--db", path, *command)
    assert res.returncode == 3
    assert "no such database" in res.stderr and str(path) in res.stderr
    assert not path.exists() and not path.parent.exists()


def test_default_database_location_is_used_and_not_created(tmp_path: Path):
    res = cli("list", env=cli_env(XDG_DATA_HOME=str(tmp_path)))
    assert res.returncode == 3
    assert str(tmp_path / "netoops" / "collector.sqlite3") in res.stderr
    assert list(tmp_path.iterdir()) == []


def test_unreadable_or_foreign_database(tmp_path: Path):
    junk = tmp_path / "junk.sqlite3"
    junk.write_bytes(os.urandom(4096))
    res = cli("--db", junk, "list")
    assert res.returncode == 3 and "not a netoops collector database" in res.stderr
    res = cli("--db", tmp_path, "stats")
    assert res.returncode == 3 and "not a database file" in res.stderr


def test_permission_denied(tmp_path: Path):
    db = tmp_path / "c.sqlite3"         # file permissions: SQLite's
    store.Store(db).close()
    # Root reads any file, so as root the CLI runs as nobody (setpriv).
    top = Path(tempfile.mkdtemp(prefix="netoops-perm-"))
    try:
        top.chmod(0o755)
        locked = top / "locked.sqlite3"
        locked.write_bytes(db.read_bytes())
        locked.chmod(0)
        argv = [PYTHON, "-m", "netoops_collector", "--db", str(locked), "list"]
        if os.geteuid() == 0:
            argv = ["setpriv", "--reuid=65534", "--regid=65534",
                    "--clear-groups"] + argv
        res = subprocess.run(argv, capture_output=True, text=True,
                             env=cli_env(), timeout=30)
    finally:
        shutil.rmtree(top)
    assert res.returncode == 3 and "not readable" in res.stderr


# -- text that came in a datagram never reaches the terminal raw -----------------
KERNEL = "6.1\x1b[31m-red\r\nfake"
BLOB = "blob\x1b]0;pwned\x07\x9b2J"
TITLE = "BUG: \x1b[31mred\rover\nsecond line"
LOG_TAIL = "\x1b[2J\r\tTAB\x7fDEL\x85NEL\n"
RAW = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")      # any control but a newline


@pytest.fixture(scope="module", params=BACKENDS)
def hostile_db(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
               ) -> Path | str:
    path = new_db(request, tmp_path_factory, "hostile")
    st = store.Store(path)
    dumps = [make_dump("null_deref.txt", src="192.0.2.66\x1b[0m", kernel_version=KERNEL,
                       user_blob=BLOB, boot_id=n,
                       log=(FIXTURES / "null_deref.txt").read_text() + LOG_TAIL)
             for n in (1, 2)]
    st.save([(d, report(d, title=TITLE, comm="sh\x1b[5m", guilty="g\x9bx",
                        modules=[("evil\x1b[0m", "O\x07")]), None) for d in dumps])
    st.close()
    return path


def test_escape():
    from netoops_collector.views import escape
    assert escape("a\x1b[1m\n\t\r\x00\x7f\x80\x9f\xa0\\x1b é") == \
        "a\\x1b[1m\n\\x09\\x0d\\x00\\x7f\\x80\\x9f\xa0\\x1b é"
    assert escape("a\nb\tc", keep="") == "a\\x0ab\\x09c"
    assert escape("a\nb\tc", keep="\n\t") == "a\nb\tc"


def test_list_escapes_control_characters(hostile_db: Path):
    out = cli("--db", hostile_db, "list").stdout
    assert not RAW.search(out)
    assert len(out.splitlines()) == 3                      # one row per dump
    assert "6.1\\x1b[31m-red\\x0d\\x0afake" in out
    assert "BUG: \\x1b[31mred\\x0dover\\x0asecond line" in out
    assert "192.0.2.66\\x1b[0m" in out
    rows = json.loads(cli("--db", hostile_db, "list", "--json").stdout)
    assert rows[0]["kernel_version"] == KERNEL and rows[0]["title"] == TITLE


def test_show_escapes_control_characters(hostile_db: Path):
    out = cli("--db", hostile_db, "show", "1").stdout
    head, log = out.split("\nlog:\n")
    assert not RAW.search(head)
    assert not RAW.search(log.replace("\t", ""))         # the log keeps its tabs
    assert "title      BUG: \\x1b[31mred\\x0dover\\x0asecond line\n" in head
    assert "kernel     6.1\\x1b[31m-red\\x0d\\x0afake\n" in head
    assert "user blob  'blob\\x1b]0;pwned\\x07\\x9b2J'\n" in head
    assert "culprit    g\\x9bx\n" in head and "comm       sh\\x1b[5m\n" in head
    assert "modules    evil\\x1b[0m(O\\x07)\n" in head
    assert log.endswith("\\x1b[2J\\x0d\tTAB\\x7fDEL\\x85NEL\n")
    d = json.loads(cli("--db", hostile_db, "show", "1", "--json").stdout)
    assert d["log"].endswith(LOG_TAIL) and d["user_blob"] == BLOB


def test_groups_escapes_control_characters(hostile_db: Path):
    out = cli("--db", hostile_db, "groups").stdout
    assert not RAW.search(out)
    lines = out.splitlines()
    assert len(lines) == 5
    assert lines[0].endswith(": BUG: \\x1b[31mred\\x0dover\\x0asecond line")
    assert lines[2] == "    kernels: 6.1\\x1b[31m-red\\x0d\\x0afake"
    assert lines[3] == "    hosts:   192.0.2.66\\x1b[0m"
    assert json.loads(cli("--db", hostile_db, "groups", "--json").stdout)[0]["title"] == TITLE


def test_a_version_1_database_is_refused_until_serve_upgrades_it(tmp_path: Path):
    path = tmp_path / "v1.sqlite3"
    conn = sqlite3.connect(path)
    conn.executescript((FIXTURES / "schema_v1.sql").read_text())
    conn.close()
    res = cli("--db", path, "list")
    assert res.returncode == 3
    assert "schema version 1 is older" in res.stderr and "serve` upgrades it" in res.stderr
    store.Store(path).close()                 # what serve does when it starts
    res = cli("--db", path, "list")
    assert res.returncode == 0 and len(res.stdout.splitlines()) == 6
