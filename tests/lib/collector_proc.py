# SPDX-License-Identifier: GPL-2.0
"""Run netoops-collector: `serve` inside a test namespace, queries on the host."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from harness import PYTHON, TOP, Netns

ENV = dict(os.environ, PYTHONPATH=str(TOP / "collector"))


def query(db: Path, *args: str) -> subprocess.CompletedProcess:
    """Run a query command (list, show, groups, stats) against ``db``."""
    return subprocess.run([PYTHON, "-m", "netoops_collector", *args,
                           "--db", str(db)], env=ENV, capture_output=True,
                          text=True)


def query_json(db: Path, *args: str) -> Any:
    res = query(db, *args, "--json")
    if res.returncode != 0:
        raise RuntimeError(f"netoops-collector {' '.join(args)}: "
                           f"{res.stderr.strip()}")
    return json.loads(res.stdout)


class Collector:
    """`netoops-collector serve` on UDP 2004 inside ``ns``."""

    def __init__(self, ns: Netns, db: Path, quiet_timeout: float = 5):
        self.ns = ns
        self.db = db
        self.log = ns.tmp / "collector.log"
        self._log = open(self.log, "w")
        self.proc = ns.spawn(
            ["ip", "netns", "exec", ns.name, "env",
             f"PYTHONPATH={TOP / 'collector'}", PYTHON, "-m",
             "netoops_collector", "serve", "--db", str(db),
             "--quiet-timeout", str(quiet_timeout)],
            stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while ":07D4" not in self._udp_table():      # port 2004 bound
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("collector did not start:\n"
                                   + self.log.read_text())
            time.sleep(0.1)

    def _udp_table(self) -> str:
        out = ""
        for table in ("udp", "udp6"):
            out += subprocess.run(["ip", "netns", "exec", self.ns.name, "cat",
                                   f"/proc/net/{table}"], capture_output=True,
                                  text=True).stdout
        return out

    def wait_dumps(self, count: int, timeout: float) -> list[dict[str, Any]]:
        """Poll `list --json` until ``count`` dumps are stored."""
        deadline = time.monotonic() + timeout
        rows: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            if self.db.exists():
                try:
                    rows = query_json(self.db, "list")
                except (RuntimeError, ValueError):
                    rows = []
                if len(rows) >= count:
                    return rows
            time.sleep(0.25)
        return rows

    def stop(self) -> int:
        """SIGTERM: the collector stores what is in flight, then exits."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.ns.kill(self.proc)
        self._log.close()
        return self.proc.returncode
