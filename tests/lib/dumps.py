# SPDX-License-Identifier: GPL-2.0
"""Group raw netoops packets into dumps and check them, for the guest tests."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

from netoops_collector import proto


@dataclass
class RawDump:
    dump_id: int
    packets: list[proto.Packet] = field(default_factory=list)

    @property
    def count(self) -> int:
        return self.packets[0].packet_count

    def copies(self) -> dict[int, int]:
        seen: dict[int, int] = defaultdict(int)
        for p in self.packets:
            seen[p.packet_no] += 1
        return dict(seen)

    def chunk(self, no: int) -> bytes:
        for p in self.packets:
            if p.packet_no == no:
                return p.data
        raise AssertionError(f"dump {self.dump_id}: chunk {no} never arrived")

    def text(self, allow_missing: bool = False) -> bytes:
        """Chunks from the oldest (packet_count-1) to the newest (0)."""
        have = {p.packet_no for p in self.packets}
        raw = b"".join(self.chunk(no) for no in range(self.count - 1, -1, -1)
                       if not allow_missing or no in have)
        return raw.rstrip(b"\0")

    def same(self, attr: str) -> object:
        values = {getattr(p, attr) for p in self.packets}
        assert len(values) == 1, f"{attr} differs between packets: {values}"
        return values.pop()

    def assert_complete(self, copies: int = proto.RETRANSMIT_COUNT) -> None:
        want = {no: copies for no in range(self.count)}
        assert self.copies() == want, f"dump {self.dump_id}: {self.copies()}"
        for attr in ("packet_count", "type", "boot_id", "kernel_version",
                     "user_blob", "regs", "x86_vendor", "x86_family"):
            self.same(attr)


def group(payloads: list[bytes]) -> list[RawDump]:
    """Decode every payload (all must be valid) and group by dump_id."""
    dumps: dict[int, RawDump] = {}
    for raw in payloads:
        p = proto.decode(raw)
        dumps.setdefault(p.dump_id, RawDump(p.dump_id)).packets.append(p)
    return list(dumps.values())


def console_rip(console: str, func: str) -> int:
    """The RIP the console printed for an oops in ``func`` of nto_crash."""
    base = re.search(rf"{func}=([0-9a-f]{{16}})", console)
    off = re.search(rf"RIP: 0010:{func}\+0x([0-9a-f]+)/0x[0-9a-f]+", console)
    assert base and off, "console lacks the function address or the RIP line"
    return int(base.group(1), 16) + int(off.group(1), 16)


_REG_RE = re.compile(r"\b(R[A-Z0-9]{1,2}|RSP): (?:0018:)?([0-9a-f]{16})\b")


_STAMP_RE = re.compile(r"^(?:<\d+>)?\[\s*(\d+\.\d+)\]")


def console_regs(console: str, func: str) -> dict[str, int]:
    """The registers the console printed for the first oops in ``func``.

    The lines after ``RIP: 0010:func+...`` up to ``CR2:`` are read for
    ``REG: value`` pairs.  Another CPU's output can fall in between: its
    KASAN report, or the "executive summary" that oops_end() prints of the
    first oops once it has let go of the die lock, registers and all.  So
    a register line counts only if it has the RIP line's timestamp (a CPU
    prints its oops with interrupts off: one timestamp for the block),
    unless no line does.
    """
    lines = console.splitlines()
    start = next(i for i, l in enumerate(lines) if f"RIP: 0010:{func}+" in l)
    m = _STAMP_RE.match(lines[start])
    stamp = m.group(1) if m else None
    window = []
    for line in lines[start + 1:start + 60]:
        if f"RIP: 0010:{func}+" in line:
            break
        window.append(line)
        if "CR2: " in line and (stamp is None or stamp in line):
            break
    own = [l for l in window
           if stamp is not None and (m := _STAMP_RE.match(l)) and m.group(1) == stamp]
    regs: dict[str, int] = {}
    for line in own if any(_REG_RE.search(l) for l in own) else window:
        for name, value in _REG_RE.findall(line):
            # R08 on the console is r8 in struct pt_regs
            regs.setdefault(re.sub(r"^r0(\d)$", r"r\1", name.lower()), int(value, 16))
    return regs
