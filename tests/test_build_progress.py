# SPDX-License-Identifier: GPL-2.0
"""make check's and make demo's build step: a line per stage as it comes,
with the time since the build started, and the whole output in the log."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "qemu"))
from build_progress import run_make  # noqa: E402


def test_stage_lines_are_printed_with_their_time(tmp_path: Path):
    (tmp_path / "Makefile").write_text(
        "all:\n"
        "\t@echo 'kernel.sh: building debug kernel (make -j2)'\n"
        "\t@echo '  CC      kernel/panic.o'\n"
        "\t@sleep 1\n"
        "\t@echo 'mkinitramfs: /cache/initramfs-debug.cpio (34 files)'\n"
        "fail:\n"
        "\t@echo 'stock.sh: downloading linux-image'\n"
        "\t@echo 'error: no network' >&2; exit 3\n")
    out = io.StringIO()
    log = tmp_path / "build.log"
    assert run_make(tmp_path, log, out) == 0
    lines = out.getvalue().splitlines()
    assert lines[0] == f"building: make -s all (log: {log})"
    assert re.fullmatch(r"  \[\s+0s\] kernel\.sh: building debug kernel \(make -j2\)", lines[1])
    assert re.fullmatch(r"  \[\s+1s\] mkinitramfs: /cache/initramfs-debug\.cpio \(34 files\)",
                        lines[2]), lines
    assert len(lines) == 3                      # compiler lines only in the log
    assert "  CC      kernel/panic.o" in log.read_text()
    out = io.StringIO()
    assert run_make(tmp_path, log, out, target="fail") != 0
    assert "stock.sh: downloading linux-image" in out.getvalue()
    assert "error: no network" in log.read_text()
