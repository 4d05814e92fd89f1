#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Benchmark: messages per second through our netconsole and the in-tree one.

One guest (the plain kernel when it is built, else the debug one; FLAVOUR=
overrides) writes the same mix of messages to /dev/kmsg for a fixed time
with no netconsole, then alternately with the in-tree 6.1 netconsole.ko and
with ours (ABBA order), each sending to a basic and an extended target
on the host.  Under TCG the rates follow the load of the host, hence the
repetitions.  Printed:

* every run, and the median rate of each module;
* ours/in-tree: the ratio of the medians, the figure of merit (goal
  >= 0.95), and the median of the ratios of neighbouring runs;
* the ratio for the netconsole part alone, the time per message without
  netconsole (mostly the serial console) being subtracted.

Usage: /usr/bin/python3 tests/bench_netconsole.py [--secs N] [--order ...]
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


def pick_flavour() -> str:
    if os.environ.get("FLAVOUR"):
        return os.environ["FLAVOUR"]
    plain = cache_dir() / "out" / "plain" / "arch/x86/boot/bzImage"
    return "plain" if plain.exists() else "debug"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--secs", type=int, default=2,
                    help="seconds of writing per run")
    ap.add_argument("--order", default="none " + "ref ours ours ref " * 3,
                    help="runs, in order, each one of none, ref and ours")
    args = ap.parse_args()

    flavour = pick_flavour()
    env = dict(os.environ, FLAVOUR=flavour)
    build = subprocess.run(["make", "-s", "initramfs"], cwd=TOP, env=env,
                           capture_output=True, text=True)
    if build.returncode:
        print(build.stdout + build.stderr, file=sys.stderr)
        return 1

    with Netns() as ns:
        sinks = [ns.udp_listener(6801), ns.udp_listener(6802)]
        runs = len(args.order.split())
        res = run_guest("nc_bench", ns, timeout=120 + 10 * runs * args.secs,
                        kernel_flavour=flavour,
                        args={"hostmac": HOST_MAC, "secs": str(args.secs),
                              "order": args.order.replace(" ", "+")})
        received = [len(s.packets()) for s in sinks]
    if not res.ok():
        print(res.excerpt(), file=sys.stderr)
        return 1

    runs: dict[str, list[float]] = {}
    print(f"flavour {flavour}, {args.secs} s per run, message mix "
          "3 short / 1 medium / 1 long, 1 basic + 1 extended target")
    for line in res.values("rate"):
        who, count, centis, packets = line.split()
        rate = int(count) / (int(centis) / 100.0)
        runs.setdefault(who, []).append(rate)
        print(f"  {who:5s} {rate:9.1f} msg/s  ({count} messages, "
              f"{int(packets) / max(int(count), 1):.2f} datagrams each)")
    rates = {who: statistics.median(v) for who, v in runs.items()}
    print(f"  datagrams received on the host: {sum(received)}")
    for who, rate in rates.items():
        print(f"  median {who:5s} {rate:9.1f} msg/s over {len(runs[who])} "
              f"runs (min {min(runs[who]):.1f}, max {max(runs[who]):.1f})")
    if "ref" in rates and "ours" in rates:
        pairs = [o / r for r, o in zip(runs["ref"], runs["ours"])]
        print(f"ratio ours/in-tree: {rates['ours'] / rates['ref']:.3f} "
              f"(medians); {statistics.median(pairs):.3f} (median of "
              f"{len(pairs)} neighbouring pairs)")
        if "none" in rates:
            base = 1.0 / rates["none"]
            ref = 1.0 / rates["ref"] - base
            ours = 1.0 / rates["ours"] - base
            if ref > 0 and ours > 0:
                print(f"netconsole cost per message: in-tree {ref * 1e6:.0f} us,"
                      f" ours {ours * 1e6:.0f} us, ratio (in-tree/ours) "
                      f"{ref / ours:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
