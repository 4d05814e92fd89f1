# SPDX-License-Identifier: GPL-2.0
"""`make demo`: the design's whole flow, end to end, on this machine.

Builds what is missing, starts netoops-collector on UDP 2004 in a network
namespace of its own, boots a guest that loads netpoll_targets.ko and
netoops.ko (netoops=...), and crashes it with `echo c > /proc/sysrq-trigger`.
Then prints the collector's report of that crash and where it is stored.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

TOP = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(TOP / "tests" / "lib"), str(TOP / "collector"), str(TOP / "qemu")]

from build_progress import run_make  # noqa: E402
from collector_proc import Collector, query  # noqa: E402
from harness import (ALLOW_SYSRQ_PANIC, HOST_MAC, Netns, cache_dir, flavour,  # noqa: E402
                     run_guest)
from netoops_collector.store import default_db_path  # noqa: E402


def main() -> int:
    print("== building the patched kernel, the modules and the initramfs")
    if run_make(TOP, TOP / ".build.log") != 0:
        print(f"make all failed: see {TOP / '.build.log'}")
        return 1
    db = Path(os.environ.get("NETOOPS_DB", default_db_path()))
    db.parent.mkdir(parents=True, exist_ok=True)
    boot_id = int(time.time()) & 0xFFFFFFFF
    with Netns() as ns:
        print(f"== collector listening on UDP 2004 in namespace {ns.name} "
              f"(host side 192.0.2.1), database {db}")
        coll = Collector(ns, db)
        before = {r["id"] for r in coll.wait_dumps(0, 0)}
        print("== guest 192.0.2.2: insmod netpoll_targets.ko; insmod netoops.ko "
              f"netoops=@192.0.2.2/eth0,2004@192.0.2.1/{HOST_MAC}; "
              "echo c > /proc/sysrq-trigger")
        res = run_guest("netoops_crash", ns, timeout=240,
                        allow=ALLOW_SYSRQ_PANIC,
                        args={"hostmac": HOST_MAC, "how": "sysrq",
                              "bootid": str(boot_id), "blob": "make-demo"})
        print(f"== guest {res.status} after {res.duration:.0f}s; console "
              "ends with:")
        print("\n".join("   " + l for l in res.console.splitlines()[-4:]))
        rows = coll.wait_dumps(len(before) + 1, timeout=30)
        coll.stop()
    new = [r for r in rows if r["id"] not in before]
    if res.status != "crash" or res.splats or res.missing:
        print("== FAILED: the guest did not crash cleanly as intended")
        print(res.excerpt())
        return 1
    if not new:
        print("== FAILED: no dump from the guest reached the collector")
        return 1
    dump_id = str(new[-1]["id"])
    print(f"== the collector's report of dump {dump_id}:\n")
    symbols = debug_files()
    shown = query(db, "show", dump_id, "--symbols", str(symbols)).stdout
    head, _, log = shown.partition("\nlog:\n")
    print(head)
    print("\nlog (last 20 lines of "
          f"{len(log.splitlines())}):")
    print("\n".join(log.rstrip("\n").splitlines()[-20:]))
    print(f"\n== stored in {db}; query it with:")
    print(f"   PYTHONPATH=collector {sys.executable} -m netoops_collector "
          f"list|show {dump_id}|groups|stats --db {db}")
    print(f"   (show {dump_id} --symbols {symbols}: the source lines, from the debug kernel)")
    return 0


def debug_files() -> Path:
    """CACHE/symbols/<release>/: the debug kernel's vmlinux and modules, the
    layout `show --symbols` reads."""
    out = cache_dir() / "out" / flavour()
    release = (out / "include" / "config" / "kernel.release").read_text().strip()
    top = cache_dir() / "symbols"
    where = top / release
    where.mkdir(parents=True, exist_ok=True)
    mods = cache_dir() / "mod" / flavour()
    for name, target in [("vmlinux", out / "vmlinux"),
                         *((ko.name, ko) for ko in sorted(mods.glob("*/*.ko"))),
                         *((ko.name, ko) for ko in sorted(mods.glob("tests/kmod/*.ko")))]:
        link = where / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target)
    return top


if __name__ == "__main__":
    sys.exit(main())
