# SPDX-License-Identifier: GPL-2.0
"""Alerts: a hook command and a webhook (a local HTTP server) told of each
new crash signature; their failures are counted and never hold up
receiving."""

from __future__ import annotations

import http.server
import json
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from collector_util import PYTHON, Serve, cli, cli_json, fixture, packets
from test_serve import udp

HOOK = '''
import json, os, sys, time
d = json.load(sys.stdin)
with open(sys.argv[1], "a") as out:
    out.write(json.dumps({"env": os.environ.get("NETOOPS_EVENT"), "event": d["event"],
                          "id": d["id"], "title": d["title"], "format": d["format"],
                          "log": len(d["log"])}) + "\\n")
if len(sys.argv) > 2 and sys.argv[2] == "fail":
    sys.stderr.write("the pager is down\\n")
    sys.exit(3)
if len(sys.argv) > 2 and sys.argv[2] == "hang":
    time.sleep(60)
'''


class Webhook(http.server.BaseHTTPRequestHandler):
    status = 200
    got: list[dict[str, Any]] = []

    def do_POST(self) -> None:                          # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).got.append({"type": self.headers["Content-Type"],
                               "agent": self.headers["User-Agent"],
                               "body": json.loads(body)})
        self.send_response(type(self).status)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def webhook() -> Iterator[tuple[str, type[Webhook]]]:
    handler = type("Hook", (Webhook,), {"got": [], "status": 200})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/netoops", handler
    srv.shutdown()
    srv.server_close()


def hook_cmd(tmp_path: Path, *extra: str) -> tuple[str, Path]:
    script = tmp_path / "hook.py"
    script.write_text(HOOK)
    out = tmp_path / "hook.jsonl"
    return " ".join([PYTHON, str(script), str(out), *extra]), out


def lines(path: Path, n: int, timeout: float = 10) -> list[dict[str, Any]]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = [json.loads(l) for l in path.read_text().splitlines()] if path.exists() else []
        if len(got) >= n:
            return got
        time.sleep(0.05)
    raise AssertionError(f"{path}: fewer than {n} lines")


def send(srv: Serve, name: str, boot_id: int, n: int) -> None:
    udp(srv.port, packets(fixture(name), copies=1, boot_id=boot_id))
    srv.wait_for(f"dump {n} from")


def test_new_signatures_reach_the_hook_and_the_webhook(tmp_path: Path, webhook):
    url, handler = webhook
    cmd, out = hook_cmd(tmp_path)
    db = tmp_path / "c.sqlite3"
    srv = Serve(db, "--hook", cmd, "--webhook", url)
    try:
        send(srv, "null_deref.txt", 1, 1)
        send(srv, "null_deref.txt", 2, 2)           # the same signature: no alert
        send(srv, "soft_lockup.txt", 3, 3)
        got = lines(out, 2)
    finally:
        assert srv.stop() == 0
    assert [(g["env"], g["event"], g["id"]) for g in got] == \
        [("new_signature", "new_signature", 1), ("new_signature", "new_signature", 3)]
    assert got[0]["title"].startswith("BUG: kernel NULL pointer dereference")
    assert got[0]["format"] == 1 and got[0]["log"] > 100
    posts = handler.got
    assert [p["body"]["id"] for p in posts] == [1, 3]
    assert posts[0]["type"] == "application/json"
    assert posts[0]["agent"].startswith("netoops-collector/")
    assert posts[0]["body"] == cli_json("--db", db, "show", "1") | {"event": "new_signature"}
    c = cli_json("--db", db, "stats")["counters"]
    assert (c["hook_runs"], c["webhook_posts"]) == (2, 2)
    assert c.get("hook_failures", 0) == c.get("webhook_failures", 0) == 0
    # a signature the database holds is not new after a restart
    srv = Serve(db, "--hook", cmd, "--hook-every-dump")
    try:
        send(srv, "null_deref.txt", 4, 4)
        got = lines(out, 3)
    finally:
        assert srv.stop() == 0
    assert (got[2]["event"], got[2]["id"]) == ("dump", 4)


def test_failures_are_counted_and_never_hold_up_receiving(tmp_path: Path, webhook):
    url, handler = webhook
    handler.status = 500
    cmd, out = hook_cmd(tmp_path, "hang")
    db = tmp_path / "c.sqlite3"
    srv = Serve(db, "--hook", cmd, "--webhook", url, "--hook-timeout", "2",
                "--hook-every-dump")
    try:
        start = time.monotonic()
        send(srv, "null_deref.txt", 1, 1)
        lines(out, 1)                               # the hook is running: for 2 s
        send(srv, "soft_lockup.txt", 2, 2)          # stored while it runs
        assert time.monotonic() - start < 2
        assert "no exit within 2s (killed)" in srv.wait_for("hook failed", timeout=10)
        assert "webhook failed: HTTP 500" in srv.wait_for("webhook failed", timeout=10)
    finally:
        assert srv.stop() == 0
    c = cli_json("--db", db, "stats")["counters"]
    assert c["dumps_complete"] == 2
    assert c["hook_failures"] >= 1 and c["webhook_failures"] >= 1


def test_a_failing_hook_says_why(tmp_path: Path):
    cmd, out = hook_cmd(tmp_path, "fail")
    srv = Serve(tmp_path / "c.sqlite3", "--hook", cmd)
    try:
        send(srv, "null_deref.txt", 1, 1)
        line = srv.wait_for("hook failed", timeout=10)
    finally:
        assert srv.stop() == 0
    assert "hook failed: exit status 3: the pager is down" in line


@pytest.mark.parametrize("args, message", [
    (("--webhook", "ftp://example.org/x"), "not an http:// or https:// URL"),
    (("--hook-timeout", "0"), "must be positive"),
])
def test_bad_alert_options(tmp_path: Path, args: tuple[str, ...], message: str):
    res = cli("--db", tmp_path / "c.sqlite3", "serve", *args, timeout=10)
    assert res.returncode == 2 and message in res.stderr
    assert not (tmp_path / "c.sqlite3").exists()
