# SPDX-License-Identifier: GPL-2.0
"""Build and send netoops dumps: for the tests, the benchmark and demos.

    python3 -m netoops_collector.gen --to 127.0.0.1:2004 --log oops.txt

sends the log as one dump, three copies, the way the kernel does.
"""

from __future__ import annotations

import argparse
import random
import socket
import sys
import time
from typing import Sequence

from . import proto

SAMPLE_REGS: dict[str, int] = {
    "r15": 0xffffffffc000a040, "r14": 0, "r13": 0xffffc900001e7e60,
    "r12": 0xffff888003a30b40, "rbp": 0xffffffffc0008000, "rbx": 0,
    "r11": 0xffffffff8275f4e8, "r10": 3, "r9": 0xffffc900001e7b20, "r8": 0,
    "rax": 0, "rcx": 0, "rdx": 0, "rsi": 0xffffffff82063f40, "rdi": 0,
    "orig_rax": 0xffffffffffffffff, "rip": 0xffffffffc0005009, "cs": 0x10,
    "eflags": 0x10246, "rsp": 0xffffc900001e7c70, "ss": 0x18,
}


def filler(size: int, start: float = 0.0, seed: int = 0) -> bytes:
    """About ``size`` bytes of plausible boot log lines."""
    rnd = random.Random(seed)
    words = ("virtio_net", "eth0", "pci", "0000:00:03.0", "ACPI", "usb", "clocksource",
             "tsc", "EXT4-fs", "systemd[1]", "random:", "audit:", "NET:", "Registered")
    out: list[bytes] = []
    n = 0
    t = start
    while n < size:
        t += rnd.random() * 0.01
        line = f"[{t:12.6f}] " + " ".join(rnd.choice(words) for _ in range(rnd.randint(3, 12)))
        raw = line.encode() + b"\n"
        out.append(raw)
        n += len(raw)
    return b"".join(out)[:size]


def crash_log(crash: str | bytes, size: int, seed: int = 0) -> bytes:
    """A log of about ``size`` bytes that ends with ``crash``."""
    tail = crash.encode() if isinstance(crash, str) else crash
    head = filler(max(0, size - len(tail)), seed=seed)
    if head and not head.endswith(b"\n"):
        head = head[:head.rfind(b"\n") + 1]
    return head + tail


def dump_packets(log: bytes, copies: int = proto.RETRANSMIT_COUNT,
                 **header: object) -> list[bytes]:
    """Every datagram of a dump, in send order: ``copies`` whole copies."""
    header.setdefault("regs", SAMPLE_REGS)
    header.setdefault("kernel_version", "6.1.0-netoops")
    one = proto.encode_dump(log, **header)
    return one * copies


def send(packets: Sequence[bytes], to: tuple[str, int], sock: socket.socket | None = None,
         gap: float = 0.0) -> None:
    own = sock is None
    if sock is None:
        family = socket.AF_INET6 if ":" in to[0] else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_DGRAM)
    try:
        for pkt in packets:
            sock.sendto(pkt, to)
            if gap:
                time.sleep(gap)
    finally:
        if own:
            sock.close()


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m netoops_collector.gen",
                                 description="send a log as a netoops dump")
    ap.add_argument("--to", required=True, metavar="HOST:PORT")
    ap.add_argument("--log", help="log text file (default: a generated boot log)")
    ap.add_argument("--size", type=int, default=16384, help="generated log size")
    ap.add_argument("--boot-id", type=int, default=1)
    ap.add_argument("--dump-id", type=int, default=int(time.time()) & 0xffff)
    ap.add_argument("--soft", action="store_true", help="send a soft dump (type 3)")
    ap.add_argument("--kernel", default="6.1.0-netoops")
    ap.add_argument("--blob", default="")
    ap.add_argument("--copies", type=int, default=proto.RETRANSMIT_COUNT)
    args = ap.parse_args(argv)
    host, _, port = args.to.rpartition(":")
    host = host.strip("[]")
    log = open(args.log, "rb").read() if args.log else filler(args.size)
    pkts = dump_packets(log, copies=args.copies, boot_id=args.boot_id, dump_id=args.dump_id,
                        type=proto.TYPE_SOFT if args.soft else proto.TYPE_OOPS,
                        kernel_version=args.kernel, user_blob=args.blob)
    send(pkts, (host, int(port)))
    print(f"sent {len(pkts)} packets ({len(pkts) // max(1, args.copies)} per copy)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
