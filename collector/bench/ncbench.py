# SPDX-License-Identifier: GPL-2.0
"""Netconsole reception against netconsd: the highest steady rate each
takes with zero loss, on this machine, fed by the same sender.  Not a
test; prints the figures.

    /usr/bin/python3 collector/bench/ncbench.py [--seconds 5] [--sources 8]

netconsd (facebook/netconsd, C: a recvmmsg listener thread and worker
threads) is built from source (--netconsd-src DIR, else a clone in
~/.cache/netoops/netconsd-src) with an output module that only counts
(ncd_count.c).  Its socket gets the same receive buffer as serve's
default (SO_RCVBUFFORCE through pidfd_getfd: netconsd keeps the system
default).  `netoops-collector serve` runs at its defaults but for the
addresses, and stores every line in SQLite: its count is what the
database holds.  ncblast.c sends extended records (with sysdata lines)
from --sources addresses on loopback, at each rate for --seconds; every
trial starts a fresh receiver.  A trial's messages/s is what it received
over the time from the first record sent to the last one counted.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
COLLECTOR = HERE.parent
PYTHON = "/usr/bin/python3"
RCVBUF = 32 << 20           # serve's default (server.DEFAULT_RCVBUF)
NETCONSD_GIT = "https://github.com/facebook/netconsd"


def build(tmp: Path, src: Path) -> tuple[Path, Path, Path]:
    blast, count = tmp / "ncblast", tmp / "ncd_count.so"
    subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(blast),
                    str(HERE / "ncblast.c")], check=True)
    subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-o",
                    str(count), str(HERE / "ncd_count.c"), "-lpthread"], check=True)
    if not (src / "Makefile").exists():
        subprocess.run(["git", "clone", "--depth", "1", NETCONSD_GIT, str(src)], check=True)
    subprocess.run(["make", "-s", "-C", str(src), "netconsd"], check=True)
    return blast, count, src / "netconsd"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def raise_rcvbuf(pid: int, size: int) -> int:
    """Give every UDP socket of ``pid`` a ``size`` receive buffer; what it got."""
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = os.pidfd_open(pid)
    got = 0
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if not os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"):
                    continue
            except OSError:
                continue
            mine = libc.syscall(438, pidfd, int(fd), 0)     # pidfd_getfd
            if mine < 0:
                raise OSError(ctypes.get_errno(), "pidfd_getfd")
            s = socket.socket(fileno=mine)
            try:
                if s.type == socket.SOCK_DGRAM:
                    s.setsockopt(socket.SOL_SOCKET, 33, size)   # SO_RCVBUFFORCE
                    got = s.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
            finally:
                s.close()
    finally:
        os.close(pidfd)
    return got


def settle(count: Callable[[], int], total: int, quiet: float = 2.0,
           limit: float = 120.0) -> tuple[int, float]:
    """Poll ``count`` until it reaches ``total`` or stops moving for ``quiet``
    seconds; the count and the time it last moved."""
    n, moved = count(), time.time()
    end = time.monotonic() + limit
    while n < total and time.monotonic() < end:
        time.sleep(0.05)
        m = count()
        if m != n:
            n, moved = m, time.time()
        elif time.time() - moved > quiet:
            break
    return n, moved


def blast_into(blast: Path, port: int, sources: int, n: int, rate: int,
               count: Callable[[], int], rcvbuf: int) -> dict[str, Any]:
    """Send ``n`` records at ``rate`` to ``port``; what ``count`` says arrived."""
    start = time.time()
    sent = subprocess.run([str(blast), str(port), str(sources), str(n), str(rate)],
                          capture_output=True, text=True, check=True).stdout.strip()
    got, last = settle(count, n)
    return {"received": got, "lost": n - got, "pps": got / max(last - start, 1e-9),
            "sent": sent, "rcvbuf": rcvbuf}


def trial_netconsd(exe: Path, module: Path, blast: Path, rate: int, n: int,
                   sources: int) -> dict[str, Any]:
    port = free_port()
    proc = subprocess.Popen([str(exe), "-a", "127.0.0.1", "-u", str(port), str(module)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)
        rcvbuf = raise_rcvbuf(proc.pid, RCVBUF)
        lines: list[str] = []
        os.set_blocking(proc.stderr.fileno(), False)   # type: ignore[union-attr]

        def count() -> int:
            try:
                chunk = proc.stderr.read()      # type: ignore[union-attr]
            except (BlockingIOError, TypeError):
                chunk = None
            if chunk:
                lines.extend(chunk.splitlines())
            got = [int(m.group(1)) for m in (re.match(r"count (\d+) last", ln) for ln in lines)
                   if m]
            return got[-1] if got else 0
        return blast_into(blast, port, sources, n, rate, count, rcvbuf)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def trial_serve(tmp: Path, blast: Path, rate: int, n: int, sources: int) -> dict[str, Any]:
    db = tmp / f"nc-{time.monotonic_ns()}.sqlite3"
    env = dict(os.environ, PYTHONPATH=str(COLLECTOR))
    proc = subprocess.Popen([PYTHON, "-m", "netoops_collector", "--db", str(db), "serve",
                             "--listen", "127.0.0.1:0", "--netconsole-listen", "127.0.0.1:0"],
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        port = 0
        assert proc.stderr is not None
        for line in proc.stderr:
            m = re.search(r"netconsole: listening on 127\.0\.0\.1:(\d+) .*receive buffer (\d+)",
                          line)
            if m:
                port, rcvbuf = int(m.group(1)), int(m.group(2))
                break
        if not port:
            raise RuntimeError("serve did not listen for netconsole")

        def count() -> int:
            try:
                conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
                try:
                    return int(conn.execute("SELECT COUNT(*) FROM nc_lines").fetchone()[0])
                finally:
                    conn.close()
            except sqlite3.Error:
                return 0
        return blast_into(blast, port, sources, n, rate, count, rcvbuf)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=5.0, help="sending time per trial")
    ap.add_argument("--sources", type=int, default=8, help="sending addresses")
    ap.add_argument("--rates", default="25000,50000,100000,150000,200000,300000",
                    help="records a second, comma-separated, ascending")
    ap.add_argument("--netconsd-src", type=Path,
                    default=Path(os.environ.get("NETCONSD_SRC") or
                                 Path.home() / ".cache" / "netoops" / "netconsd-src"))
    args = ap.parse_args()

    def log(msg: str) -> None:
        print(msg, flush=True)

    with tempfile.TemporaryDirectory(prefix="netoops-ncbench-") as name:
        tmp = Path(name)
        blast, module, netconsd = build(tmp, args.netconsd_src)
        best = {"netconsd": 0, "serve": 0}
        rows: list[tuple[int, dict[str, Any], dict[str, Any]]] = []
        for rate in (int(r) for r in args.rates.split(",")):
            n = int(rate * args.seconds)
            a = trial_netconsd(netconsd, module, blast, rate, n, args.sources)
            b = trial_serve(tmp, blast, rate, n, args.sources)
            rows.append((rate, a, b))
            log(f"{rate:8,d}/s x {args.seconds:g}s = {n:9,d}: netconsd lost {a['lost']:8,d} "
                f"({a['pps']:9,.0f}/s), serve lost {b['lost']:8,d} ({b['pps']:9,.0f}/s); "
                f"sender: {a['sent']} / {b['sent']}")
    for who, i in (("netconsd", 1), ("serve", 2)):
        for row in rows:                # up to the first rate that lost some
            if row[i]["lost"]:
                break
            best[who] = row[0]
    log("")
    log("== netconsole reception: netconsd vs netoops-collector serve ==")
    log(f"receive buffer: {rows[0][1]['rcvbuf']} bytes for both")
    log(f"highest steady rate with zero loss: netconsd {best['netconsd']:,}/s, "
        f"serve {best['serve']:,}/s (into SQLite)")
    if best["netconsd"]:
        log(f"ratio serve/netconsd: {best['serve'] / best['netconsd']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
