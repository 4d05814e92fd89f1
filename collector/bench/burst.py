# SPDX-License-Identifier: GPL-2.0
"""A rack going down: 1,000 simultaneous dumps into `serve` at default settings.

    /usr/bin/python3 collector/bench/burst.py [--dumps 1000] [--sources 250]

K dumps of ~128 packets, three copies each (interleaved copy by copy, as
the load generator does), from S source addresses on loopback (127.0.1.x,
each address a machine; dump k from address k mod S, its own source port),
sent as fast as one sender process can.  `serve` runs with its defaults
(receive buffer, caps, budgets, receiver).  Reported: dumps stored complete
and exact, packets the kernel dropped, the time from the last packet sent to
the last dump durable (in the packet log or journal) and stored (analysed, in SQLite),
and the collector's peak memory (VmHWM).
"""

from __future__ import annotations

import argparse
import socket
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from load import Burst  # noqa: E402
from run import start_serve, verify  # noqa: E402

from netoops_collector import store  # noqa: E402


def send(burst: Burst, sources: int, to: tuple[str, int]) -> float:
    socks = []
    for k in range(burst.dumps):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind((f"127.0.1.{1 + k % sources}", 0))
        socks.append(s.sendto)
    start = time.perf_counter()
    for k, pkt in burst.schedule:
        socks[k](pkt, to)
    took = time.perf_counter() - start
    return took


def peak_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dumps", type=int, default=1000)
    ap.add_argument("--sources", type=int, default=250)
    ap.add_argument("--serve-arg", action="append", default=[],
                    help="an extra argument for serve (repeatable)")
    args = ap.parse_args()
    burst = Burst(args.dumps)
    with tempfile.TemporaryDirectory(prefix="netoops-burst-") as tmp:
        db = Path(tmp) / "b.sqlite3"
        # --log-journal only logs; everything else is serve's default
        proc, port = start_serve(db, "--log-journal", *args.serve_arg)
        took = send(burst, args.sources, ("127.0.0.1", port))
        sent_at = time.time()
        durable = proc.wait_for(f" {args.dumps} this run;", timeout=600, idle=20)
        done = proc.wait_for("dump ", count=args.dumps, timeout=600, idle=20)
        peak = peak_kib(proc.p.pid)
        proc.stop()
        out = verify(db, burst)
        conn = store.open_readonly(db)
        counters = store.stats(conn)["counters"]
        conn.close()
    print(f"{args.dumps} dumps x ~128 packets x 3 copies from {args.sources} addresses: "
          f"{burst.packets} packets sent in {took:.2f}s ({burst.packets / took:,.0f}/s)")
    print(f"stored complete and exact: {out['complete_exact']} of {args.dumps} "
          f"({out['dumps']} rows); kernel drops {counters.get('kernel_drops', 0)}, "
          f"partial {counters.get('dumps_partial', 0)}")
    if durable:     # before the end: the first copies completed every dump
        print(f"last packet sent to last dump durable (packet log or journal): {durable - sent_at:.2f}s"
              + (" (before the copies were all sent)" if durable < sent_at else ""))
    if done:
        print(f"last packet sent to last dump stored (analysed, in SQLite): "
              f"{done - sent_at:.2f}s")
    else:
        print("not every dump was stored")
    print(f"collector peak memory (VmHWM): {peak / 1024:.0f} MiB")
    return 0 if out["complete_exact"] == args.dumps else 1


if __name__ == "__main__":
    sys.exit(main())
