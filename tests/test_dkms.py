# SPDX-License-Identifier: GPL-2.0
"""dkms.conf builds the three modules against Debian's linux-headers, in a
throwaway DKMS tree (build only: nothing is installed or loaded here), and
each module says which mode it was built for."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from harness import TOP, cache_dir
from test_harness import kernel_release

VERSION = re.search(r'^PACKAGE_VERSION="([^"]+)"', (TOP / "dkms.conf").read_text(),
                    re.M)[1]
MOK = [Path("/var/lib/dkms/mok.key"), Path("/var/lib/dkms/mok.pub")]


def modinfo(ko: Path, field: str) -> str:
    return subprocess.run(["modinfo", "-F", field, str(ko)], check=True,
                          capture_output=True, text=True).stdout.strip()


def test_dkms_builds_the_modules_against_debians_headers(tmp_path: Path):
    rel = kernel_release("stock")
    src = tmp_path / "src" / f"netoops-{VERSION}"
    src.mkdir(parents=True)
    shutil.copytree(TOP / "modules", src / "modules")
    shutil.copy(TOP / "dkms.conf", src)
    for d in ("tree", "inst"):
        (tmp_path / d).mkdir()
    # DKMS signs what it builds with the machine's MOK and makes one when
    # there is none: a key this test made, it removes.
    made = [m for m in MOK if not m.exists()]
    dkms = ["dkms", "--dkmstree", str(tmp_path / "tree"),
            "--sourcetree", str(tmp_path / "src"),
            "--installtree", str(tmp_path / "inst")]
    try:
        for step in (["add"], ["build", "-k", rel]):
            res = subprocess.run(dkms + step + ["-m", "netoops", "-v", VERSION],
                                 capture_output=True, text=True, timeout=600)
            assert res.returncode == 0, res.stdout + res.stderr
    finally:
        for m in made:
            m.unlink(missing_ok=True)
    built = tmp_path / "tree" / "netoops" / VERSION / rel / "x86_64" / "module"
    kos = sorted(p.name for p in built.glob("*.ko"))
    assert kos == ["netconsole.ko", "netoops.ko", "netpoll_targets.ko"]
    for ko in built.glob("*.ko"):
        assert modinfo(ko, "vermagic").split()[0] == rel
    assert modinfo(built / "netoops.ko", "netoops_mode") == "stock"
    # nothing went to the machine's module tree
    assert not (Path("/lib/modules") / rel / "updates" / "dkms").exists()


def test_each_build_says_its_mode():
    mods = cache_dir() / "mod"
    assert modinfo(mods / "debug" / "modules" / "netoops.ko", "netoops_mode") == "patched"
    assert modinfo(mods / "stock" / "modules" / "netoops.ko", "netoops_mode") == "stock"
