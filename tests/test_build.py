# SPDX-License-Identifier: GPL-2.0
"""Build hygiene: checkpatch, sparse, the build cache, the git tree."""

from __future__ import annotations

import subprocess
from pathlib import Path

TOP = Path(__file__).resolve().parents[1]


def make(*targets: str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "-s", *targets], cwd=TOP,
                          capture_output=True, text=True)


def test_checkpatch_strict_clean():
    res = make("style")
    assert res.returncode == 0, res.stdout + res.stderr


def test_sparse_clean():
    res = make("sparse")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "sparse: clean" in res.stdout


def test_kernel_rebuild_with_nothing_changed_is_a_no_op():
    res = make("kernel")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "kernel up to date" in res.stdout, res.stdout


def test_kernel_tree_and_build_output_not_in_git():
    files = subprocess.run(["git", "ls-files"], cwd=TOP, capture_output=True,
                           text=True, check=True).stdout.split()
    bad = [f for f in files if f.endswith((".o", ".ko", ".cpio"))
           or f.startswith(".cache/") or "linux-source" in f]
    assert not bad
