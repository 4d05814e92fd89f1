# SPDX-License-Identifier: GPL-2.0
"""Capture real crash logs from guests as collector test fixtures.

    /usr/bin/python3 tests/tools/capture_fixtures.py [KIND...]

Boots one debug guest per kind, crashes it with the nto_crash test module
(or sysrq), receives the netoops dump on the host and writes the last lines
of the reassembled log to collector/tests/fixtures/guest/<kind>.txt.  Run it
again after a kernel change that alters oops output; the expectations live
in collector/tests/test_guest_fixtures.py.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

TOP = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(TOP / "tests" / "lib"), str(TOP / "collector")]

from dumps import group  # noqa: E402
from harness import HOST_MAC, Guest, Netns  # noqa: E402

OUT = TOP / "collector" / "tests" / "fixtures" / "guest"
KEEP_LINES = 150

# kind: (nto.how, extra guest args, extra kernel command line)
KINDS = {
    "null_deref": ("null", {}, ""),
    "timer_null_deref": ("timer", {}, ""),
    "gpf": ("gpf", {}, "oops=panic"),
    "bug_on": ("bug", {}, "oops=panic"),
    "warn": ("warn", {"soft": "1"}, ""),
    "soft_lockup": ("lockup", {}, "softlockup_panic=1 watchdog_thresh=1"),
    "sysrq_panic": ("sysrq", {}, ""),
}


def capture(kinds: list[str]) -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    failed = 0
    for i in range(0, len(kinds), 2):
        batch = kinds[i:i + 2]
        with Netns() as ns:
            listener = ns.udp_listener(2004)
            guests = []
            for n, kind in enumerate(batch):
                how, extra, cmdline = KINDS[kind]
                guests.append(Guest(ns, "netoops_crash", index=n, timeout=240,
                                    cmdline=cmdline,
                                    args={"hostmac": HOST_MAC, "how": how,
                                          **extra}).start())
            results = [g.wait() for g in guests]
            dumps = group(listener.payloads())
        for kind, res in zip(batch, results):
            # A guest's dumps carry its boot command line.
            texts = [d.text(allow_missing=True).decode(errors="replace")
                     for d in dumps]
            ours = [t for t in texts
                    if re.search(rf"nto\.how={KINDS[kind][0]}\b", t)]
            if not ours:
                print(f"{kind}: no dump arrived ({res.status})")
                failed += 1
                continue
            text = max(ours, key=len)
            lines = text.splitlines(True)[-KEEP_LINES:]
            (OUT / f"{kind}.txt").write_text("".join(lines))
            print(f"{kind}: {len(lines)} lines from a {res.status} guest")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(capture(sys.argv[1:] or list(KINDS)))
