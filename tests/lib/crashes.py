# SPDX-License-Identifier: GPL-2.0
"""Crash a guest running netoops and collect what reached the host."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from dumps import RawDump, group
from harness import HOST_MAC, Guest, GuestResult, Netns
from netoops_collector import proto

BLOB = "fleet-a/rack-7"
BOOT_ID = 0xC0FFEE

# An intended oops from nto_crash: KASAN reports the NULL write, then the oops.
ALLOW_OOPS = [r"BUG: KASAN: null-ptr-deref in nto_crash_", r"BUG: kernel NULL pointer dereference",
              r"Oops: ", r"Call Trace:", r"---\[ end trace"]
ALLOW_PANIC = [r"Call Trace:", r"---\[ end Kernel panic"]


@dataclass
class Crash:
    result: GuestResult
    dumps: list[RawDump]
    packets: int

    def panic_dumps(self) -> list[RawDump]:
        return [d for d in self.dumps if d.same("type") == proto.TYPE_OOPS
                and b"Kernel panic - not syncing" in d.text(allow_missing=True)]

    def only_dump(self) -> RawDump:
        assert len(self.dumps) == 1, [(d.dump_id, d.count, len(d.packets))
                                      for d in self.dumps]
        return self.dumps[0]


def crash(script: str = "netoops_crash", *, how: str = "sysrq",
          allow: list[str] = (), cmdline: str = "", args: dict | None = None,
          family: str = "inet", timeout: float = 240, index: int = 0,
          kernel: str | None = None,
          when_armed: Callable[[Guest], None] | None = None) -> Crash:
    """Boot one guest running ``script``, let it crash, return the dumps."""
    with Netns() as ns:
        port = ns.udp_listener(proto.PORT, family=family)
        guest = Guest(ns, script, index=index, timeout=timeout, allow=allow,
                      cmdline=cmdline, monitor=when_armed is not None,
                      kernel_flavour=kernel,
                      args={"hostmac": HOST_MAC, "how": how,
                            "bootid": str(BOOT_ID), "blob": BLOB,
                            **(args or {})}).start()
        if when_armed is not None:
            assert guest.wait_for_result("armed", timeout=timeout), \
                f"{guest.name} never armed"
            when_armed(guest)
        res = guest.wait()
        packets = port.wait(10**6, timeout=3)
    return Crash(res, group([p for _, p in packets]), len(packets))


def check_header(dump: RawDump, blob: str = BLOB, kernel: str | None = None) -> None:
    from test_harness import kernel_release
    assert proto.cstring(dump.same("kernel_version")) == kernel_release(kernel)
    assert dump.same("boot_id") == BOOT_ID
    assert proto.cstring(dump.same("user_blob")) == blob


def zero_registers(dump: RawDump) -> bool:
    return all(v == 0 for p in dump.packets for v in p.regs)



# 6.1's panic() itself takes console_sem in console_unblank(), after the
# kmsg dump, and lockdep reports that from NMI context.  Lockdep reports only
# the first bad lock: when it is this one, the dump that ran before it took
# none (netoops's panic path: its own skbs, no netpoll pool lock, no slab).
ALLOW_NMI_PANIC = [r"Kernel panic - not syncing: NMI: Not continuing",
                   r"WARNING: inconsistent lock state"]


def check_nmi_lockdep(console: str) -> None:
    """Any lockdep report is 6.1's own console_unblank() in NMI context."""
    reports = console.split("WARNING: inconsistent lock state")[1:]
    assert len(reports) <= 1
    for report in reports:
        # The reboot may cut the report short: judge what was printed.
        head, _, stack = report.partition("stack backtrace:")
        assert "(console_sem).lock" in head and "IN-NMI" in head, head
        stack = stack.split("</NMI>")[0]
        assert "netoops" not in stack and "netpoll" not in stack, stack
        if "<NMI>" in stack and "Kernel Offset" not in stack:
            assert "console_unblank" in stack, stack
