# SPDX-License-Identifier: GPL-2.0
"""netoops on Debian's own, unpatched 6.1 kernel.

The guests boot the vmlinuz of Debian's linux-image package with the
package's own virtio, e1000, e1000e, vmxnet3, configfs, veth, bridge, 8021q
and macvlan modules
(qemu/stock.sh), and our modules built against the matching linux-headers
package.  The crashes are spread over the three NICs, with logs of 256 KiB
(log_buf_len=1M: Debian's buffer is 128 KiB).  There netoops
takes the registers of an oops from the die notifier and registers sysrq y
itself.
"""

from __future__ import annotations

from crashes import (ALLOW_OOPS, ALLOW_PANIC, ALLOW_RX_OOPS, check_header,
                     check_nmi_in_flight, crash, inject_nmi_in_flight, send_rx_crash,
                     start_traffic, zero_registers)
from dumps import console_regs, console_rip, group
from harness import HOST_MAC, Netns, run_guest
from netoops_collector import proto
from test_harness import kernel_release

STOCK = "stock"
ALLOW_SYSRQ = ALLOW_PANIC + [r"Kernel panic - not syncing: sysrq triggered crash"]


def text_of(dump) -> str:
    return dump.text(allow_missing=True).decode(errors="replace")


def test_stock_nmi_panic_while_a_soft_dump_is_in_flight():
    """Debian's kernel on e1000 and e1000e, an NMI panic while CPU 0 sends a
    soft dump through both: the panic's whole dump, every chunk three times
    (before netoops reaped its own completions, only chunks 0-63 went out
    once)."""
    c = crash("netoops_inflight", cmdline="unknown_nmi_panic", kernel=STOCK,
              nic="e1000", nic2="e1000e", when_armed=inject_nmi_in_flight,
              allow=ALLOW_PANIC + [r"Kernel panic - not syncing: NMI: Not continuing"])
    check_nmi_in_flight(c, kernel=STOCK)


def test_stock_release_is_debians():
    assert kernel_release(STOCK).startswith("6.1.0-") and \
        kernel_release(STOCK).endswith("-amd64")


def test_stock_sysrq_crash_sends_a_complete_panic_dump():
    c = crash(how="sysrq", allow=ALLOW_SYSRQ, kernel=STOCK, nic="e1000")
    c.result.assert_crashed()
    assert c.result.values("mode") == ["stock"]
    assert "netoops: running on a stock kernel" in c.result.console
    dump = c.only_dump()
    dump.assert_complete()
    check_header(dump, kernel=STOCK)
    c.assert_pool_clean(dump)
    assert dump.same("type") == proto.TYPE_OOPS
    assert "Kernel panic - not syncing: sysrq triggered crash" in text_of(dump)
    assert zero_registers(dump)


def test_stock_oops_in_process_context_carries_the_oops_registers():
    c = crash(how="null", allow=ALLOW_OOPS, kernel=STOCK, nic="e1000e")
    c.result.assert_ok()
    assert c.result.values("alive") == [""]
    dump = c.only_dump()
    dump.assert_complete()
    check_header(dump, kernel=STOCK)
    assert dump.packets[0].registers["rip"] == \
        console_rip(c.result.console, "nto_crash_null_deref")


def test_stock_oop_in_timer_panics_with_the_oops_registers():
    allow = ALLOW_OOPS + ALLOW_PANIC + [
        r"Kernel panic - not syncing: Fatal exception in interrupt"]
    c = crash(how="timer", allow=allow, kernel=STOCK, nic="e1000e")
    c.result.assert_crashed()
    # An oops in interrupt context always panics: one dump, the panic's.
    dump = c.only_dump()
    dump.assert_complete()
    c.assert_pool_clean(dump)
    assert "Fatal exception in interrupt" in text_of(dump)
    assert dump.packets[0].registers["rip"] == \
        console_rip(c.result.console, "nto_crash_null_deref")


def test_stock_sysrq_y_sends_soft_dumps_and_the_guest_runs_on():
    with Netns() as ns:
        first = ns.udp_listener(2004)
        second = ns.udp_listener(2005)
        res = run_guest("netoops_live", ns, timeout=240, kernel_flavour=STOCK,
                        args={"hostmac": HOST_MAC})
        got = [group(l.payloads()) for l in (first, second)]
    res.assert_ok()
    assert res.values("alive") == [""]
    assert res.value("counters") == "2 0 0 0"
    for dumps in got:
        assert len(dumps) == 2
        for dump in dumps:
            dump.assert_complete()
            assert dump.same("type") == proto.TYPE_SOFT
            assert zero_registers(dump)
            assert text_of(dump).rstrip("\n").endswith("sysrq: Trigger a soft dump")


ALLOW_FATAL = ALLOW_OOPS + ALLOW_PANIC + [r"Kernel panic - not syncing: Fatal exception"]


def test_stock_nested_oops_keeps_the_first_oops_registers():
    """The handling of an oops oopses again (a die notifier faults): every
    dump carries the first oops's registers, as the patched kernel's do."""
    allow = ALLOW_FATAL + [r"BUG: kernel NULL pointer dereference"]
    c = crash(how="nested", cmdline="oops=panic", allow=allow, kernel=STOCK)
    c.result.assert_crashed()
    con = c.result.console
    assert "RIP: 0010:nto_crash_nested_fault+" in con, c.result.excerpt()
    # The panic's dump goes out (the nested oops's own OOPS dump makes way:
    # the outer oops still holds oops_in_progress).
    assert len(c.panic_dumps()) == 1, [d.dump_id for d in c.dumps]
    c.assert_pool_clean(c.panic_dumps()[0])
    for dump in c.dumps:
        dump.assert_complete()
        assert dump.packets[0].registers["rip"] == \
            console_rip(con, "nto_crash_null_deref")


def test_stock_two_cpus_oopsing_at_once_the_panic_has_its_cpus_registers():
    c = crash(how="oops2", cmdline="oops=panic", allow=ALLOW_FATAL, kernel=STOCK,
              nic="e1000")
    c.result.assert_crashed()
    panic = c.panic_dumps()
    assert len(panic) == 1, [d.dump_id for d in c.dumps]
    panic[0].assert_complete()
    c.assert_pool_clean(panic[0])
    regs = panic[0].packets[0].registers
    con = c.result.console
    funcs = [f for f in ("nto_crash_null_cpu0", "nto_crash_null_cpu1")
             if f"RIP: 0010:{f}+" in con and regs["rip"] == console_rip(con, f)]
    assert len(funcs) == 1, hex(regs["rip"])
    printed = console_regs(con, funcs[0])
    assert len(printed) == 16, printed
    assert {k: regs[k] for k in printed} == printed


def test_stock_watchdog_panic_after_an_oops_of_the_same_task_has_no_registers():
    """insmod oopses holding its own task lock, then spins on it in do_exit()
    until the soft-lockup watchdog panics in that same task: the OOPS dump
    has the oops's registers, the panic's dump none."""
    allow = ALLOW_OOPS + ALLOW_PANIC + [
        r"soft lockup", r"Kernel panic - not syncing: softlockup: hung tasks"]
    c = crash(how="oopslocked", cmdline="softlockup_panic=1 watchdog_thresh=2",
              allow=allow, kernel=STOCK, nic="e1000e")
    c.result.assert_crashed()
    panic = c.panic_dumps()
    oops = [d for d in c.dumps if d not in panic]
    assert len(panic) == 1 and len(oops) == 1, [d.dump_id for d in c.dumps]
    for dump in c.dumps:
        dump.assert_complete()
    c.assert_pool_clean(panic[0])
    assert oops[0].packets[0].registers["rip"] == \
        console_rip(c.result.console, "nto_crash_null_deref")
    assert "soft lockup" in text_of(panic[0])
    assert zero_registers(panic[0])


def test_stock_oops_inside_the_target_nics_receive_poll():
    """Debian's kernel, e1000e: a packet handler oopses in eth0's NAPI poll
    ("Fatal exception in interrupt"): the whole dump, with its registers."""
    c = crash("netoops_rx", args={"rxmode": "oops"}, nic="e1000e", kernel=STOCK,
              when_armed=send_rx_crash, allow=ALLOW_RX_OOPS)
    dump = c.whole_dump(kernel=STOCK)
    assert "Kernel panic - not syncing: Fatal exception in interrupt" in text_of(dump)
    assert dump.packets[0].registers["rip"] == \
        console_rip(c.result.console, "nto_rx_null_deref")


def test_stock_panic_dump_through_a_bridge_and_a_vlan():
    """Debian's bridge and 8021q over e1000e, a soft dump through the same
    target first: the panic's whole dump through the NIC below."""
    for stack, vlan in (("bridge", None), ("vlan", 5)):
        c = crash("netoops_stacked", args={"stack": stack, "soft": "1"}, nic="e1000e",
                  kernel=STOCK, vlan=vlan, allow=ALLOW_SYSRQ)
        c.result.assert_crashed()
        panic = c.panic_dumps()
        assert len(panic) == 1, (stack, [(d.dump_id, len(d.packets)) for d in c.dumps])
        panic[0].assert_complete()
        check_header(panic[0], kernel=STOCK)
        c.assert_pool_clean(panic[0])


def test_stock_panic_on_a_busy_vmxnet3():
    """Debian's vmxnet3, two queues, flooded by the host while both CPUs
    stream TCP through it, when CPU 0 panics: the whole dump."""
    c = crash("netoops_busy", nic="vmxnet3", kernel=STOCK, when_armed=start_traffic,
              allow=ALLOW_SYSRQ)
    assert c.result.value("queues") == "2", c.result.excerpt()
    c.whole_dump(kernel=STOCK)
