# SPDX-License-Identifier: GPL-2.0
"""`list` filters, `export` as JSON lines, the format version, NETOOPS_DB."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from collector_util import cli, cli_env
from netoops_collector import store, views
from netoops_collector.query import QueryError, parse_time
from test_store import make_dump, report

T0 = 1_780_000_000.0            # 2026-05-28T20:26:40Z
SIG_A = "aaaa1111" + "0" * 32
SIG_B = "aaaa2222" + "0" * 32
SIG_C = "cccc3333" + "0" * 32


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Five dumps an hour apart; 1, 2 and 5 of signature A, 3 of B, 4 of C
    (partial); 5 on another host and kernel."""
    path = tmp_path_factory.mktemp("query") / "q.sqlite3"
    st = store.Store(path)
    specs = [("null_deref.txt", SIG_A, {}), ("null_deref_panic.txt", SIG_A, {}),
             ("soft_lockup.txt", SIG_B, {}), ("soft_lockup.txt", SIG_C, {"lose": (1, 2)}),
             ("null_deref.txt", SIG_A, {"src": "192.0.2.9", "kernel_version": "6.1.0-other"})]
    items = []
    for i, (name, sig, kw) in enumerate(specs):
        t = T0 + 3600 * i
        d = make_dump(name, finalised=t, first_packet=t - 1, **kw)
        items.append((d, report(d, signature=sig), None))
    st.save(items, {})
    st.close()
    return path


def ids(db: Path, *args: str) -> list[int]:
    res = cli("--db", db, "list", "--json", *args)
    assert res.returncode == 0, res.stderr
    return [r["id"] for r in json.loads(res.stdout)]


@pytest.mark.parametrize("args, want", [
    ((), [1, 2, 3, 4, 5]),
    (("--since", "2026-05-28T21:26:40Z"), [2, 3, 4, 5]),
    (("--since", "2026-05-28T23:26:40+02:00"), [2, 3, 4, 5]),
    (("--until", "2026-05-28T22:26:40"), [1, 2]),           # no zone: UTC
    (("--since", "2026-05-28"), [1, 2, 3, 4, 5]),
    (("--host", "192.0.2.9"), [5]),
    (("--kernel", "6.1.0-netoops"), [1, 2, 3, 4]),
    (("--signature", "aaaa1"), [1, 2, 5]),
    (("--signature", "AAAA2222"), [3]),
    (("--title", "NULL POINTER"), [1, 2, 5]),
    (("--title", "%"), []),                                 # no LIKE wildcards
    (("--partial",), [4]),
    (("--complete", "--host", "192.0.2.2", "--limit", "2"), [2, 3]),
    (("--signature", "cccc", "--complete"), []),
])
def test_list_filters(db: Path, args: tuple[str, ...], want: list[int]):
    assert ids(db, *args) == want


def test_relative_times_count_back_from_now(db: Path):
    assert ids(db, "--since", "1h") == []
    assert ids(db, "--until", "1h") == [1, 2, 3, 4, 5]
    assert parse_time("90s", now=1000.0) == 910.0
    assert parse_time("2w", now=2e6) == 2e6 - 14 * 86400
    assert parse_time("1.5h", now=10_000.0) == 10_000.0 - 5400


@pytest.mark.parametrize("args, message", [
    (("--since", "yesterday"), "not a time: 'yesterday'"),
    (("--until", "5x"), "not a time: '5x'"),
    (("--signature", "aaaa"), "signature prefix 'aaaa' is ambiguous"),
    (("--signature", "dddd"), "no signature starts with 'dddd'"),
    (("--signature", "zz"), "not a signature prefix: 'zz'"),
    (("--complete", "--partial"), "not allowed with argument"),
])
def test_bad_filters_are_usage_errors(db: Path, args: tuple[str, ...], message: str):
    before = db.read_bytes()
    res = cli("--db", db, "list", *args)
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert message in res.stderr
    assert res.stdout == ""
    assert db.read_bytes() == before


def test_export_is_one_dump_per_line_with_log_and_frames(db: Path):
    res = cli("--db", db, "export", "--signature", "aaaa1")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert len(lines) == 3
    dumps = [json.loads(line) for line in lines]
    assert [d["id"] for d in dumps] == [1, 2, 5]
    for d in dumps:
        assert d["format"] == views.FORMAT
        assert d["signature"] == SIG_A
        assert "BUG: kernel NULL pointer dereference" in d["log"]
        assert d["frames"] and d["frames"][0]["text"]
        assert d["received"].endswith("Z") and isinstance(d["received_unix"], float)
    # the same dump as `show --json` has it
    show = json.loads(cli("--db", db, "show", "2", "--json").stdout)
    assert dumps[1] == show
    assert cli("--db", db, "export", "--host", "198.51.100.1").stdout == ""


def test_every_json_output_carries_the_format_version(db: Path):
    for args in (("list",), ("show", "1"), ("groups",), ("stats",)):
        out = json.loads(cli("--db", db, *args, "--json").stdout)
        for obj in out if isinstance(out, list) else [out]:
            assert obj["format"] == views.FORMAT, args


def test_netoops_db_is_the_default_database(db: Path, tmp_path: Path):
    env = cli_env(NETOOPS_DB=str(db), XDG_DATA_HOME=str(tmp_path))
    res = cli("list", "--json", env=env)
    assert res.returncode == 0, res.stderr
    assert len(json.loads(res.stdout)) == 5
    # --db still wins
    res = cli("--db", tmp_path / "none.sqlite3", "list", env=env)
    assert res.returncode == 3
    assert not (tmp_path / "none.sqlite3").exists()


def test_help_states_the_exit_statuses():
    for args in ((), ("list",), ("export",)):
        out = cli(*args, "--help").stdout
        assert "exit status:" in out and "  2  bad arguments" in out, args


def test_parse_time_rejects_what_it_cannot_read():
    with pytest.raises(QueryError):
        parse_time("2026-13-01")
    assert abs(parse_time("0s") - time.time()) < 5
