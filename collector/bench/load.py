# SPDX-License-Identifier: GPL-2.0
"""Load generator: a burst of K simultaneous netoops dumps over loopback.

Dump k comes from its own UDP socket (its own source port, as K machines
would), with boot_id 1000+k (or first_boot+k); each is a ~128 KiB log ending in a realistic
6.1 oops (the test fixtures, in turn), so about 128 packets, sent three
times like the kernel does.  The K dumps are interleaved packet by packet:
copy 1 of every dump, then copy 2, then copy 3.

    python3 collector/bench/load.py --to 127.0.0.1:2004 --dumps 32
"""

from __future__ import annotations

import argparse
import socket
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from netoops_collector import gen, proto  # noqa: E402

FIXTURES = HERE.parent / "tests" / "fixtures"
CRASHES = ("null_deref_panic.txt", "gpf.txt", "bug_on.txt", "soft_lockup.txt",
           "sysrq_panic.txt", "timer_null_deref.txt", "gpf_kasan.txt")


class Burst:
    """K dumps, prebuilt, and the order their datagrams go out in."""

    def __init__(self, dumps: int, chunks: int = 128, copies: int = proto.RETRANSMIT_COUNT,
                 first_boot: int = 1000):
        self.dumps = dumps
        self.logs: dict[int, bytes] = {}
        per_dump: list[list[bytes]] = []
        for k in range(dumps):
            crash = (FIXTURES / CRASHES[k % len(CRASHES)]).read_bytes()
            log = gen.crash_log(crash, chunks * proto.DATA_BYTES - 100, seed=k)
            boot = first_boot + k
            self.logs[boot] = log
            per_dump.append(proto.encode_dump(log, boot_id=boot, dump_id=k & 0xffff,
                                              kernel_version="6.1.0-netoops",
                                              regs=gen.SAMPLE_REGS))
        # copy by copy, packet_no by packet_no, dump by dump
        self.schedule: list[tuple[int, bytes]] = [
            (k, per_dump[k][no])
            for _ in range(copies)
            for no in range(max(len(p) for p in per_dump))
            for k in range(dumps) if no < len(per_dump[k])]

    @property
    def packets(self) -> int:
        return len(self.schedule)

    def send(self, to: tuple[str, int]) -> float:
        """Send the whole burst as fast as possible; returns the seconds it took."""
        socks = []
        for _ in range(self.dumps):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        senders = [s.sendto for s in socks]
        try:
            start = time.perf_counter()
            for k, pkt in self.schedule:
                senders[k](pkt, to)
            return time.perf_counter() - start
        finally:
            for s in socks:
                s.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--to", default="127.0.0.1:2004", metavar="HOST:PORT")
    ap.add_argument("--dumps", type=int, default=16)
    ap.add_argument("--chunks", type=int, default=128)
    args = ap.parse_args()
    host, _, port = args.to.rpartition(":")
    burst = Burst(args.dumps, args.chunks)
    took = burst.send((host, int(port)))
    print(f"sent {burst.packets} packets ({args.dumps} dumps) in {took:.3f}s, "
          f"{burst.packets / took:,.0f} packets/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
