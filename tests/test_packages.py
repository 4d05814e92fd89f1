# SPDX-License-Identifier: GPL-2.0
"""The Debian packages `make deb` builds (qemu/deb.sh): lintian's verdict,
what each package holds, and one version everywhere."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from harness import TOP, cache_dir

OUT = cache_dir() / "deb" / "out"


def changelog_version() -> str:
    return subprocess.run(["dpkg-parsechangelog", "-S", "Version"], cwd=TOP, check=True,
                          capture_output=True, text=True).stdout.strip()


def deb(name: str) -> Path:
    found = sorted(OUT.glob(f"{name}_*_all.deb")) + sorted(OUT.glob(f"{name}_*_amd64.deb"))
    assert len(found) == 1, found
    return found[0]


def contents(path: Path) -> set[str]:
    out = subprocess.run(["dpkg-deb", "-c", str(path)], check=True,
                         capture_output=True, text=True).stdout
    return {line.split()[-1].lstrip(".") for line in out.splitlines()}


def field(path: Path, name: str) -> str:
    return subprocess.run(["dpkg-deb", "-f", str(path), name], check=True,
                          capture_output=True, text=True).stdout.strip()


def test_one_version_everywhere():
    v = changelog_version()
    dkms = re.search(r'^PACKAGE_VERSION="([^"]+)"', (TOP / "dkms.conf").read_text(), re.M)
    header = re.search(r'#define NETOOPS_MODULE_VERSION "([^"]+)"',
                       (TOP / "modules/netoops_version.h").read_text())
    init = re.search(r'__version__ = "([^"]+)"',
                     (TOP / "collector/netoops_collector/__init__.py").read_text())
    pyproj = re.search(r'^version = "([^"]+)"', (TOP / "collector/pyproject.toml").read_text(),
                       re.M)
    assert {dkms[1], header[1], init[1], pyproj[1]} == {v}
    for m in ("netoops", "netconsole", "netpoll_targets"):
        assert "MODULE_VERSION(NETOOPS_MODULE_VERSION);" in (TOP / f"modules/{m}.c").read_text(), m


def test_lintian_is_clean():
    verdict = (OUT / "lintian.txt").read_text()
    tags = [l for l in verdict.splitlines() if re.match(r"^[EWIPX]: ", l)]
    assert tags == [], verdict


def test_netoops_dkms_holds_the_modules_the_unit_and_its_config():
    p = deb("netoops-dkms")
    v = changelog_version()
    files = contents(p)
    src = f"/usr/src/netoops-{v}"
    assert {f"{src}/dkms.conf", f"{src}/modules/Kbuild", f"{src}/modules/netoops.c",
            f"{src}/modules/netconsole.c", f"{src}/modules/netpoll_targets.c",
            f"{src}/modules/netoops_version.h", "/usr/sbin/netoops-arm",
            "/lib/systemd/system/netoops.service", "/etc/default/netoops",
            "/usr/share/man/man8/netoops-arm.8.gz"} <= files
    depends = field(p, "Depends")
    for dep in ("dkms", "linux-headers-amd64 | linux-headers", "openssl", "kmod", "iproute2"):
        assert dep in depends, depends
    conffiles = subprocess.run(["dpkg-deb", "-I", str(p), "conffiles"], check=True,
                               capture_output=True, text=True).stdout.split()
    assert conffiles == ["/etc/default/netoops"]


def test_netoops_collector_holds_the_command_and_its_unit():
    p = deb("netoops-collector")
    files = contents(p)
    assert {"/usr/bin/netoops-collector", "/lib/systemd/system/netoops-collector.service",
            "/etc/default/netoops-collector", "/etc/netoops/collector.toml",
            "/usr/lib/python3/dist-packages/netoops_collector/cli.py",
            "/usr/lib/python3/dist-packages/netoops_collector/symbolize.py",
            "/usr/lib/python3/dist-packages/netoops_collector/web.py",
            "/usr/lib/python3/dist-packages/netoops_collector/templates/groups.html",
            "/usr/lib/python3/dist-packages/netoops_collector/templates/style.css",
            "/usr/lib/x86_64-linux-gnu/wireshark/plugins/netoops.lua"} <= files
    assert "python3" in field(p, "Depends")
    recommends = set(re.findall(r"[\w.+-]+", field(p, "Recommends")))
    assert {"python3-jinja2", "python3-waitress"} <= recommends      # for `web`


@pytest.mark.parametrize("unit", ["netoops.service", "netoops-collector.service"])
def test_units_pass_systemd_analyze_verify(unit: str):
    # the binaries are not installed here: only that complaint is allowed
    res = subprocess.run(["systemd-analyze", "verify", "--man=no", str(TOP / "deploy" / unit)],
                         capture_output=True, text=True)
    noise = [l for l in res.stderr.splitlines()
             if not re.search(r"Command /usr/s?bin/netoops-\S+ is not executable", l)]
    assert noise == [], res.stderr


def test_collector_unit_is_hardened():
    """systemd-analyze security of the unit file as shipped: an exposure of
    at most 2.0 (the README states the figure)."""
    res = subprocess.run(["systemd-analyze", "security", "--offline=true", "--no-pager",
                          str(TOP / "deploy" / "netoops-collector.service")],
                         capture_output=True, text=True)
    m = re.search(r"Overall exposure level for netoops-collector.service: ([\d.]+)",
                  res.stdout)
    assert m, res.stdout + res.stderr
    assert float(m.group(1)) <= 2.0, res.stdout
