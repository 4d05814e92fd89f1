# SPDX-License-Identifier: GPL-2.0
"""pytest hooks shared by every test in the repository.

Each test prints one line ``PASS|FAIL|SKIP <name>``; the run ends with the line
``N passed, N failed`` (and ``, N skipped`` when some were skipped).
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

_TOP = Path(__file__).resolve().parent
sys.path.insert(0, str(_TOP / "tests" / "lib"))
sys.path.insert(0, str(_TOP / "collector"))

# A run ended with SIGTERM unwinds like an exception, so every test's
# namespace, taps and guests are removed on the way out.
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

_counts = {"passed": 0, "failed": 0, "skipped": 0}
_seen: set[str] = set()


def _emit(word: str, nodeid: str) -> None:
    sys.stdout.write(f"\n{word} {nodeid}\n")
    sys.stdout.flush()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    nodeid = report.nodeid
    if report.when == "call" or (report.when == "setup" and not report.passed):
        if nodeid in _seen:
            return
        _seen.add(nodeid)
        if report.passed:
            _counts["passed"] += 1
            _emit("PASS", nodeid)
        elif report.skipped:
            _counts["skipped"] += 1
            _emit("SKIP", nodeid)
        else:
            _counts["failed"] += 1
            _emit("FAIL", nodeid)
    elif report.when == "teardown" and report.failed and nodeid not in _seen:
        _seen.add(nodeid)
        _counts["failed"] += 1
        _emit("FAIL", nodeid)


def pytest_unconfigure(config: pytest.Config) -> None:
    if getattr(config, "workerinput", None) is not None:
        return
    extra = int(config.getoption("--nto-extra-failed", default=0) or 0)
    failed = _counts["failed"] + extra
    line = f"{_counts['passed']} passed, {failed} failed"
    if _counts["skipped"]:
        line += f", {_counts['skipped']} skipped"
    sys.stdout.write("\n" + line + "\n")
    sys.stdout.flush()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--nto-extra-failed", default="0",
                     help="failures counted before pytest ran (the build)")
