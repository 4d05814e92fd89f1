# SPDX-License-Identifier: GPL-2.0
"""Crash a guest running netoops and collect what reached the host."""

from __future__ import annotations

import re
import subprocess
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Callable

from dumps import RawDump, group
from harness import HOST_MAC, PYTHON, TOP, Guest, GuestResult, Listener, Netns
from netoops_collector import proto

BLOB = "fleet-a/rack-7"
BOOT_ID = 0xC0FFEE
# Every crash pads the log to at least this much (nto.pad=): 256 KiB is
# four times netoops's pool of 64 skbs, so a NIC that lets go of its sent
# skbs only in NAPI needs the dump to reclaim them.
PAD_BYTES = 256 * 1024

# netoops's line on the console after a panic dump (netoops_report_panic)
PANIC_REPORT = re.compile(
    r"netoops: panic dump: (?P<sent>\d+) packets sent, (?P<dropped>\d+) dropped, "
    r"(?P<unfit>\d+) unfit, (?P<stalled>\d+) stalled, (?P<polls>\d+) polls, "
    r"(?P<retries>\d+) retries")

# An intended oops from nto_crash: KASAN reports the NULL write, then the oops.
ALLOW_OOPS = [r"BUG: KASAN: null-ptr-deref in nto_crash_", r"BUG: kernel NULL pointer dereference",
              r"Oops: ", r"Call Trace:", r"---\[ end trace"]
ALLOW_PANIC = [r"Call Trace:", r"---\[ end Kernel panic"]


@dataclass
class Crash:
    result: GuestResult
    dumps: list[RawDump]
    packets: int
    nic: str = "virtio"
    # the dumps by the address they came from (a guest with two NICs)
    by_source: dict[str, list[RawDump]] = field(default_factory=dict)

    def panic_report(self) -> dict[str, int]:
        """netoops's counters after the panic dump, from the console."""
        found = [m.groupdict() for m in PANIC_REPORT.finditer(self.result.console)]
        assert found, "no panic dump report on the console\n" + self.result.excerpt()
        return {k: int(v) for k, v in found[-1].items()}

    def assert_pool_clean(self, dump: RawDump, targets: int = 1) -> dict[str, int]:
        """Every packet of the panic dump went out of the pool, none lost."""
        rep = self.panic_report()
        assert (rep["dropped"], rep["unfit"], rep["stalled"]) == (0, 0, 0), rep
        if not self.nic.startswith("virtio"):
            # More packets than pool skbs: the dump reaped its completions.
            assert rep["polls"] > 0, rep
        assert len(dump.packets) == proto.RETRANSMIT_COUNT * dump.count
        assert dump.count * proto.DATA_BYTES >= PAD_BYTES, dump.count
        return rep

    def panic_dumps(self) -> list[RawDump]:
        return [d for d in self.dumps if d.same("type") == proto.TYPE_OOPS
                and b"Kernel panic - not syncing" in d.text(allow_missing=True)]

    def whole_dump(self, kernel: str | None = None) -> RawDump:
        """The guest died as intended and sent one complete dump."""
        self.result.assert_crashed()
        dump = self.only_dump()
        dump.assert_complete()
        check_header(dump, kernel=kernel)
        self.assert_pool_clean(dump)
        return dump

    def only_dump(self, type_: int | None = None) -> RawDump:
        """The one dump (of ``type_``, if given) that arrived."""
        dumps = [d for d in self.dumps if type_ is None or d.same("type") == type_]
        assert len(dumps) == 1, [(d.dump_id, d.count, len(d.packets))
                                 for d in self.dumps]
        return dumps[0]


def _start(ns: Netns, script: str = "netoops_crash", *, how: str = "sysrq",
           allow: list[str] = (), cmdline: str = "", args: dict | None = None,
           family: str = "inet", timeout: float = 240, index: int = 0,
           kernel: str | None = None, nic: str = "virtio", nic2: str = "",
           initrd: str = "", console_input: bool = False,
           memory: str = "1G", vlan: int | None = None,
           when_armed: Callable[[Guest, Listener], None] | None = None):
    port = ns.udp_listener(proto.PORT, family=family, vlan=vlan)
    if kernel == "stock":
        # Debian's log buffer is 128 KiB (CONFIG_LOG_BUF_SHIFT=17)
        cmdline = " ".join(filter(None, [cmdline, "log_buf_len=1M"]))
    guest = Guest(ns, script, index=index, timeout=timeout, allow=allow,
                  cmdline=cmdline, monitor=when_armed is not None,
                  kernel_flavour=kernel, nic=nic, nic2=nic2, initrd=initrd,
                  memory=memory, console_input=console_input,
                  args={"hostmac": HOST_MAC, "how": how,
                        "bootid": str(BOOT_ID), "blob": BLOB,
                        "pad": str(PAD_BYTES), **(args or {})}).start()
    return port, guest


def _finish(port, guest: Guest) -> Crash:
    res = guest.wait()
    packets = port.wait(10**6, timeout=3)
    sources: dict[str, list[bytes]] = {}
    for src, p in packets:
        sources.setdefault(src.rsplit(":", 1)[0], []).append(p)
    return Crash(res, group([p for _, p in packets]), len(packets), guest.nic,
                 {src: group(ps) for src, ps in sources.items()})


def crash(script: str = "netoops_crash", **kw) -> Crash:
    """Boot one guest running ``script``, let it crash, return the dumps.

    Keywords: how, allow, cmdline, args (nto.* values), family (of the
    listener), timeout, kernel (flavour), nic (harness.NICS), nic2 (a
    second NIC, eth1, at the guest's ip2), console_input (for
    Guest.serial_break), initrd
    ("kdump"), memory, vlan (the listener reads that VLAN's frames off
    the host's bridge), when_armed (called with the guest and the
    listener once the guest reports "armed", e.g. to inject an NMI).
    """
    return crash_many({"one": dict(kw, script=script)})["one"]


def crash_many(specs: dict[str, dict], parallel: int = 4) -> dict[str, Crash]:
    """Run several crashes, ``parallel`` guests at a time, each in a
    namespace of its own; ``specs`` maps a name to crash()'s keywords."""
    out: dict[str, Crash] = {}
    names = list(specs)
    for first in range(0, len(names), parallel):
        with ExitStack() as stack:
            runs = []
            for name in names[first:first + parallel]:
                kw = dict(specs[name])
                ns = stack.enter_context(Netns())
                runs.append((name, kw.get("when_armed"), *_start(ns, **kw)))
            for name, armed, port, guest in runs:
                if armed is not None:
                    assert guest.wait_for_result("armed", timeout=guest.timeout), \
                        f"{name}: {guest.name} never armed"
                    armed(guest, port)
            for name, armed, port, guest in runs:
                out[name] = _finish(port, guest)
    return out


def check_header(dump: RawDump, blob: str = BLOB, kernel: str | None = None) -> None:
    from test_harness import kernel_release
    assert proto.cstring(dump.same("kernel_version")) == kernel_release(kernel)
    assert dump.same("boot_id") == BOOT_ID
    assert proto.cstring(dump.same("user_blob")) == blob


def zero_registers(dump: RawDump) -> bool:
    return all(v == 0 for p in dump.packets for v in p.regs)



# 6.1's own panic() takes two locks in NMI context that lockdep reports: the
# NMI descriptor lock when smp_send_stop() registers its NMI stop handler
# (before the kmsg dump), and console_sem in console_unblank() (after it).
# Lockdep reports only the first bad lock; netoops's own path takes none of
# these: such a report has no netoops or netpoll frame.
ALLOW_NMI_PANIC = [r"Kernel panic - not syncing: NMI: Not continuing",
                   r"WARNING: inconsistent lock state"]
KERNEL_NMI_LOCKS = {r"\(console_sem\)\.lock": "console_unblank",
                    r"&nmi_desc\[\d+\]\.lock": "__register_nmi_handler"}
# The driver's ndo_poll_controller: when the NAPI poll alone reaps nothing
# for a millisecond (QEMU's e1000e in MSI-X mode cleans its ring only in
# its transmit vector's handler), the panic dump runs it, as netpoll itself
# does when a device is busy, once no interrupt is in a handler and no
# descriptor is locked; e1000e's disable_hardirq() takes the interrupt
# descriptor's lock in NMI context, and lockdep reports it.
# And virtio-net's transmit lock, which its TX NAPI poll takes: when QEMU
# is slow to consume the ring (a busy host), virtio-net holds on to all 64
# pool skbs and the panic dump reaps it with that poll, as netpoll would.
# netoops reaps no device whose transmit lock is held (netoops_dev_locked()),
# so the NMI cannot have interrupted a holder of it; lockdep reports the
# class taken in NMI context all the same.
DRIVER_NMI_LOCKS = {
    r"&irq_desc_lock_class": ("disable_hardirq", "e1000_netpoll", "netoops_reap_until"),
    r"_xmit_ETHER#\d+": ("virtnet_poll_tx", "netoops_reap_until"),
    # vmxnet3's own transmit lock, which its transmit routine takes under
    # the queue's (whose holder netoops keeps off); with a vector per queue
    # pair (QEMU's) nothing else takes it.
    r"&adapter->tx_queue\[i\]\.tx_lock": ("vmxnet3_xmit_frame", "netoops_xmit"),
}


def check_nmi_lockdep(console: str) -> None:
    """Any lockdep report is one of 6.1's own panic locks in NMI context, or
    the interrupt descriptor's when the dump reaps e1000e with its
    controller, virtio-net's transmit lock when it reaps it with its TX
    poll, or vmxnet3's own transmit lock."""
    reports = console.split("WARNING: inconsistent lock state")[1:]
    assert len(reports) <= 1
    for report in reports:
        head, _, stack = report.partition("stack backtrace:")
        taken = head[:head.find("{INITIAL USE} state was registered")]
        known = [f for lock, f in KERNEL_NMI_LOCKS.items() if re.search(lock, taken)]
        driver = [f for lock, f in DRIVER_NMI_LOCKS.items() if re.search(lock, taken)]
        assert len(known) + len(driver) == 1 and "IN-NMI" in head, head
        # The reliable frames of the NMI stack (the reboot may cut it short;
        # "? " frames are stale words on the stack)
        frames = []
        for line in stack.split("<NMI>", 1)[-1].splitlines():
            if "</NMI>" in line or "Kernel Offset" in line or "RIP: " in line:
                break
            m = re.match(r"\[[ \d.]+\]\s+([\w.]+)\+0x", line)
            if m:
                frames.append(m.group(1))
        if driver:
            assert all(f in frames for f in driver[0]), frames
            continue
        assert not [f for f in frames if "netoops" in f or "netpoll" in f], frames
        if frames:
            assert known[0] in frames, frames


def inject_nmi_in_flight(guest: Guest, port: Listener) -> None:
    """An NMI once 20 packets of the guest's soft dump reached the host
    (netoops_inflight.sh says "armed" once the dump started)."""
    assert len(port.wait(20, timeout=60)) >= 20, "the soft dump never got out"
    guest.hmp("nmi")


def check_nmi_in_flight(c: Crash, kernel: str | None = None) -> None:
    """netoops_inflight.sh: the NMI landed while CPU 0 sent a soft dump to a
    target on each of two NICs, wherever it was: between packets, holding
    netoops's lock, or inside one NIC's transmit routine (its lock then held
    for good).  The soft dump was cut short; the panic's dump got out whole
    through both NICs, or through the one that was free, from the pool."""
    c.result.assert_crashed()
    soft = [d for d in c.dumps if d.same("type") == proto.TYPE_SOFT]
    panic = [d for d in c.dumps if d.same("type") == proto.TYPE_OOPS]
    assert len(soft) == 1 and len(panic) == 1, [d.dump_id for d in c.dumps]
    targets = sorted(c.by_source)
    assert len(targets) == 2, targets
    assert 0 < len(soft[0].packets) < 2 * proto.RETRANSMIT_COUNT * soft[0].count
    whole, none = [], []
    for src in targets:
        got = [d for d in c.by_source[src] if d.dump_id == panic[0].dump_id]
        if got:
            got[0].assert_complete()
            whole.append(src)
        else:
            none.append(src)
    rep = c.panic_report()
    assert whole, rep
    assert (rep["dropped"], rep["unfit"]) == (0, 0), rep
    # more packets than the pool holds: the dump reaped its completions
    assert rep["polls"] > 0 and panic[0].count * proto.DATA_BYTES >= PAD_BYTES, rep
    # A target gets nothing only when CPU 0 held its NIC's transmit lock.
    assert (rep["stalled"] > 0) == bool(none), (rep, whole, none)
    check_header(panic[0], kernel=kernel)
    text = panic[0].text(allow_missing=True)
    assert b"NMI received for unknown reason" in text
    assert b"Kernel panic - not syncing: NMI: Not continuing" in text
    assert zero_registers(panic[0])


# An oops in nto_rxcrash's packet handler, inside the NIC's NAPI poll
ALLOW_RX_OOPS = [r"BUG: KASAN: null-ptr-deref in nto_rx_null_deref",
                 r"BUG: kernel NULL pointer dereference", r"Oops: ", r"Call Trace:",
                 r"---\[ end trace",
                 r"Kernel panic - not syncing: Fatal exception in interrupt",
                 r"---\[ end Kernel panic"]
ALLOW_RX_LOCKUP = ALLOW_PANIC + [r"soft lockup",
                                 r"Kernel panic - not syncing: softlockup: hung tasks"]


def send_rx_crash(guest: Guest, port: Listener) -> None:
    """The datagram that nto_rxcrash's packet handler crashes on, from the
    host's side of the namespace (a few times: the first may wait for ARP)."""
    code = ("import socket, sys, time\n"
            "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            "for _ in range(5):\n"
            "    s.sendto(b'nto-rx-crash', (sys.argv[1], 7001))\n"
            "    time.sleep(0.5)\n")
    subprocess.run(["ip", "netns", "exec", guest.ns.name, PYTHON, "-c", code,
                    guest.ip], check=True, timeout=30)


def _traffic(guest: Guest, *args: str) -> None:
    proc = guest.ns.spawn(["ip", "netns", "exec", guest.ns.name, PYTHON,
                           str(TOP / "tests" / "lib" / "traffic.py"), *args],
                          stdout=subprocess.PIPE)
    assert proc.stdout.readline().startswith(b"ready"), args


def start_traffic(guest: Guest, port: Listener) -> None:
    """netoops_busy.sh: TCP streams from the guest, a UDP flood to it."""
    _traffic(guest, "discard", "9")
    _traffic(guest, "flood", guest.ip, "9")
