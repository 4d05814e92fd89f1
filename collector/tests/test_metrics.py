# SPDX-License-Identifier: GPL-2.0
"""Prometheus metrics of serve: scraped over HTTP and read from the textfile
with the Prometheus client library's own parser."""

from __future__ import annotations

import socket
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from collector_util import Serve, cli, fixture, packets
from test_serve import udp

P = "netoops_collector_"


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample, by name and sorted labels; the parser refuses bad text."""
    out = {}
    for fam in text_string_to_metric_families(text):
        assert fam.documentation, fam.name
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(url, timeout=5) as resp:
        assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return samples(resp.read().decode())


def test_scraped_metrics_follow_what_serve_receives(tmp_path: Path):
    textfile = tmp_path / "netoops.prom"
    srv = Serve(tmp_path / "c.sqlite3", "--metrics", "127.0.0.1:0",
                "--metrics-textfile", str(textfile))
    try:
        url = srv.wait_for("metrics on http://").split("metrics on ", 1)[1]
        assert url.startswith("http://127.0.0.1:") and url.endswith("/metrics")
        first = scrape(url)
        assert first[(P + "packets_total", ())] == 0
        assert first[(P + "dumps_total", (("state", "complete"),))] == 0
        pkts = packets(fixture("null_deref.txt"), copies=1, boot_id=1)
        udp(srv.port, pkts + [b"NOPE" * 20])
        srv.wait_for("dump 1 from")
        end = time.monotonic() + 10
        while True:
            got = scrape(url)
            if got[(P + "packets_total", ())] >= len(pkts) + 1 or time.monotonic() > end:
                break
            time.sleep(0.2)
        assert got[(P + "packets_total", ())] == len(pkts) + 1
        assert got[(P + "dumps_total", (("state", "complete"),))] == 1
        assert got[(P + "dumps_total", (("state", "partial"),))] == 0
        rejected = {dict(k[1])["reason"]: v for k, v in got.items()
                    if k[0] == P + "rejected_total"}
        assert sum(rejected.values()) == 1, rejected
        assert (P + "storage_lag_seconds", ()) in got
        assert got[(P + "dumps_in_flight", ())] == 0
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(url.replace("/metrics", "/other"), timeout=5)
        assert err.value.code == 404
    finally:
        assert srv.stop() == 0
    # the textfile, written at exit: the same counts
    final = samples(textfile.read_text())
    assert final[(P + "packets_total", ())] == len(pkts) + 1
    assert final[(P + "dumps_total", (("state", "complete"),))] == 1
    assert not list(tmp_path.glob(".netoops.prom.*"))


def test_bad_metrics_address(tmp_path: Path):
    res = cli("--db", tmp_path / "c.sqlite3", "serve", "--metrics", "9100", timeout=10)
    assert res.returncode == 2 and "not HOST:PORT" in res.stderr
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    try:
        res = cli("--db", tmp_path / "c.sqlite3", "serve", "--listen", "127.0.0.1:0",
                  "--netconsole-listen", "off",
                  "--metrics", f"127.0.0.1:{port}", timeout=20)
    finally:
        busy.close()
    assert res.returncode == 4, res.stderr
    assert f"metrics on 127.0.0.1:{port}: Address already in use" in res.stderr
