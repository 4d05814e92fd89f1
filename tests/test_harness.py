# SPDX-License-Identifier: GPL-2.0
"""The foundation: guests boot, report, hang, oops and clean up as expected."""

from __future__ import annotations

import os
import secrets
import subprocess

import pytest

from harness import (HOST_MAC, Guest, Netns, cache_dir, flavour, leftovers,
                     run_guest)


def kernel_release(kernel: str | None = None) -> str:
    kernel = kernel or flavour()
    if kernel == "stock":
        return (cache_dir() / "stock" / "release").read_text().strip()
    rel = cache_dir() / "out" / kernel / "include/config/kernel.release"
    return rel.read_text().strip()


def test_guest_boots_and_reports():
    with Netns() as ns:
        res = run_guest("boot", ns, timeout=120)
    res.assert_ok()
    assert res.value("uname") == kernel_release()
    assert res.value("ncpu") == "2"
    assert "nto_crash.ko" in res.value("modules")
    assert res.values("done") == [""]


def test_intree_netconsole_reaches_host():
    token = secrets.token_hex(8)
    with Netns() as ns:
        listener = ns.udp_listener(6666)
        res = run_guest("smoke_netconsole", ns, timeout=120,
                        args={"hostmac": HOST_MAC, "msg": token})
        payloads = listener.wait(1, timeout=5)
    res.assert_ok()
    texts = [p.decode(errors="replace") for _, p in payloads]
    assert any(f"nto-smoke: {token}" in t for t in texts), texts[-5:]
    src = {s.split(":")[0] for s, _ in payloads}
    assert src == {"192.0.2.2"}, src


def test_hanging_guest_is_reported_within_timeout():
    # /init runs 10-15 s into the boot under TCG
    res = run_guest("hang", timeout=32)
    assert res.status == "hang"
    assert res.values("hanging") == [""], "the script never started"
    assert res.duration < 32 + 10
    assert not res.ok()


def test_unexpected_oops_fails_with_console_excerpt():
    res = run_guest("crash", timeout=120, args={"mode": "null"})
    # The oops kills insmod, the script goes on and exits 0: only the
    # console scan can catch it.
    assert res.values("crashing") == ["null"]
    assert any("BUG: kernel NULL pointer dereference" in s for s in res.splats)
    with pytest.raises(AssertionError) as err:
        res.assert_ok()
    msg = str(err.value)
    assert "unexpected splat" in msg
    assert "nto_crash_null_deref" in msg      # the excerpt shows the trace


def test_harness_leaves_nothing_behind():
    before = leftovers()
    pids = []
    with pytest.raises(RuntimeError):
        with Netns() as ns:
            name = ns.name
            ns.udp_listener(2004)
            g = Guest(ns, "hang", timeout=300).start()
            pids = [p.pid for p in ns.procs]
            assert g.wait_for_result("hanging", timeout=90), "guest never ran"
            raise RuntimeError("test failed half way")
    after = leftovers()
    assert name not in after["netns"]
    assert after == before
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}"), f"process {pid} left behind"
    out = subprocess.run(["ip", "netns", "list"], capture_output=True,
                         text=True).stdout
    assert name not in out


def test_guest_dying_before_init_is_booted_once_more():
    # No /init to run: the kernel panics before the test script starts, and
    # the harness boots the guest a second time before reporting the crash.
    g = Guest(None, "boot", timeout=120, cmdline="rdinit=/nonexistent",
              allow=[r"Kernel panic - not syncing: VFS: Unable to mount root fs",
                     r"Call Trace:", r"---\[ end Kernel panic"])
    res = g.run()
    assert g.retried
    assert res.status == "crash" and not res.splats, res.excerpt()
    assert "Unable to mount root fs" in res.console
    # its own directory (console, result files) is gone once it is done
    if os.environ.get("NTO_KEEP_TMP") is None:
        assert not g.console_path.parent.exists()
