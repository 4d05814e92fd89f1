# SPDX-License-Identifier: GPL-2.0
"""`make -s all` with a line per build stage, for `make check` and `make demo`.

The build scripts announce each stage on a line of their own ("kernel.sh:
building debug kernel", "mkinitramfs: ...", "debian-vm.sh: mmdebstrap
..."); those lines are printed as they come, with the time since the build
started, and everything goes to the build log.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path
from typing import TextIO

STAGE = re.compile(r"^[\w.-]+(\.sh)?: ")


def run_make(top: Path, log: Path, out: TextIO = sys.stdout, target: str = "all") -> int:
    """Run ``make -s target`` in ``top``; its output to ``log``, its stage
    lines to ``out`` as ``[  12s] kernel.sh: ...``; make's exit status."""
    start = time.monotonic()
    print(f"building: make -s {target} (log: {log})", file=out, flush=True)
    with open(log, "w") as f:
        proc = subprocess.Popen(["make", "-s", target], cwd=top, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, errors="replace")
        assert proc.stdout is not None
        for line in proc.stdout:
            f.write(line)
            f.flush()
            if STAGE.match(line):
                print(f"  [{time.monotonic() - start:5.0f}s] {line.rstrip()}", file=out,
                      flush=True)
        return proc.wait()
