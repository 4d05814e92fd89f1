# SPDX-License-Identifier: GPL-2.0
"""Deployed as a fleet deploys it: a real Debian 12 machine (qemu/debian-vm.sh)
with the project's .debs installed by apt inside the image, Debian's kernel,
systemd and udev, netoops armed at boot by netoops.service from
/etc/default/netoops, and a sysrq crash reported to the collector on the host.

One boot serves every test here (a module fixture): the probe reports what
the machine looks like once it is up, then crashes it.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

import pytest

from collector_proc import Collector, query_json
from crashes import PANIC_REPORT
from debian_vm import DebianMachine, image_dir
from harness import ALLOW_SYSRQ_PANIC, GuestResult, Netns

# NETOOPS_BLOB the image's config sets, "host=%h rack=7 row=b role=test",
# with %h expanded by netoops-arm
BLOB = "host=netoops-vm rack=7 row=b role=test"


@dataclass
class Boot:
    result: GuestResult
    rows: list[dict[str, Any]]
    dump: dict[str, Any] | None
    armed_wall: float | None         # host seconds from QEMU start to "armed"


@pytest.fixture(scope="module")
def boot() -> Boot:
    with Netns() as ns:
        coll = Collector(ns, ns.tmp / "dumps.sqlite3")
        m = DebianMachine(ns, allow=ALLOW_SYSRQ_PANIC, nic="e1000").start()
        armed_wall = None
        if m.wait_for_result("netoops_active", timeout=m.timeout):
            armed_wall = time.monotonic() - m.started
        res = m.wait()
        rows = coll.wait_dumps(1, timeout=30)
        coll.stop()
        dump = query_json(coll.db, "show", str(rows[0]["id"])) if rows else None
    return Boot(res, rows, dump, armed_wall)


def test_boots_to_multi_user_with_netoops_armed_by_its_unit(boot: Boot):
    r = boot.result
    assert r.value("multi_user") == "active", r.excerpt()
    assert r.value("system_state") == "running", (r.values("failed_unit"), r.excerpt())
    assert r.value("netoops_enabled") == "enabled"      # by the package's postinst
    assert r.value("netoops_active") == "active"
    status = "\n".join(r.values("status"))
    assert re.search(r"netoops-arm: armed arm0: \S+ 192\.0\.2\.2:6665 -> "
                     r"192\.0\.2\.1:2004 via 02:6e:74:6f:00:01", status), status
    assert "1 of 1 targets armed" in status, status
    assert r.values("arm_status")[0].startswith("armed arm0: "), r.values("arm_status")
    assert set(r.value("loaded").split()) >= {"netoops", "netpoll_targets"}


def test_modprobe_resolves_to_the_dkms_modules(boot: Boot):
    r = boot.result
    rel = r.value("release")
    for m in ("netconsole", "netoops", "netpoll_targets"):
        assert r.value(f"path_{m}") == f"/lib/modules/{rel}/updates/dkms/{m}.ko", m
    assert r.value("version_netoops") == "1.1"
    assert r.value("mode") == "stock"


def test_modules_are_signed_with_the_fleet_key(boot: Boot):
    for m in ("netconsole", "netoops", "netpoll_targets"):
        assert boot.result.value(f"signer_{m}") == "netoops test fleet signing key", m


def test_the_kernel_upgrade_built_the_modules_for_the_new_kernel(boot: Boot):
    r = boot.result
    rel = r.value("release")
    old = (image_dir() / "old-release").read_text().strip()
    assert rel == (image_dir() / "release").read_text().strip()
    built = {line.split()[0]: line.split()[1:] for line in r.values("built")}
    for k in {old, rel}:
        assert sorted(built[k]) == ["netconsole.ko", "netoops.ko", "netpoll_targets.ko"], built
    dkms = r.values("dkms")
    for k in {old, rel}:
        assert any(f"netoops/1.1, {k}, x86_64: installed" in line for line in dkms), dkms


def test_the_collector_runs_as_its_own_service(boot: Boot):
    r = boot.result
    assert r.value("collector_active") == "active"
    user = r.value("collector_user")
    assert user and user != "root", user                 # DynamicUser
    assert "collector.sqlite3" in r.value("collector_db")
    # It reads /etc/netoops/collector.toml, where the image asked for a
    # metrics textfile (in $STATE_DIRECTORY, its database's directory too).
    assert re.fullmatch(r"netoops_collector_packets_total \d+",
                        r.value("collector_metric") or ""), r.values("collector_metric")


def test_sysrq_crash_is_reported_end_to_end(boot: Boot):
    r = boot.result
    r.assert_crashed()
    assert boot.rows and boot.dump, "no dump at the collector\n" + r.excerpt()
    assert len(boot.rows) == 1, boot.rows
    d = boot.dump
    assert boot.rows[0]["complete"] is True
    assert d["missing"] == []
    assert d["kind"] == "panic"
    assert d["title"] == "Kernel panic - not syncing: sysrq triggered crash"
    assert d["kernel_version"] == r.value("release")
    assert "Debian" in r.value("uname_v")
    assert d["user_blob"] == BLOB == r.value("blob")
    # the unit set the kernel's boot id (its first 32 bits)
    assert d["boot_id"] == int(r.value("boot_id")[:8], 16) == int(r.value("netoops_boot_id"))
    assert d["source"] == "192.0.2.2"
    # Through e1000, which lets go of sent skbs only in NAPI: more packets
    # than netoops's pool of 64 skbs, so the panic dump reaped them itself.
    # The late target's veth (armed by the probe) never lets go of what it
    # is given: it keeps what it took until the pool first ran dry, and is
    # skipped from then on.
    rep = [m.groupdict() for m in PANIC_REPORT.finditer(r.console)]
    assert len(rep) == 1, r.excerpt()
    rep = {k: int(v) for k, v in rep[0].items()}
    assert (rep["dropped"], rep["unfit"]) == (0, 0), rep
    assert rep["polls"] > 0 and rep["sent"] > 64 + 16, rep
    # sent = N + held and stalled = N - held, N packets to each target
    assert 16 <= (rep["sent"] - rep["stalled"]) // 2 <= 64 - 16, rep
    assert "sysrq triggered crash" in d["log"]
    assert r.value("release") in d["log"]


def test_time_from_power_on_to_armed(boot: Boot):
    """Measured, not a target: printed for the README's table."""
    us = int(boot.result.value("armed_us"))
    assert us > 0
    print(f"\narmed {us / 1e6:.1f} s after the kernel started"
          + (f", {boot.armed_wall:.1f} s after QEMU started (probe report)"
             if boot.armed_wall else ""))


def test_a_late_device_is_waited_for_and_a_missing_one_fails_the_unit_loudly(boot: Boot):
    r = boot.result
    log = "\n".join(r.values("late_log"))
    assert r.value("late_restart_rc") != "0"
    assert r.value("late_active") == "failed"
    assert "netoops-arm: waiting (up to 6 s) for vnto0" in log, log
    assert re.search(r"netoops-arm: armed arm1: vnto0 198\.51\.100\.2:6665 -> "
                     r"198\.51\.100\.1:2004", log), log
    assert "netoops-arm: ghost0 is not present after 6 s" in log, log
    assert "netoops-arm: NOT armed: '@198.51.100.2/ghost0,2004@198.51.100.1'" in log, log
    assert "netoops-arm: target '@2001:db8::2/enp0s3,2004@192.0.2.1': 2001:db8::2 and " \
        "192.0.2.1 are not of the same family" in log, log
    assert "netoops-arm: 2 of 4 targets armed" in log, log
    armed = [l.split(":")[0] for l in r.values("late_status") if l.startswith("armed ")]
    assert armed == ["armed arm0", "armed arm1"], r.values("late_status")
