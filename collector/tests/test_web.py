# SPDX-License-Identifier: GPL-2.0
"""The dashboard (`netoops-collector web`): every page, its JSON twin, the
filters, bad input, escaping, and the command serving it with waitress."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from conftest import BACKENDS
from collector_util import HOSTILE_KERNEL, PYTHON, cli, cli_env, cli_json, dashboard_db
from netoops_collector import plots, web


@pytest.fixture(scope="module", params=BACKENDS)
def db(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path | str:
    """Filled by `serve` on each back end."""
    if request.param == "postgresql":
        path: Path | str = request.getfixturevalue("pg").database()
    else:
        path = tmp_path_factory.mktemp("web") / "dash.sqlite3"
    dashboard_db(path)
    return path


def missing(db: Path | str) -> Path | str:
    """A database beside ``db`` that is not there."""
    if isinstance(db, Path):
        return db.with_name("missing.sqlite3")
    return re.sub(r"/\w+\?", "/missing?", db)


def get(app: web.App, path: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    path, _, query = path.partition("?")
    got: dict[str, Any] = {}

    def start(status: str, headers: list[tuple[str, str]]) -> None:
        got["status"], got["headers"] = int(status.split()[0]), dict(headers)

    body = b"".join(app({"REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": query},
                        start))
    return got["status"], got["headers"], body


def get_json(app: web.App, path: str) -> Any:
    status, headers, body = get(app, path)
    assert status == 200 and headers["Content-Type"] == "application/json", body
    return json.loads(body)


def test_groups_page_and_its_json_twin_agree_with_the_cli(db: Path):
    app = web.App(db)
    status, headers, body = get(app, "/")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert "script-src" not in headers["Content-Security-Policy"]      # none at all
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    page = get_json(app, "/groups.json")
    want = cli_json("--db", db, "groups")
    assert [(g["signature"], g["dumps"], g["hosts"], g["kernels"]) for g in page["groups"]] == \
        [(g["signature"], g["dumps"], g["hosts"], g["kernels"]) for g in want]
    html = body.decode()
    for g in page["groups"]:
        assert f'href="/group/{g["signature"]}"' in html
        assert sum(g["trend"]) == g["dumps"]
        assert g["new"]                 # all sent just now
    assert html.count("<svg") == len(page["groups"])
    assert "KASAN: null-ptr-deref Write in nto_crash_null_deref" in html
    assert page["ungrouped"] == 0 and b"<script" not in body
    assert "30 bars from" in html and "2 min each." in html        # an hour at least


@pytest.mark.parametrize("seconds,text", [(30, "30 s"), (120, "2 min"), (3600, "1 h"),
                                          (5400, "1.5 h"), (86400, "24 h"),
                                          (30 * 86400, "30 days")])
def test_a_bucket_width_reads_as_people_say_it(seconds: float, text: str):
    assert plots.span(seconds) == text


def test_filters_by_host_kernel_and_time(db: Path):
    app = web.App(db)
    for query, args in (("host=127.0.0.2", ["--host", "127.0.0.2"]),
                        ("kernel=6.1.0-29-amd64", ["--kernel", "6.1.0-29-amd64"])):
        page = get_json(app, f"/groups.json?{query}")
        listed = cli_json("--db", db, "list", *args)
        assert sum(g["dumps"] for g in page["groups"]) == len(listed) > 0
        assert page["filter"] == dict([query.split("=")])
        html = get(app, f"/?{query}")[2].decode()
        # the group links keep the filter
        assert f'?{query}"' in html
    assert get_json(app, "/groups.json?since=2099-01-01")["groups"] == []
    assert "No crash groups match" in get(app, "/?since=2099-01-01")[2].decode()
    new = get_json(app, "/groups.json?sort=new")["groups"]
    assert [g["first_seen"] for g in new] == sorted((g["first_seen"] for g in new), reverse=True)


def test_bad_input_is_refused_with_the_reason(db: Path):
    app = web.App(db)
    status, _, body = get(app, "/?since=yesterday-ish")
    assert status == 400 and b"not a time" in body
    status, headers, body = get(app, "/groups.json?sort=sideways")
    assert status == 400 and json.loads(body)["error"].startswith("not a sort order")
    assert get(app, "/?host=a&host=b")[0] == 400
    assert get(app, "/group/zzzz")[0] == 404
    assert get(app, "/group/" + "0" * 64)[0] == 404
    assert get(app, "/dump/99999")[0] == 404
    assert json.loads(get(app, "/dump/99999.json")[2])["status"] == 404
    assert get(app, "/etc/passwd")[0] == 404
    status, headers, _ = get(app, "/", method="POST")
    assert status == 405 and headers["Allow"] == "GET, HEAD"
    status, headers, body = get(app, "/", method="HEAD")
    assert status == 200 and body == b"" and int(headers["Content-Length"]) > 0
    status, _, body = get(web.App(missing(db)), "/")
    assert status == 503 and re.search(rb"no such database|does not exist", body)


def test_group_page_lists_its_dumps_and_plots_them_by_kernel(db: Path):
    app = web.App(db)
    groups = get_json(app, "/groups.json")["groups"]
    g = groups[0]
    page = get_json(app, f"/group/{g['signature']}.json")
    assert page["dump_count"] == g["dumps"] == len(page["dumps"])
    listed = cli_json("--db", db, "list", "--signature", g["signature"][:12])
    assert {d["id"] for d in page["dumps"]} == {d["id"] for d in listed}
    per_kernel = {k: sum(v) for k, v in page["by_kernel"].items()}
    assert sum(per_kernel.values()) == g["dumps"]
    assert per_kernel == {k: sum(1 for d in page["dumps"] if d["kernel_version"] == k)
                          for k in per_kernel}
    html = get(app, f"/group/{g['signature']}")[2].decode()
    assert "occurrences over time by kernel version" in html
    for d in page["dumps"]:
        assert f'href="/dump/{d["id"]}"' in html
    for k, n in per_kernel.items():
        assert f"{k} ({n})" in html.replace("&lt;", "<").replace("&gt;", ">")
    host = g["hosts"][0]
    mine = get_json(app, f"/group/{g['signature']}.json?host={host}")
    assert {d["source"] for d in mine["dumps"]} == {host}


def test_dump_page_is_the_show_report_and_the_raw_log(db: Path):
    app = web.App(db)
    rows = cli_json("--db", db, "list")
    partial = next(r for r in rows if not r["complete"])
    for row in (rows[0], partial):
        page = get_json(app, f"/dump/{row['id']}.json")
        assert page["report"] == cli("--db", db, "show", str(row["id"])).stdout
        assert page["dump"]["log"] == cli_json("--db", db, "show", str(row["id"]))["log"]
        status, headers, raw = get(app, f"/dump/{row['id']}/log")
        assert status == 200 and headers["Content-Type"].startswith("text/plain")
        assert raw.decode() == page["dump"]["log"]
        html = get(app, f"/dump/{row['id']}")[2].decode()
        assert f'href="/group/{page["dump"]["signature"]}"' in html
    html = get(app, f"/dump/{partial['id']}")[2].decode()
    assert "partial: chunks missing" in html and "missing" in page["report"]


def test_markup_from_the_wire_is_escaped_everywhere(db: Path):
    app = web.App(db)
    listed = cli_json("--db", db, "list", "--kernel", HOSTILE_KERNEL)
    assert listed
    sig = listed[0]["signature"]
    for path in ("/", f"/?kernel={HOSTILE_KERNEL}", f"/group/{sig}", f"/dump/{listed[0]['id']}"):
        body = get(app, path.replace("<", "%3C").replace(">", "%3E"))[2].decode()
        assert "<script" not in body, path
        assert "&lt;script&gt;" in body, path


def test_the_web_command_serves_until_sigterm(db: Path):
    proc = subprocess.Popen([PYTHON, "-m", "netoops_collector", "--db", str(db), "web",
                             "--listen", "127.0.0.1:0"], stderr=subprocess.PIPE, text=True,
                            env=cli_env())
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert "dashboard of" in line, line
        url = line.rsplit(" on ", 1)[1].strip()
        assert url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(url + "groups.json", timeout=10) as res:
            assert json.load(res)["groups"]
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(url + "dump/424242", timeout=10)
        assert err.value.code == 404
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    res = cli("--db", missing(db), "web", "--listen", "127.0.0.1:0")
    assert res.returncode == 3 and re.search("no such database|does not exist", res.stderr)
