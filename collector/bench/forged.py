# SPDX-License-Identifier: GPL-2.0
"""What one forged datagram costs the collector, against one real datagram.

    /usr/bin/python3 collector/bench/forged.py [--n 20000]

Both go through the server's own pipeline in process (reassembly, the
finalisation of the dump, analysis, the junk cap, the SQLite commit), with a
simulated clock, so the figure is CPU per datagram, not network.

* real: dumps of 128 chunks, three copies each (what the kernel sends);
* forged: datagrams that each claim a new dump of 4,096 chunks, from one
  address on many ports.  Measured twice: with the per-address limit on new
  dumps lifted, so each one starts a dump that is then finalised (by the
  caps or the quiet timeout) and goes through the budgets (the worst case,
  what spoofed addresses cost); and at default settings, where all but the
  first 1,024 are turned away as rejected_rate.

The target (issue "collector, part 1") is a ratio forged/real of at most 10.
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from netoops_collector import gen, proto  # noqa: E402
from netoops_collector.reassembly import Limits  # noqa: E402
from netoops_collector.server import ServeConfig, Server  # noqa: E402


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def run(stream: list[tuple[bytes, str, int]], limits: Limits | None = None) -> float:
    """Seconds of CPU per datagram to take ``stream`` all the way to the database."""
    with tempfile.TemporaryDirectory() as tmp:
        clock = Clock()
        cfg = ServeConfig(db=Path(tmp) / "b.sqlite3", limits=limits or Limits())
        srv = Server(cfg, err=io.StringIO(), clock=clock)
        start = time.process_time()
        for i, (buf, src, port) in enumerate(stream):
            srv._ready.extend(srv.reasm.feed(buf, src, port, clock.t))
            if i % 512 == 511:
                clock.t += 0.01
                srv._ready.extend(srv.reasm.expire(clock.t))
                srv._store(everything=True)
        clock.t += 1000
        srv._ready.extend(srv.reasm.expire(clock.t))
        srv._ready.extend(srv.reasm.flush(clock.t))
        srv._store(everything=True)
        spent = time.process_time() - start
        srv.close()
    return spent / len(stream)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=20000, help="datagrams of each kind")
    args = ap.parse_args()
    dumps = max(1, args.n // (128 * 3))
    real = [(p, f"192.0.2.{1 + i % 200}", 6666) for i in range(dumps)
            for p in gen.dump_packets(gen.filler(128 * 1024 - 512, seed=i)
                                      + b"BUG: kernel NULL pointer dereference\n",
                                      copies=3, boot_id=i, dump_id=1)]
    forged = [(proto.encode(packet_count=4096, packet_no=i % 4096, boot_id=i, dump_id=i),
               "198.51.100.7", 1024 + i % 60000) for i in range(args.n)]
    r = run(real)
    f = run(forged, Limits(max_new_dumps_per_source=1 << 30))
    d = run(forged)
    print(f"real datagram:   {r * 1e6:8.1f} us ({len(real)} datagrams, {dumps} dumps)")
    print(f"forged datagram: {f * 1e6:8.1f} us ({len(forged)} datagrams, each claiming "
          "4096 chunks, each starting a dump)")
    print(f"forged, default: {d * 1e6:8.1f} us (all but 1,024 turned away as rejected_rate)")
    print(f"ratio forged/real: {f / r:.2f} (target: at most 10); at default settings "
          f"{d / r:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
