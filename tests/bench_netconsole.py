#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Benchmark: what netconsole costs per message, ours against the in-tree one.

One guest with one CPU (so that printk writes to every console before it
returns) loads tests/kmod/nto_flood.ko, which prints rounds of five
messages (three short, 200 and 900 characters) as fast as printk goes and
times them in the kernel.  Runs, in ABBA order: no netconsole, the in-tree
6.1 netconsole.ko, ours, and ours with upstream's later features on
("oursx": the release in front, two userdata entries and the four sysdata
fields on its extended targets), each with four targets on the host (two
basic, two extended).  The plain kernel is used when it is built, else
the debug one (FLAVOUR= overrides).

Printed: each run; then per mode the median time per message, and
netconsole's cost per message (that minus the run without netconsole,
mostly the serial console); the figure of merit is the ratio of the
costs, ours / in-tree (goal <= 1.05).

Usage: /usr/bin/python3 tests/bench_netconsole.py [--rounds N] [--order ...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

TOP = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TOP / "tests" / "lib"))

from harness import HOST_MAC, Netns, cache_dir, run_guest  # noqa: E402

PORTS = (6801, 6802, 6803, 6804)


def pick_flavour() -> str:
    if os.environ.get("FLAVOUR"):
        return os.environ["FLAVOUR"]
    plain = cache_dir() / "out" / "plain" / "arch/x86/boot/bzImage"
    return "plain" if plain.exists() else "debug"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=400,
                    help="rounds of five messages per run")
    ap.add_argument("--order", default="none ref ours oursx none oursx ours ref " * 3 + "none",
                    help="runs, in order, each one of none, ref, ours and oursx")
    args = ap.parse_args()

    flavour = pick_flavour()
    env = dict(os.environ, FLAVOUR=flavour)
    build = subprocess.run(["make", "-s", "initramfs"], cwd=TOP, env=env,
                           capture_output=True, text=True)
    if build.returncode:
        print(build.stdout + build.stderr, file=sys.stderr)
        return 1

    with Netns() as ns:
        sinks = [ns.udp_listener(port) for port in PORTS]
        runs = len(args.order.split())
        res = run_guest("nc_bench", ns, timeout=180 + 30 * runs, kernel_flavour=flavour,
                        smp=1,
                        args={"hostmac": HOST_MAC, "rounds": str(args.rounds),
                              "order": args.order.replace(" ", "+")})
        received = [len(s.packets()) for s in sinks]
    if not res.ok():
        print(res.excerpt(), file=sys.stderr)
        return 1

    per: dict[str, list[float]] = {}
    print(f"flavour {flavour}, one CPU, {args.rounds} rounds of 5 messages a run "
          "(3 short, 200 and 900 characters), 2 basic + 2 extended targets")
    for line in res.values("rate"):
        who, count, ns_total, packets = line.split()
        us = int(ns_total) / int(count) / 1000
        per.setdefault(who, []).append(us)
        print(f"  {who:5s} {us:8.2f} us/message  ({count} messages, {packets} datagrams)")
    print(f"  datagrams received on the host: {sum(received)}")
    med = {who: statistics.median(v) for who, v in per.items()}
    for who, us in med.items():
        print(f"  median {who:5s} {us:8.2f} us/message over {len(per[who])} runs "
              f"(min {min(per[who]):.2f}, max {max(per[who]):.2f})")
    if "none" in med:
        cost = {who: us - med["none"] for who, us in med.items() if who != "none"}
        print("netconsole's cost per message (minus the run without it): " + ", ".join(
            f"{who} {c:.2f} us" for who, c in cost.items()))
        if cost.get("ref", 0) > 0:
            for who in ("ours", "oursx"):
                if who in cost:
                    print(f"ratio {who}/in-tree: {cost[who] / cost['ref']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
