# SPDX-License-Identifier: GPL-2.0
"""`serve --config FILE`: serve's options from a TOML file, the command line
over it, and bad files refused before anything is opened."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from collector_util import Serve, cli, fixture, packets
from test_serve import udp
from netoops_collector import cli as cli_mod
from netoops_collector import config


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_every_serve_option_can_be_a_key():
    ap = cli_mod.build_parser()
    serve = ap.parse_args(["serve"]).serve_parser
    names = set(config._options(serve))
    longs = {o[2:] for a in serve._actions for o in a.option_strings
             if o.startswith("--") and a.dest not in ("help", "config")}
    assert names == longs and "quiet-timeout" in names and "listen" in names


def test_the_file_sets_options_and_the_command_line_wins(tmp_path: Path):
    db = tmp_path / "from-config.sqlite3"
    cfg = write(tmp_path / "c.toml", f'''
db = "{db}"
listen = ["127.0.0.1:0"]
quiet_timeout = 0.3
receiver = "python"
log-interval = 60
''')
    srv = Serve(tmp_path / "ignored.sqlite3", "--config", str(cfg), listen=None,
                receiver="c")
    try:
        start = srv.wait_for("quiet timeout")
        # --db of the command line (Serve passes one) over the file's db;
        # the file's quiet timeout and listen address; --receiver c over
        # the file's python.
        assert f"database {tmp_path / 'ignored.sqlite3'};" in start
        assert "quiet timeout 0.3s" in start
        assert srv.addr.startswith("127.0.0.1:")
        assert "C receive thread" in srv.wait_for("listening on")
        udp(srv.port, packets(fixture("soft_lockup.txt"), copies=1)[1:])
        assert "missing packet_no 0; timeout" in srv.wait_for("PARTIAL", timeout=10)
    finally:
        assert srv.stop() == 0
    assert not db.exists()


@pytest.mark.parametrize("text, message", [
    ("quiet-timeout = 0", "quiet-timeout: must be positive: '0'"),
    ("quiet_timeout = 'soon'", "quiet_timeout: not a number: 'soon'"),
    ("receiver = 'rust'", "receiver: 'rust' is not one of auto, c, python"),
    ("log-journal = 'yes'", "log-journal: expected true or false, not 'yes'"),
    ("listen = ['nowhere']", "listen: "),
    ("no-such-option = 1", "no-such-option: no such serve option"),
    ("config = 'x.toml'", "config: no such serve option"),
    ("[serve]\nlisten = [':2004']", "serve: no such serve option"),
    ("quiet-timeout = {a = 1}", "quiet-timeout: expected a string or a number"),
    ("quiet-timeout = ", "not TOML"),
])
def test_a_bad_file_is_refused_before_anything_opens(tmp_path: Path, text: str, message: str):
    cfg = write(tmp_path / "bad.toml", text + "\n")
    db = tmp_path / "c.sqlite3"
    res = cli("--db", db, "serve", "--config", cfg, "--listen", "127.0.0.1:0",
              "--netconsole-listen", "off", timeout=10)
    assert res.returncode == 2, (res.returncode, res.stderr)
    assert f"{cfg}: " in res.stderr and message in res.stderr, res.stderr
    assert not db.exists()


def test_a_missing_file_is_a_usage_error(tmp_path: Path):
    res = cli("serve", "--config", tmp_path / "none.toml", timeout=10)
    assert res.returncode == 2
    assert "none.toml: No such file or directory" in res.stderr


def test_load_converts_like_the_command_line(tmp_path: Path):
    serve = cli_mod.build_parser().parse_args(["serve"]).serve_parser
    got = config.load(write(tmp_path / "c.toml", 'rcvbuf = 1048576\nlisten = ":2004"\n'
                                                 'log-journal = true\n'), serve)
    assert got == {"rcvbuf": 1048576, "listen": [":2004"], "log_journal": True}
    with pytest.raises(config.ConfigError):
        config.load(write(tmp_path / "d.toml", "rcvbuf = -1\n"), serve)
    assert isinstance(serve, argparse.ArgumentParser)


SHIPPED = Path(__file__).resolve().parents[2] / "deploy" / "collector.toml"


def test_the_shipped_file_names_every_option_at_its_default(tmp_path: Path):
    """deploy/collector.toml (/etc/netoops/collector.toml, which the unit
    reads): each serve option once, commented out, at its default where it
    has one; uncommented, the file loads."""
    ap = cli_mod.build_parser()
    serve = ap.parse_args(["serve"]).serve_parser
    keys = [line[1:].split(" = ", 1)[0] for line in SHIPPED.read_text().splitlines()
            if re.match(r"^#[a-z-]+ = ", line)]
    assert sorted(keys) == sorted(config._options(serve)), f"the keys of {SHIPPED}"
    assert config.load(SHIPPED, serve) == {}
    text = re.sub(r"^#([a-z-]+ = )", r"\1", SHIPPED.read_text(), flags=re.M)
    loaded = config.load(write(tmp_path / "all.toml", text), serve)
    assert len(loaded) == len(keys)
    for action in serve._actions:
        if action.default not in (None, argparse.SUPPRESS) and action.dest != "help":
            assert loaded[action.dest] == action.default, action.dest
