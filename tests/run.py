# SPDX-License-Identifier: GPL-2.0
"""`make check`: build what the guests need, then run every test.

The build is reported as the first test (PASS/FAIL build); the run ends with
the line ``N passed, N failed`` and a non-zero exit status on any failure.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

TOP = Path(__file__).resolve().parents[1]
PYTHON = os.environ.get("PYTHON", "/usr/bin/python3")
sys.path.insert(0, str(TOP / "qemu"))
from build_progress import run_make  # noqa: E402


def build() -> bool:
    start = time.monotonic()
    log = TOP / ".build.log"
    rc = run_make(TOP, log)
    took = time.monotonic() - start
    if rc == 0:
        print(f"PASS build ({took:.0f}s)", flush=True)
        return True
    print(f"FAIL build (make all exited {rc}); last lines of {log}:", flush=True)
    print("".join(log.read_text().splitlines(True)[-40:]), flush=True)
    return False


def main() -> int:
    built = build()
    argv = [PYTHON, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfE",
            "--tb=short", "--durations=15", f"--nto-extra-failed={0 if built else 1}",
            "collector/tests", "tests"] + sys.argv[1:]
    rc = subprocess.call(argv, cwd=TOP)
    if rc == 5:           # pytest collected nothing: that is a failure here
        print("0 passed, 1 failed")
        return 1
    return 1 if (rc != 0 or not built) else 0


if __name__ == "__main__":
    sys.exit(main())
