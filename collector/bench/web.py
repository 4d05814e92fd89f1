# SPDX-License-Identifier: GPL-2.0
"""Dashboard page load times on a database of 10,000 dumps.  Not a test;
prints the figures.

    /usr/bin/python3 collector/bench/web.py [--dumps 10000] [--repeat 20]
                                            [--backend sqlite|postgresql|both]

The database: --dumps dumps over 30 days from 300 hosts (198.18.0.0/15,
the benchmarking range) and 12 kernel versions, of 63 crash variants
(the fixtures' crashes with their module renamed 9 ways), stored through
the collector's own Store.  `netoops-collector web` (waitress) serves it;
each page is fetched --repeat times after one warm-up, over HTTP on
loopback (time to the last byte) and in headless chromium through
chromium-driver (navigation start to the load event, from the browser's
Navigation Timing).  Medians are reported.
"""

from __future__ import annotations

import argparse
import dataclasses
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
COLLECTOR = HERE.parent
sys.path.insert(0, str(COLLECTOR))

from netoops_collector import gen, proto, store  # noqa: E402
from netoops_collector.reassembly import Dump  # noqa: E402
from netoops_collector.report import analyse  # noqa: E402

PYTHON = "/usr/bin/python3"
FIXTURES = COLLECTOR / "tests" / "fixtures"
CRASHES = ("null_deref_panic.txt", "gpf.txt", "bug_on.txt", "soft_lockup.txt",
           "sysrq_panic.txt", "timer_null_deref.txt", "warn.txt")
KERNELS = [f"6.1.0-{n}-amd64" for n in range(17, 29)]


def build(db: Path | str, dumps: int) -> None:
    st = store.Store(db)
    variants = []
    for name in CRASHES:
        crash = (FIXTURES / name).read_text()
        for j in range(9):
            text = crash.replace("nto_crash", f"drv{j}_crash")
            log = gen.crash_log(text, 4096, seed=j).decode()
            variants.append((log, analyse(log)))
    now = time.time()
    span = 30 * 86400
    batch: list[tuple[Dump, Any, None]] = []
    for i in range(dumps):
        # a few crashes are common, most are rare; later kernels see more
        v = variants[min(int(len(variants) * (i * 7919 % dumps / dumps) ** 2.5),
                         len(variants) - 1)]
        host = 18 * 65536 + (i * 37) % 300
        when = now - span + span * ((i * 104729) % dumps) / dumps
        count = len(proto.split_log(v[0].encode()))
        d = Dump(uid=i, revision=0, source=f"198.{host >> 16}.{(host >> 8) & 255}.{host & 255}",
                 port=6666, boot_id=i, dump_id=1, type=proto.TYPE_OOPS,
                 kernel_version=KERNELS[(i * 13) % len(KERNELS)], user_blob="",
                 x86_vendor=0, x86_family=6, x86_model=85, x86_stepping=7,
                 regs={r: gen.SAMPLE_REGS[r] for r in proto.REG_NAMES},
                 packet_count=count, packets_received=count, missing=[], log=v[0],
                 first_packet=when - 1, finalised=when, finalised_by="complete")
        batch.append((d, dataclasses.replace(v[1]), None))
        if len(batch) == 500:
            st.save(batch)
            batch = []
    if batch:
        st.save(batch)
    st.close()


def fetch(url: str) -> float:
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as res:
        res.read()
    return time.perf_counter() - t0


def browser_times(pages: dict[str, str], repeat: int) -> dict[str, float]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    with tempfile.TemporaryDirectory(prefix="netoops-chromium-") as profile:
        for arg in ("--headless=new", "--no-sandbox", "--disable-gpu",
                    "--disable-dev-shm-usage", "--window-size=1280,900",
                    f"--user-data-dir={profile}", "--no-first-run"):
            opts.add_argument(arg)
        driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
        out = {}
        try:
            for name, url in pages.items():
                times = []
                for k in range(repeat + 1):
                    driver.get(url)
                    ms = driver.execute_script(
                        "const n = performance.getEntriesByType('navigation')[0];"
                        "return n.loadEventEnd - n.startTime;")
                    if k:
                        times.append(float(ms))
                out[name] = statistics.median(times)
        finally:
            driver.quit()
    return out


def measure(db: Path | str, dumps: int, repeat: int) -> None:
    t0 = time.perf_counter()
    build(db, dumps)
    size = f", {db.stat().st_size >> 20} MiB" if isinstance(db, Path) else ""
    print(f"database {store.display(db)}: {dumps} dumps stored in "
          f"{time.perf_counter() - t0:.1f} s{size}", flush=True)
    proc = subprocess.Popen([PYTHON, "-m", "netoops_collector", "--db", str(db), "web",
                             "--listen", "127.0.0.1:0"], stderr=subprocess.PIPE,
                            text=True, env={"PYTHONPATH": str(COLLECTOR)})
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        base = line.rsplit(" on ", 1)[1].strip()
        conn = store.open_readonly(db)
        top = conn.execute("SELECT signature FROM dumps GROUP BY 1 ORDER BY COUNT(*) DESC "
                           "LIMIT 1").fetchone()[0]
        groups = conn.execute("SELECT COUNT(DISTINCT signature) FROM dumps").fetchone()[0]
        big = conn.execute("SELECT COUNT(*) FROM dumps WHERE signature = ?",
                           (top,)).fetchone()[0]
        last = conn.execute("SELECT MAX(id) FROM dumps").fetchone()[0]
        conn.close()
        pages = {
            f"groups ({groups} groups)": base,
            "groups, one host, last 7 days": base + "?host=198.18.0.7&since=7d",
            f"largest group ({big} dumps)": f"{base}group/{top}",
            "a dump": f"{base}dump/{last}",
            "groups.json": base + "groups.json",
            "dump JSON": f"{base}dump/{last}.json",
        }
        print(f"HTTP, time to last byte, median of {repeat}:")
        for name, url in pages.items():
            fetch(url)
            ms = statistics.median(fetch(url) for _ in range(repeat)) * 1e3
            print(f"  {name:34s} {ms:8.1f} ms", flush=True)
        html = {k: v for k, v in pages.items() if "json" not in k.lower()}
        print(f"headless chromium, navigation start to load event, median of {repeat}:")
        for name, ms in browser_times(html, repeat).items():
            print(f"  {name:34s} {ms:8.1f} ms", flush=True)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)


def main() -> int:
    ap = argparse.ArgumentParser(description="dashboard page load times")
    ap.add_argument("--dumps", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="both",
                    help="PostgreSQL: a private server, as the tests start it")
    args = ap.parse_args()
    if args.backend in ("sqlite", "both"):
        with tempfile.TemporaryDirectory(prefix="netoops-web-bench-") as tmp:
            measure(Path(tmp) / "fleet.sqlite3", args.dumps, args.repeat)
    if args.backend in ("postgresql", "both"):
        sys.path.insert(0, str(COLLECTOR / "tests"))
        from pgserver import Server
        with Server() as pg:
            measure(pg.database(), args.dumps, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
