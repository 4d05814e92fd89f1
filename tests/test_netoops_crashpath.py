# SPDX-License-Identifier: GPL-2.0
"""netoops in every way a machine dies: each failure mode is a guest crash.

Each test boots the debug kernel (lockdep, KASAN), crashes it the way its
name says and checks what reached the host: a complete dump, or what
arrived, newest first; the guest then reboots (QEMU exits) in time.

The cases are spread over three NICs: virtio-net, which frees sent skbs in
its transmit routine, and e1000 and e1000e, which free them only in NAPI,
as most real NICs do (the panic dump must reap them itself).  The NMI,
memory-exhaustion and fault cases run on all three.  Every log is padded
to 256 KiB, four times the panic dump's pool of skbs.
"""

from __future__ import annotations

import pytest

from crashes import (ALLOW_NMI_PANIC, ALLOW_OOPS, ALLOW_PANIC, ALLOW_RX_LOCKUP,
                     ALLOW_RX_OOPS, BLOB, Crash, check_header,
                     check_nmi_in_flight, check_nmi_lockdep, crash_many,
                     inject_nmi_in_flight, send_rx_crash, start_traffic,
                     zero_registers)
from dumps import console_regs, console_rip, group
from harness import HOST_MAC, NICS, Guest, Listener, Netns
from netoops_collector import proto
from netoops_collector.report import analyse, strip_levels

ALLOW_SYSRQ = ALLOW_PANIC + [r"Kernel panic - not syncing: sysrq triggered crash"]
ALLOW_FATAL = ALLOW_OOPS + ALLOW_PANIC + [r"Kernel panic - not syncing: Fatal exception"]
ALLOW_STORM = ALLOW_OOPS + ALLOW_SYSRQ
ALLOW_OOM = ALLOW_PANIC + [r"Kernel panic - not syncing: nto_crash: out of memory"]
ALLOW_WATCHDOG = ALLOW_PANIC + [
    r"INFO: task insmod:\d+ blocked", r"soft lockup",
    r"Kernel panic - not syncing: (hung_task: blocked tasks|softlockup: hung tasks)"]


# What an oops in the transmit routine leaves behind: the shell dies holding
# netoops's lock, with interrupts off, and do_exit() says so (lockdep is
# already off: the oops tainted the kernel).
ALLOW_XMIT_FAULT = [
    r"BUG: KASAN: null-ptr-deref in nto_faultdev_crash",
    r"BUG: kernel NULL pointer dereference", r"Oops: ", r"Call Trace:",
    r"---\[ end trace", r"Kernel panic - not syncing: sysrq triggered crash",
    r"---\[ end Kernel panic",
    r"BUG: sleeping function called from invalid context at include/linux/cgroup-defs.h",
]
# A fault inside the panic dump: netoops panics again (or the oops=panic
# oops ends in its own panic) and the dump starts over.
ALLOW_PANIC_FAULT = ALLOW_XMIT_FAULT + ALLOW_FATAL + [
    r"Kernel panic - not syncing: netoops: a send in the panic dump faulted"]


def inject_nmi(guest: Guest, port: Listener) -> None:
    guest.hmp("nmi")


def serial_sysrq_y(guest: Guest, port: Listener) -> None:
    guest.serial_break(b"y")


# Every single-guest crash of this file.  They boot one at a time: on two
# cores, parallel debug guests are slower in all and stall in early boot.
SPECS = {
    "panic_on_oops": dict(how="null", cmdline="oops=panic", allow=ALLOW_FATAL,
                          nic="e1000"),
    "oops2": dict(how="oops2", cmdline="oops=panic", allow=ALLOW_FATAL, nic="e1000e"),
    "concurrent": dict(script="netoops_concurrent", allow=ALLOW_SYSRQ, nic="e1000"),
    "irqsoft": dict(script="netoops_irqsoft", allow=ALLOW_SYSRQ, console_input=True,
                    when_armed=serial_sysrq_y),
    # An NMI in the idle loop on virtio-net; on e1000 and e1000e one that
    # lands while a soft dump is being sent through both.
    "nmi-virtio": dict(how="nmi", cmdline="unknown_nmi_panic", nic="virtio",
                       allow=ALLOW_PANIC + ALLOW_NMI_PANIC, when_armed=inject_nmi),
    "nmi-inflight": dict(script="netoops_inflight", cmdline="unknown_nmi_panic",
                         nic="e1000", nic2="e1000e",
                         when_armed=inject_nmi_in_flight,
                         allow=ALLOW_PANIC + ALLOW_NMI_PANIC),
    "fault": dict(script="netoops_fault", allow=ALLOW_XMIT_FAULT),
    "fault-panic": dict(script="netoops_fault", allow=ALLOW_PANIC_FAULT,
                        args={"when": "panic"}, nic="e1000"),
    "fault-oops": dict(script="netoops_fault", allow=ALLOW_PANIC_FAULT,
                       cmdline="oops=panic", args={"when": "oops"}, nic="e1000e"),
    "stuck": dict(script="netoops_fault", allow=ALLOW_SYSRQ, args={"when": "stuck"},
                  nic="e1000"),
    "hold": dict(script="netoops_fault", allow=ALLOW_SYSRQ, args={"when": "hold"},
                 nic="e1000e"),
    "locked": dict(script="netoops_fault", allow=ALLOW_SYSRQ, args={"when": "locked"},
                   nic="e1000"),
    "storm": dict(script="netoops_storm", allow=ALLOW_STORM, timeout=400,
                  args={"limit": "5"}, nic="e1000e"),
    **{f"oom-{nic}": dict(how="oom", allow=ALLOW_OOM, timeout=400, nic=nic)
       for nic in NICS},
    "hang": dict(how="hang", cmdline="hung_task_panic=1", allow=ALLOW_WATCHDOG,
                 nic="e1000"),
    "lockup": dict(how="lockup", cmdline="softlockup_panic=1 watchdog_thresh=2",
                   allow=ALLOW_WATCHDOG, nic="e1000e"),
    "levels": dict(how="sysrq", allow=ALLOW_SYSRQ),
    "kdump": dict(script="netoops_kdump", initrd="kdump", nic="e1000e",
                  cmdline="crashkernel=256M crash_kexec_post_notifiers",
                  allow=ALLOW_SYSRQ, timeout=400),
    "ipv6": dict(how="sysrq", allow=ALLOW_SYSRQ, family="inet6", args={"v6": "1"},
                 nic="e1000"),
    # A crash inside the target NIC's own receive poll (netoops_rx.sh)
    **{f"rx-oops-{nic}": dict(script="netoops_rx", args={"rxmode": "oops"}, nic=nic,
                              allow=ALLOW_RX_OOPS, when_armed=send_rx_crash)
       for nic in ("virtio", "e1000e")},
    "rx-lockup": dict(script="netoops_rx", args={"rxmode": "lockup"}, nic="e1000e",
                      cmdline="softlockup_panic=1 watchdog_thresh=2",
                      allow=ALLOW_RX_LOCKUP, when_armed=send_rx_crash),
    # Targets on a bridge, a VLAN and a macvlan over e1000e (netoops_stacked.sh);
    # with soft=1 a soft dump runs through the same target on CPU 1 first.
    "stack-bridge": dict(script="netoops_stacked", args={"stack": "bridge", "soft": "1"},
                         nic="e1000e", allow=ALLOW_SYSRQ),
    "stack-bridge-nmi": dict(script="netoops_stacked", nic="e1000",
                             args={"stack": "bridge", "how": "nmi"},
                             cmdline="unknown_nmi_panic", when_armed=inject_nmi,
                             allow=ALLOW_PANIC + ALLOW_NMI_PANIC),
    "stack-vlan": dict(script="netoops_stacked", args={"stack": "vlan", "soft": "1"},
                       nic="e1000e", vlan=5, allow=ALLOW_SYSRQ),
    "stack-macvlan": dict(script="netoops_stacked", args={"stack": "macvlan"},
                          nic="e1000e", allow=ALLOW_SYSRQ),
    # A busy machine (netoops_busy.sh): the host floods eth0, both CPUs
    # stream TCP through it, then CPU 0 panics.  (An NMI there: the dump's
    # reaping frees other traffic's skbs in the NMI, and lockdep reports
    # KASAN's stack depot lock; not in the suite until that is solved.)
    **{f"busy-{nic}": dict(script="netoops_busy", nic=nic, allow=ALLOW_SYSRQ,
                           when_armed=start_traffic)
       for nic in ("virtio-mq", "vmxnet3")},
    **{f"rx-spin-{nic}": dict(script="netoops_rx", args={"rxmode": "spin"}, nic=nic,
                              allow=ALLOW_SYSRQ, when_armed=send_rx_crash)
       for nic in ("e1000", "e1000e")},
    "rx-irqspin": dict(script="netoops_rx", args={"rxmode": "irqspin"}, nic="e1000",
                       allow=ALLOW_SYSRQ, when_armed=send_rx_crash),
}


@pytest.fixture(scope="module")
def ran() -> "Crashes":
    return Crashes()


class Crashes:
    """Each crash of SPECS, booted the first time a test asks for it (so
    that ``-k`` boots only what the chosen tests need), one at a time."""

    def __init__(self) -> None:
        self.done: dict[str, Crash] = {}

    def __getitem__(self, name: str) -> Crash:
        if name not in self.done:
            self.done[name] = crash_many({name: SPECS[name]}, parallel=1)[name]
        return self.done[name]


def text_of(dump) -> str:
    return dump.text(allow_missing=True).decode(errors="replace")


def test_panic_on_oops_sends_one_dump_with_the_oops_registers(ran):
    c = ran["panic_on_oops"]
    # The OOPS dump is left to the panic that follows: one dump, not two.
    dump = c.whole_dump()
    text = text_of(dump)
    assert "BUG: kernel NULL pointer dereference" in text
    assert "Kernel panic - not syncing: Fatal exception" in text
    assert dump.packets[0].registers["rip"] == \
        console_rip(c.result.console, "nto_crash_null_deref")


def test_two_cpus_oopsing_at_once_each_dump_has_its_own_registers(ran):
    c = ran["oops2"]
    c.result.assert_crashed()
    dump = c.only_dump()
    dump.assert_complete()
    c.assert_pool_clean(dump)
    regs = dump.packets[0].registers
    con = c.result.console
    # The panic's dump carries the oops of the CPU that panicked, whole:
    # its RIP and every general register and RSP as that oops printed them.
    funcs = [f for f in ("nto_crash_null_cpu0", "nto_crash_null_cpu1")
             if f"RIP: 0010:{f}+" in con and regs["rip"] == console_rip(con, f)]
    assert len(funcs) == 1, hex(regs["rip"])
    printed = console_regs(con, funcs[0])
    assert len(printed) == 16, printed
    assert {k: regs[k] for k in printed} == printed


def test_panic_while_another_cpu_sends_a_soft_dump(ran):
    c = ran["concurrent"]
    c.result.assert_crashed()
    soft = [d for d in c.dumps if d.same("type") == proto.TYPE_SOFT]
    panic = [d for d in c.dumps if d.same("type") == proto.TYPE_OOPS]
    assert len(soft) == 1 and len(panic) == 1, [d.dump_id for d in c.dumps]
    # The soft dump was cut short by the panic ...
    assert len(soft[0].packets) < proto.RETRANSMIT_COUNT * soft[0].count
    # ... and the panic's own dump got out whole all the same.
    panic[0].assert_complete()
    c.assert_pool_clean(panic[0])
    check_header(panic[0])
    assert "sysrq triggered crash" in text_of(panic[0])
    assert zero_registers(panic[0])


def test_soft_dump_in_hard_irq_context_makes_way_for_a_panic(ran):
    """CPU 0 sends a soft dump from a hard interrupt (a break and "y" on the
    serial console: sysrq y in the UART's interrupt handler), with
    interrupts off for the whole dump, when CPU 1 panics: the soft dump
    returns at its next
    packet (panic_on_other_cpu(), core hook 0007), so the panic's stop
    interrupt reaches CPU 0.  Without the hook the panic waits a second
    and stops CPU 0 with an NMI, wherever it is in netpoll."""
    c = ran["irqsoft"]
    c.result.assert_crashed()
    soft = [d for d in c.dumps if d.same("type") == proto.TYPE_SOFT]
    panic = [d for d in c.dumps if d.same("type") == proto.TYPE_OOPS]
    assert len(soft) == 1 and len(panic) == 1, [d.dump_id for d in c.dumps]
    assert len(soft[0].packets) < proto.RETRANSMIT_COUNT * soft[0].count
    assert "sysrq: Trigger a soft dump" in text_of(soft[0])
    panic[0].assert_complete()
    c.assert_pool_clean(panic[0])
    assert "Shutting down cpus with NMI" not in c.result.console
    assert "sysrq triggered crash" in text_of(panic[0])


def test_panic_in_nmi_context(ran):
    c = ran["nmi-virtio"]
    c.result.assert_crashed()
    check_nmi_lockdep(c.result.console)
    dump = c.only_dump()
    dump.assert_complete()
    # No allocator in NMI context: every packet came from the pool.
    c.assert_pool_clean(dump)
    check_header(dump)
    text = text_of(dump)
    assert "NMI received for unknown reason" in text
    assert "Kernel panic - not syncing: NMI: Not continuing" in text
    assert zero_registers(dump)


def test_nmi_panic_while_a_soft_dump_is_in_flight(ran):
    """The NMI lands while CPU 0 sends a soft dump to a target on e1000 and
    one on e1000e, wherever it is: between packets, holding netoops's lock,
    or inside one NIC's transmit routine (its lock then held for good).  The
    panic dump still gets out whole, through both NICs or the one that is
    free, from the pool alone."""
    c = ran["nmi-inflight"]
    check_nmi_lockdep(c.result.console)
    check_nmi_in_flight(c)


def test_fault_inside_the_dump_leaves_the_panic_dump_working(ran):
    c = ran["fault"]
    assert c.result.status == "crash", c.result.excerpt()
    assert c.result.values("alive") == [""], c.result.excerpt()
    sent, skipped, busy, deferred = map(int, c.result.value("counters").split())
    # The soft dump started; the OOPS dump of its fault found it busy.
    assert (sent, busy) == (1, 1)
    assert "a send through ntofault0 faulted" in c.result.console
    panic = [d for d in c.dumps if b"sysrq triggered crash" in d.text(allow_missing=True)]
    assert len(panic) == 1, [d.dump_id for d in c.dumps]
    panic[0].assert_complete()
    c.assert_pool_clean(panic[0])
    check_header(panic[0])
    assert "RIP: 0010:nto_faultdev_crash" in text_of(panic[0])


@pytest.mark.parametrize("case,title", [
    ("fault-panic", "Kernel panic - not syncing: sysrq triggered crash"),
    ("fault-oops", "Kernel panic - not syncing: Fatal exception"),
])
def test_fault_inside_the_panic_dump_reaches_the_healthy_target(ran, case: str,
                                                                title: str):
    """The panic dump itself meets the faulting driver first (the newer,
    configfs target heads the list): the healthy older target still gets
    the whole dump, and the machine reboots rather than hang."""
    c = ran[case]
    c.result.assert_crashed()
    assert "a send through ntofault0 faulted" in c.result.console
    dump = c.only_dump()
    dump.assert_complete()
    rep = c.assert_pool_clean(dump)
    # The dump started over once, without the faulted target.
    assert rep["retries"] == 1, rep
    check_header(dump)
    text = text_of(dump)
    assert title in text
    assert "RIP: 0010:nto_faultdev_crash" in text


def _beside_a_bad_device(c: Crash) -> tuple:
    """The healthy target's whole dump, and the panic report: nothing
    dropped or unfit; the packets the bad device took or was skipped for."""
    c.result.assert_crashed()
    dump = c.only_dump()
    dump.assert_complete()
    check_header(dump)
    assert len(dump.packets) == proto.RETRANSMIT_COUNT * dump.count
    rep = c.panic_report()
    assert (rep["dropped"], rep["unfit"]) == (0, 0), rep
    # every packet went to the bad device's target as well: it took the
    # first ones, the rest were skipped
    took = rep["sent"] - len(dump.packets)
    assert rep["stalled"] == len(dump.packets) - took, rep
    return dump, rep, took


def test_a_device_that_never_transmits_does_not_starve_the_others(ran):
    """The newer target's device refuses every packet (NETDEV_TX_BUSY, for
    good): netoops leaves that device alone after the first refusal, so
    its skbs stay free for the healthy target, which gets it all."""
    dump, rep, took = _beside_a_bad_device(ran["stuck"])
    assert took == 0, rep           # refused, not parked for a worker


def test_a_device_whose_transmit_lock_a_stopped_cpu_holds_is_left_alone(ran):
    """A thread on CPU 1 holds the newer target's transmit lock, spinning,
    when CPU 0 panics: the panic stops CPU 1 with the lock held for good.
    netoops sends nothing there (netpoll would wait a jiffy per packet and
    then park it), says why, and the healthy target gets it all."""
    c = ran["locked"]
    dump, rep, took = _beside_a_bad_device(c)
    assert took == 0, rep
    assert "ntofault0 left alone for ntofault0: every transmit queue is locked" \
        in c.result.console


def test_a_device_that_never_lets_go_pins_only_its_share_of_the_pool(ran):
    """A target whose device keeps every packet it is given (as a veth does:
    its peer's backlog never runs after a panic), in front of a healthy
    e1000e target: it keeps what it took while more than 16 of the pool's
    64 skbs were free (so at most 48), is then left alone, and the panic
    dump goes out whole through e1000e."""
    dump, rep, took = _beside_a_bad_device(ran["hold"])
    assert rep["polls"] > 0, rep
    assert 16 <= took <= 64 - 16, rep


def test_oops_storm_is_capped_and_the_panic_still_goes_out(ran):
    c = ran["storm"]
    c.result.assert_crashed()
    sent, skipped, busy, deferred = map(int, c.result.value("counters").split())
    assert (sent, skipped, busy, deferred) == (5, 45, 0, 0)
    oopses = [d for d in c.dumps if b"Kernel panic" not in d.text(allow_missing=True)]
    panic = c.panic_dumps()
    assert len(oopses) == 5 and len(panic) == 1
    for d in oopses + panic:
        d.assert_complete()
    c.assert_pool_clean(panic[0])
    # Every oops dump carries the registers of its own oops.
    for d in oopses:
        assert not zero_registers(d)
    assert zero_registers(panic[0])
    # Nothing but those six dumps went out.
    assert c.packets == sum(len(d.packets) for d in oopses + panic)


@pytest.mark.parametrize("nic", NICS)
def test_panic_under_memory_exhaustion_sends_the_newest_chunks_first(ran, nic: str):
    c = ran[f"oom-{nic}"]
    c.result.assert_crashed()
    dump = c.only_dump()
    got = sorted({p.packet_no for p in dump.packets})
    print(f"oom: {len(got)} of {dump.count} chunks arrived, "
          f"{len(dump.packets)} of {proto.RETRANSMIT_COUNT * dump.count} packets")
    # The panic dump allocates nothing (skbs of its own): all of it gets out.
    # Were packets lost, the newest part of the log would be what arrived.
    assert got and got == list(range(len(got))), got
    dump.assert_complete()
    c.assert_pool_clean(dump)
    assert "Kernel panic - not syncing: nto_crash: out of memory" in text_of(dump)


@pytest.mark.parametrize("how,title", [
    ("hang", "INFO: task hung in nto_crash_init"),
    ("lockup", "BUG: soft lockup in nto_crash_lockup"),
])
def test_watchdog_panics_carry_no_registers(ran, how: str, title: str):
    c = ran[how]
    dump = c.whole_dump()
    assert zero_registers(dump)
    assert analyse(text_of(dump)).title == title


def test_level_prefixes_are_sent_and_the_collector_reads_both_forms(ran):
    c = ran["levels"]
    dump = c.whole_dump()
    text = text_of(dump)
    # The log as syslog(2) reads it: KERN_EMERG lines are <0>.
    assert "\n<0>[" in text and "] Kernel panic - not syncing: sysrq triggered crash" in text
    plain = strip_levels(text)
    assert "\n<" not in plain
    assert analyse(text).title == analyse(plain).title == \
        "Kernel panic - not syncing: sysrq triggered crash"


def test_kdump_beside_netoops_the_dump_goes_out_then_the_capture_kernel_boots(ran):
    """A capture kernel loaded with kexec -p and crash_kexec_post_notifiers
    (the other CPUs are then stopped by an NMI at once): netoops's whole
    dump arrives, then the capture kernel boots and runs its script."""
    c = ran["kdump"]
    res = c.result
    assert res.status == "pass" and not res.splats and not res.missing, res.excerpt()
    assert res.values("loaded") == [""], res.excerpt()
    assert res.value("captured").startswith("elfcorehdr="), res.excerpt()
    dump = c.only_dump()
    dump.assert_complete()
    c.assert_pool_clean(dump)
    check_header(dump)
    assert "sysrq triggered crash" in text_of(dump)
    con = res.console
    assert con.index("netoops: panic dump:") < con.rindex("Linux version")


def test_ipv6_target_gets_a_complete_panic_dump(ran):
    c = ran["ipv6"]
    c.whole_dump()


A, B = "A" * 100, "B" * 60


def test_blob_rewritten_in_a_tight_loop_never_holds_up_the_panic():
    """20 panics (10 sysrq on CPU 0, 10 NMIs) with CPU 1 rewriting the blob."""
    runs = []
    for batch in range(10):
        with Netns() as ns:
            port = ns.udp_listener(proto.PORT)
            guests = []
            for i in range(2):
                nmi = i % 2 == 1
                args = {"hostmac": HOST_MAC, "bootid": str(1000 + 2 * batch + i),
                        "blob": BLOB, "blobloop": "1",
                        "how": "nmi" if nmi else "sysrq", "cpu": "0"}
                guests.append(Guest(ns, "netoops_crash", index=i, timeout=300,
                                    monitor=nmi, cmdline="unknown_nmi_panic" if nmi else "",
                                    allow=ALLOW_SYSRQ + (ALLOW_NMI_PANIC if nmi else []),
                                    args=args))
            for g in guests:
                g.start()
            for g in guests:
                if g.monitor_path:
                    assert g.wait_for_result("armed", timeout=280), g.name
                    g.hmp("nmi")
            results = [g.wait() for g in guests]
            got = group(port.payloads())
        by_boot = {d.same("boot_id"): d for d in got}
        for i, res in enumerate(results):
            res.assert_crashed()
            check_nmi_lockdep(res.console)
            dump = by_boot.get(1000 + 2 * batch + i)
            assert dump is not None, f"batch {batch} guest {i}: no dump\n{res.excerpt()}"
            dump.assert_complete()
            assert proto.cstring(dump.same("user_blob")) in (A, B)
            runs.append(dump)
    assert len(runs) == 20



@pytest.mark.parametrize("nic", ["virtio", "e1000e"])
def test_oops_inside_the_target_nics_receive_poll(ran, nic: str):
    """A packet handler oopses in eth0's NAPI poll ("Fatal exception in
    interrupt"): the CPU that panics owns that NAPI, where netpoll would
    park every packet for a worker that never runs.  The dump goes out
    whole, three copies, with the handler's registers."""
    c = ran[f"rx-oops-{nic}"]
    dump = c.whole_dump()
    text = text_of(dump)
    assert "Kernel panic - not syncing: Fatal exception in interrupt" in text
    assert "nto_rx_rcv" in text
    assert dump.packets[0].registers["rip"] == \
        console_rip(c.result.console, "nto_rx_null_deref")


def test_soft_lockup_inside_the_target_nics_receive_poll(ran):
    c = ran["rx-lockup"]
    dump = c.whole_dump()
    assert "nto_rx_spin" in text_of(dump)
    assert analyse(text_of(dump)).title == "BUG: soft lockup in nto_rx_spin"


@pytest.mark.parametrize("nic", ["e1000", "e1000e"])
def test_panic_with_another_cpu_stopped_inside_the_nics_receive_poll(ran, nic: str):
    """CPU 1 spins in eth0's NAPI poll with interrupts off (it owns the
    NAPI for good) when CPU 0 panics: the panic stops it with an NMI, the
    dump gets out whole and the guest reboots.  e1000 cleans its transmit
    ring only in that NAPI poll, which the dump runs once its skbs ran dry
    (CPU 1 is offline: stopped); e1000e (MSI-X) cleans it in its transmit
    vector's handler, which the dump runs through the controller (no
    interrupt is in a handler)."""
    c = ran[f"rx-spin-{nic}"]
    dump = c.whole_dump()
    text = text_of(dump)
    assert "marked datagram on eth0 (cpu 1" in text
    assert "sysrq triggered crash" in text


@pytest.mark.parametrize("case,target", [
    ("stack-bridge", "br0"), ("stack-bridge-nmi", "br0"), ("stack-vlan", "eth0.5"),
    ("stack-macvlan", "mv0")])
def test_panic_dump_through_a_stacked_target(ran, case: str, target: str):
    """The target is a bridge over the NIC (a hypervisor host), a VLAN on it
    (the host reads VLAN 5 off its bridge) or a macvlan: the panic dump
    leaves through the NIC below, whose completions it reaps, and gets out
    whole, three copies, nothing dropped (the pool is four times smaller
    than the dump)."""
    c = ran[case]
    c.result.assert_crashed()
    assert c.result.value("target") == target, c.result.excerpt()
    panic = c.panic_dumps()
    assert len(panic) == 1, [(d.dump_id, d.count, len(d.packets)) for d in c.dumps]
    panic[0].assert_complete()
    check_header(panic[0])
    c.assert_pool_clean(panic[0])


@pytest.mark.parametrize("case", ["busy-virtio-mq", "busy-vmxnet3"])
def test_panic_on_a_busy_machine(ran, case: str):
    """The host floods the guest's NIC and both CPUs stream TCP through it
    (two queues on virtio-net and vmxnet3, one per CPU) when CPU 0 panics:
    the dump gets out whole, through a queue whose lock is free and which
    does not hold the pool's skbs (vmxnet3 cleans a queue's completions
    only in its NAPI, which CPU 1 may have been stopped in)."""
    c = ran[case]
    res = c.result
    assert res.value("queues") == "2", res.excerpt()
    assert res.values("flooded") == [""], res.excerpt()
    c.whole_dump()


def test_panic_with_another_cpu_stopped_inside_the_nics_interrupt_handler(ran):
    """CPU 1 spins in a handler on e1000's interrupt line (INTx, shared
    with the NIC's own) when CPU 0 panics: the line's run is in progress
    for good.  The dump runs no ndo_poll_controller there (e1000's
    disable_hardirq() would wait for that run without end: no dump, no
    reboot), reaps with the NAPI poll alone, gets out whole, and the guest
    reboots."""
    c = ran["rx-irqspin"]
    dump = c.whole_dump()
    assert "sysrq triggered crash" in text_of(dump)
