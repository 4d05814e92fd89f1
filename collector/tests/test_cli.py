# SPDX-License-Identifier: GPL-2.0
"""The query commands, run as `/usr/bin/python3 -m netoops_collector`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from collector_util import PYTHON, cli, cli_env
from netoops_collector import store
from test_store import make_dump, save


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "c.sqlite3"
    st = store.Store(path)
    save(st, make_dump("null_deref.txt", src="192.0.2.2"),
         make_dump("null_deref_panic.txt", src="2001:db8::3"),
         make_dump("gpf.txt", lose=(2,)),
         make_dump("soft_dump.txt", soft=True),
         stats={"packets": 42, "duplicates": 20, "rejected_version": 2, "dumps_complete": 3,
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
    assert " 3/4 " in lines[3]                       # partial: 3 of 4 chunks
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
    assert "title      general protection fault in nto_crash_gpf" in out
    assert "NO: 1 of 4 chunks missing (packet_no 2; 0 is the newest)" in out
    assert "rip ffffffffc0005009" in out and "orig_rax ffffffffffffffff" in out
    assert "taint      GO (out-of-tree module)" in out
    assert "--- netoops: 1 chunk of 4 missing here (packet_no 2" in out
    assert out.rstrip().endswith("---[ end Kernel panic - not syncing: Fatal exception ]---")


def test_show_json(db: Path):
    res = cli("--db", db, "show", "1", "--json")
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)
    assert d["id"] == 1 and d["kind"] == "oops" and d["complete"] is True
    assert d["registers"]["rsp"] == "0xffffc900001e7c70"
    assert d["signature_frames"][0] == "nto_crash_null_deref"
    assert d["modules"][0] == {"name": "nto_crash", "flags": "O+"}
    assert d["log"].startswith("[    0.000000] Linux version")


def test_groups(db: Path):
    res = cli("--db", db, "groups")
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[0].endswith(
        "2 dumps, 2 boots, 2 hosts: BUG: kernel NULL pointer dereference in "
        "nto_crash_null_deref")
    groups = json.loads(cli("--db", db, "groups", "--json").stdout)
    assert [g["dumps"] for g in groups] == [2, 1, 1]
    assert groups[0]["hosts"] == ["192.0.2.2", "2001:db8::3"]
    assert groups[0]["first_seen"].endswith("Z")


def test_stats(db: Path):
    res = cli("--db", db, "stats")
    assert res.returncode == 0, res.stderr
    assert "packets received     42" in res.stdout
    assert "rejected           2 (version 2)" in res.stdout
    st = json.loads(cli("--db", db, "stats", "--json").stdout)
    assert st["counters"]["duplicates"] == 20
    assert st["stored"] == {"dumps": 4, "complete": 3, "partial": 1, "signatures": 3}


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


def test_permission_denied(db: Path):
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
