# SPDX-License-Identifier: GPL-2.0
"""netoops.ko in a guest: panic, oops and soft dumps arrive on the host."""

from __future__ import annotations

from harness import ALLOW_SYSRQ_PANIC, HOST_MAC, Netns, run_guest
from dumps import console_rip, group
from netoops_collector import proto
from netoops_collector.report import strip_levels
from test_harness import kernel_release

BLOB = "fleet-a/rack-7"
BOOT_ID = 0xC0FFEE

# The intended NULL write in nto_crash: KASAN reports it, then the oops.
ALLOW_OOPS = [r"BUG: KASAN: null-ptr-deref in nto_crash_null_deref",
              r"BUG: kernel NULL pointer dereference", r"Oops: ",
              r"Call Trace:", r"---\[ end trace"]


def crash_guest(how: str, allow: list[str]):
    with Netns() as ns:
        listener = ns.udp_listener(proto.PORT)
        res = run_guest("netoops_crash", ns, timeout=180, allow=allow,
                        args={"hostmac": HOST_MAC, "how": how,
                              "bootid": str(BOOT_ID), "blob": BLOB})
        payloads = listener.wait(10**6, timeout=3)
    return res, group([p for _, p in payloads])


def check_header(dump) -> None:
    dump.assert_complete()
    assert proto.cstring(dump.same("kernel_version")) == kernel_release()
    assert dump.same("boot_id") == BOOT_ID
    assert proto.cstring(dump.same("user_blob")) == BLOB


def test_sysrq_crash_sends_complete_panic_dump():
    res, dumps = crash_guest("sysrq", ALLOW_SYSRQ_PANIC)
    res.assert_crashed()
    assert res.values("ready") == [""]
    assert len(dumps) == 1, [d.dump_id for d in dumps]
    dump = dumps[0]
    check_header(dump)
    assert dump.same("type") == proto.TYPE_OOPS
    text = dump.text().decode(errors="replace")
    tail = text[text.rindex("sysrq: Trigger a crash"):]
    assert "Kernel panic - not syncing: sysrq triggered crash" in tail
    # The dump is the kernel's own log: its last line is on the console too.
    assert strip_levels(text).splitlines()[-1].strip() in res.console
    # A plain panic has no fault: the registers are all zero, never those
    # of netoops itself.
    assert all(v == 0 for p in dump.packets for v in p.regs)


def test_oops_in_process_context_sends_oops_registers():
    res, dumps = crash_guest("null", ALLOW_OOPS)
    res.assert_ok()                      # the machine survives the oops
    assert res.values("alive") == [""]
    assert len(dumps) == 1
    dump = dumps[0]
    check_header(dump)
    assert dump.same("type") == proto.TYPE_OOPS
    text = dump.text().decode(errors="replace")
    assert "BUG: kernel NULL pointer dereference" in text
    assert dump.packets[0].registers["rip"] == \
        console_rip(res.console, "nto_crash_null_deref")


def test_oops_in_timer_panics_with_the_same_registers():
    allow = ALLOW_OOPS + [r"Kernel panic - not syncing: Fatal exception in interrupt",
                          r"---\[ end Kernel panic"]
    res, dumps = crash_guest("timer", allow)
    res.assert_crashed()
    # An oops in interrupt context always panics: netoops sends the panic's
    # dump only, and it carries the oops's registers.
    assert len(dumps) == 1, [d.dump_id for d in dumps]
    dump = dumps[0]
    check_header(dump)
    assert dump.packets[0].registers["rip"] == \
        console_rip(res.console, "nto_crash_null_deref")
    text = dump.text().decode(errors="replace")
    assert "BUG: kernel NULL pointer dereference" in text
    assert "Kernel panic - not syncing: Fatal exception in interrupt" in text


def test_soft_dumps_two_targets_and_a_down_interface():
    with Netns() as ns:
        first = ns.udp_listener(2004)
        second = ns.udp_listener(2005)
        res = run_guest("netoops_live", ns, timeout=240,
                        args={"hostmac": HOST_MAC})
        got = [group(l.payloads()) for l in (first, second)]
    res.assert_ok()
    assert res.values("alive") == [""]
    assert res.value("counters") == "2 0 0 0"     # sent skipped busy deferred
    loglen = int(res.value("loglen"))
    assert loglen % 1024 == 0, "the guest could not pad its log"
    for dumps in got:
        assert len(dumps) == 2, "two soft dumps per target"
        assert dumps[0].dump_id != dumps[1].dump_id
        for dump in dumps:
            dump.assert_complete()
            assert dump.same("type") == proto.TYPE_SOFT
            assert dump.same("boot_id") == 0xFEEDF00D
            assert proto.cstring(dump.same("user_blob")) == BLOB
        exact = min(dumps, key=lambda d: d.count)
        # A log of exactly N*1024 bytes is N full packets: no empty newest one.
        assert exact.count * 1024 == loglen
        newest = exact.chunk(0)
        assert b"\0" not in newest
        assert newest.endswith(b"sysrq: Trigger a soft dump\n")
    # Both targets got the same dumps.
    assert {d.dump_id for d in got[0]} == {d.dump_id for d in got[1]}
