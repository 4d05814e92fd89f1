# SPDX-License-Identifier: GPL-2.0
"""Collector benchmark: throughput against a C recvmmsg sink, and the largest
burst absorbed with zero loss.  Not a test; prints the figures.

    /usr/bin/python3 collector/bench/run.py [--dumps 64] [--repeat 3]

Throughput.  The receiver (the C sink, or `netoops-collector serve` with a
256 MiB receive buffer) is stopped with SIGSTOP, a burst of --dumps dumps
(~128 packets x 3 copies each, interleaved, one source port per dump) is
sent into its socket buffer, and it is resumed with SIGCONT.  Packets/s is
the burst size over the time from SIGCONT until the sink has counted the last
packet, or, for the collector, until it has read every packet and made the
last dump durable (reassembled, and synced to its journal or, for a dump
the C receiver took whole, to its packet log).  Both ends are
taken by the receiver's own clock, as the sink's are: the time in its
`--log-journal` line for the last dump, and the "last datagram read at" of
its counters line.  The time until the last dump is analysed and
committed to SQLite (its "dump" line) is reported beside it.  Each receiver
first takes one burst of other dumps untimed (a warm process: its ring
and buffers have been touched once, as a serving collector's have).  Zero
loss is checked in the database: the persisted packet counter equals what
was sent and every dump is stored complete with exactly the log that was
sent.

Burst.  `serve` runs as it would by default (receive buffer, receiver, caps)
and bursts of K dumps are sent flat out by one Python process; K
doubles until packets are lost, then is bisected.  Reported: the largest K
with no packet lost, and whether larger bursts still completed every dump
thanks to the three copies.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
COLLECTOR = HERE.parent
sys.path.insert(0, str(COLLECTOR))
sys.path.insert(0, str(HERE))

from load import Burst  # noqa: E402

from netoops_collector import store  # noqa: E402

PYTHON = "/usr/bin/python3"
BIG_RCVBUF = 256 << 20


class Proc:
    """A subprocess whose output lines are timestamped as they are read."""

    def __init__(self, cmd: list[str], stream: str = "stderr") -> None:
        env = dict(os.environ, PYTHONPATH=str(COLLECTOR))
        kw = {stream: subprocess.PIPE}
        self.p = subprocess.Popen(cmd, text=True, env=env, **kw)  # type: ignore[call-overload]
        self.q: queue.Queue[tuple[float, str] | None] = queue.Queue()
        self.lines: list[tuple[float, str]] = []
        threading.Thread(target=self._pump, args=(getattr(self.p, stream),),
                         daemon=True).start()

    def _pump(self, f: Any) -> None:
        for line in f:
            self.q.put((time.time(), line.rstrip("\n")))
        self.q.put(None)

    def wait_for(self, text: str, count: int = 1, timeout: float = 60,
                 idle: float | None = None) -> float | None:
        """Time the ``count``-th line containing ``text`` was read, or None.

        Gives up after ``timeout``, or after ``idle`` seconds without a line.
        """
        seen = sum(1 for _, line in self.lines if text in line)
        end = time.monotonic() + timeout
        while seen < count:
            left = end - time.monotonic()
            if left <= 0:
                return None
            try:
                item = self.q.get(timeout=min(left, idle) if idle else left)
            except queue.Empty:
                return None
            if item is None:
                return None
            self.lines.append(item)
            if text in item[1]:
                seen += 1
                if seen == count:
                    return item[0]
        return next(t for t, line in self.lines if text in line)

    def line_with(self, text: str) -> str | None:
        """The first line read so far that contains ``text``."""
        return next((line for _, line in self.lines if text in line), None)

    def signal(self, sig: int) -> None:
        self.p.send_signal(sig)

    def stop_all(self) -> None:
        """SIGSTOP, then wait until every thread has stopped: kill() returns
        before they have, and a thread that reads a datagram of the burst
        meanwhile would start that dump's clock early."""
        self.p.send_signal(signal.SIGSTOP)
        tasks = Path(f"/proc/{self.p.pid}/task")
        for _ in range(10000):
            states = []
            for task in tasks.iterdir():
                try:
                    stat = (task / "stat").read_text()
                except OSError:
                    continue        # a thread that ended meanwhile
                states.append(stat.rsplit(")", 1)[1].split()[0])
            if all(s in "tT" for s in states):
                return
            time.sleep(0.0005)
        raise RuntimeError("the receiver did not stop")

    def stop(self) -> int:
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
        try:
            return self.p.wait(30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            return self.p.wait()


def build_sink(tmp: Path) -> Path:
    exe = tmp / "sink"
    subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(exe),
                    str(HERE / "sink.c")], check=True)
    return exe


def start_serve(db: Path, *args: str) -> tuple[Proc, int]:
    proc = Proc([PYTHON, "-m", "netoops_collector", "--db", str(db), "serve",
                 "--listen", "127.0.0.1:0", "--netconsole-listen", "off", *args])
    if proc.wait_for("listening on", timeout=30) is None:
        raise RuntimeError(f"serve did not start: {proc.lines}")
    line = next(line for _, line in proc.lines if "listening on" in line)
    return proc, int(line.split("listening on ", 1)[1].split()[0].rsplit(":", 1)[1])


def verify(db: Path, burst: Burst, before: int = 0) -> dict[str, Any]:
    """What reached the database, and whether it is exactly what was sent
    (after ``before`` packets of other dumps, which are left out)."""
    conn = store.open_readonly(db)
    counters = store.stats(conn)["counters"]
    rows = [r for r in store.list_dumps(conn) if r["boot_id"] in burst.logs]
    exact = 0
    for row in rows:
        d = store.get_dump(conn, row["id"])
        want = burst.logs.get(d["boot_id"]) if d else None
        if d and d["complete"] and want is not None and d["log"] == want.decode():
            exact += 1
    conn.close()
    received = counters.get("packets", 0) - before
    return {"sent": burst.packets, "received": received, "lost": burst.packets - received,
            "dumps": len(rows), "complete_exact": exact,
            "ok": received == burst.packets and exact == burst.dumps == len(rows),
            "partial_capacity": counters.get("partial_capacity", 0)}


def own_time(line: str | None, label: str) -> float | None:
    """The ISO time after ``label`` in a collector's log line, as epoch seconds."""
    if line is None or label not in line:
        return None
    text = line.split(label, 1)[1].split()[0].rstrip(";,")
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=timezone.utc).timestamp()


def sink_throughput(sink: Path, burst: Burst, warm: Burst) -> dict[str, Any]:
    proc = Proc([str(sink), "0", str(burst.packets + warm.packets), str(BIG_RCVBUF)],
                stream="stdout")
    proc.wait_for("ready", timeout=10)
    port = int(proc.lines[0][1].split()[1])
    warm.send(("127.0.0.1", port))
    proc.stop_all()
    burst.send(("127.0.0.1", port))
    cpu0 = sum(thread_cpu(proc.p.pid).values())
    t0 = time.time()
    proc.signal(signal.SIGCONT)
    proc.wait_for("count", timeout=60)
    proc.stop()
    _, count, _, _first, _, last, _, cpu_ms = proc.lines[-1][1].split()
    received = int(count) - warm.packets
    return {"pps": burst.packets / (float(last) - t0), "received": received,
            "ok": received == burst.packets, "cpu_ms": float(cpu_ms) - cpu0 / 1e6}


def collector_throughput(burst: Burst, warm: Burst, tmp: Path) -> dict[str, Any]:
    db = tmp / f"tp-{time.monotonic_ns()}.sqlite3"
    proc, port = start_serve(db, "--rcvbuf", str(BIG_RCVBUF), "--quiet-timeout", "30",
                             "--log-journal", "--log-interval", "0.005")
    warm.send(("127.0.0.1", port))
    proc.wait_for("dump ", count=warm.dumps, timeout=300, idle=30)
    proc.stop_all()
    burst.send(("127.0.0.1", port))
    cpu0 = thread_cpu(proc.p.pid)
    t0 = time.time()
    proc.signal(signal.SIGCONT)
    total = warm.dumps + burst.dumps
    durable = proc.wait_for(f" {total} this run;", timeout=300, idle=30)
    read = proc.wait_for(f"counters: packets {warm.packets + burst.packets},",
                         timeout=60, idle=30)
    cpu1 = thread_cpu(proc.p.pid)
    stored = proc.wait_for("dump ", count=total, timeout=300, idle=30)
    proc.stop()
    out = verify(db, burst, before=warm.packets)
    # As the sink's: the times the collector itself took when it made the
    # last dump durable and read the last datagram, not when this process
    # got round to reading its lines.
    durable = own_time(proc.line_with(f" {total} this run;"), "synced at ")
    read = own_time(proc.line_with(f"counters: packets {warm.packets + burst.packets},"),
                    "last datagram read at ")
    done = max(durable, read) if durable and read else None
    out["read_ms"] = (read - t0) * 1e3 if read else 0.0
    out["durable_ms"] = (durable - t0) * 1e3 if durable else 0.0
    out["pps"] = burst.packets / (done - t0) if done else 0.0
    out["stored_pps"] = burst.packets / (stored - t0) if stored else 0.0
    out["cpu_ms"] = {name: (cpu1.get(name, 0) - cpu0.get(name, 0)) / 1e6 for name in cpu1}
    return out


def thread_cpu(pid: int) -> dict[str, int]:
    """CPU time (ns, from schedstat) of each of a process's threads, by
    name: the C threads are nrx-read, nrx-handle and nrx-log (it syncs
    the packet log), the Python thread that takes their records and
    journals is "main", the others (storing, syncing) "other" together."""
    out: dict[str, int] = {}
    for t in Path(f"/proc/{pid}/task").iterdir():
        try:
            comm = (t / "comm").read_text().strip()
            ns = int((t / "schedstat").read_text().split()[0])
        except OSError:
            continue
        name = comm if comm.startswith("nrx-") else "main" if t.name == str(pid) else "other"
        out[name] = out.get(name, 0) + ns
    return out


def burst_trial(dumps: int, tmp: Path) -> dict[str, Any]:
    burst = Burst(dumps)
    db = tmp / f"burst-{dumps}-{time.monotonic_ns()}.sqlite3"
    proc, port = start_serve(db)
    took = burst.send(("127.0.0.1", port))
    proc.wait_for("dump ", count=dumps, timeout=120, idle=3)
    proc.stop()
    out = verify(db, burst)
    out.update(dumps=dumps, send_pps=burst.packets / took, rcvbuf=next(
        line.split("receive buffer ", 1)[1].split()[0] for _, line in proc.lines
        if "receive buffer" in line))
    return out


def largest_burst(tmp: Path, limit: int, log: Callable[[str], None]
                  ) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    trials: list[dict[str, Any]] = []
    good: dict[str, Any] | None = None
    k, bad = 4, None
    while k <= limit:
        t = burst_trial(k, tmp)
        trials.append(t)
        log(f"  burst of {k:4d} dumps ({t['sent']} packets, sent at "
            f"{t['send_pps']:,.0f}/s): lost {t['lost']}, {t['complete_exact']}/{k} exact")
        if t["lost"] == 0 and t["ok"]:
            good, k = t, k * 2
        else:
            bad = k
            break
    if good is not None and bad is not None:
        lo, hi = int(good["dumps"]), bad
        for _ in range(3):
            if hi - lo <= max(1, lo // 8):
                break
            mid = (lo + hi) // 2
            t = burst_trial(mid, tmp)
            trials.append(t)
            log(f"  burst of {mid:4d} dumps ({t['sent']} packets, sent at "
                f"{t['send_pps']:,.0f}/s): lost {t['lost']}, {t['complete_exact']}/{mid} exact")
            if t["lost"] == 0 and t["ok"]:
                good, lo = t, mid
            else:
                hi = mid
    return good, trials


def main() -> int:
    ap = argparse.ArgumentParser(description="netoops collector benchmark")
    ap.add_argument("--dumps", type=int, default=64, help="dumps in the throughput burst")
    ap.add_argument("--repeat", type=int, default=5, help="throughput runs (median)")
    ap.add_argument("--max-burst", type=int, default=512,
                    help="largest burst tried (512 = the default in-flight cap)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = ap.parse_args()

    def log(msg: str) -> None:
        print(msg, flush=True)

    with tempfile.TemporaryDirectory(prefix="netoops-bench-") as tmpname:
        tmp = Path(tmpname)
        sink = build_sink(tmp)
        burst = Burst(args.dumps)
        warm = Burst(args.dumps, first_boot=100000)
        log(f"throughput: {args.dumps} dumps x ~128 packets x 3 copies = {burst.packets} "
            f"packets, {args.repeat} runs each")
        sinks, cols = [], []
        for i in range(args.repeat):
            s = sink_throughput(sink, burst, warm)
            c = collector_throughput(burst, warm, tmp)
            log(f"  run {i + 1}: sink {s['pps']:,.0f} packets/s (received {s['received']}, "
                f"CPU {s['cpu_ms']:.1f} ms), "
                f"collector {c['pps']:,.0f} packets/s to durable (all read at "
                f"{c['read_ms']:.1f} ms, last durable at {c['durable_ms']:.1f} ms), "
                f"{c['stored_pps']:,.0f} to "
                f"analysed and in SQLite (lost {c['lost']}, "
                f"{c['complete_exact']}/{args.dumps} dumps stored complete and exact)")
            log("         CPU until durable: " + ", ".join(
                f"{name} {ms:.1f} ms" for name, ms in sorted(c["cpu_ms"].items())))
            sinks.append(s)
            cols.append(c)
        sink_pps = statistics.median(float(s["pps"]) for s in sinks)
        col_pps = statistics.median(float(c["pps"]) for c in cols)
        stored_pps = statistics.median(float(c["stored_pps"]) for c in cols)
        zero_loss = all(c["ok"] for c in cols) and all(s["ok"] for s in sinks)
        log("largest burst with zero loss (default serve):")
        good, trials = largest_burst(tmp, args.max_burst, log)

    log("")
    log("== netoops-collector benchmark ==")
    log(f"C recvmmsg sink:   {sink_pps:12,.0f} packets/s (count only)")
    log(f"collector (serve): {col_pps:12,.0f} packets/s to durable (receive + reassemble + "
        f"fdatasync of the packet log or journal), {col_pps * 1412 / 1e6:.1f} MB/s of UDP payload")
    paired = statistics.median(float(c["pps"]) / float(s["pps"]) for s, c in zip(sinks, cols))
    log(f"ratio collector/sink: {col_pps / sink_pps:.3f} of the medians, {paired:.3f} the "
        f"median of each run's ratio to the sink run just before it  "
        f"(zero loss verified in the db: {'yes' if zero_loss else 'NO'})")
    log(f"to analysed and committed to SQLite: {stored_pps:12,.0f} packets/s, ratio "
        f"{stored_pps / sink_pps:.3f}")
    names = sorted({name for c in cols for name in c["cpu_ms"]})
    log(f"CPU of the sink, median: {statistics.median(s['cpu_ms'] for s in sinks):.1f} ms")
    log("CPU until durable, medians: " + ", ".join(
        f"{name} {statistics.median(c['cpu_ms'].get(name, 0.0) for c in cols):.1f} ms"
        for name in names))
    if good:
        log(f"largest burst absorbed with zero loss: {good['dumps']} simultaneous dumps = "
            f"{good['sent']} packets sent at {float(good['send_pps']):,.0f} packets/s "
            f"(receive buffer {good['rcvbuf']} bytes)")
    else:
        log("largest burst absorbed with zero loss: none of the tried sizes")
    beyond = [t for t in trials if t["lost"]]
    if beyond:
        t = beyond[0]
        log(f"first lossy burst: {t['dumps']} dumps, {t['lost']} of {t['sent']} packets lost, "
            f"{t['complete_exact']}/{t['dumps']} dumps still complete thanks to the 3 copies")
    if args.json:
        print(json.dumps({"sink_pps": sink_pps, "collector_pps": col_pps,
                          "collector_stored_pps": stored_pps,
                          "ratio": col_pps / sink_pps, "paired_ratio": paired,
                          "zero_loss": zero_loss,
                          "throughput_packets": burst.packets,
                          "largest_zero_loss_burst": good, "trials": trials}, indent=2))
    return 0 if zero_loss else 1


if __name__ == "__main__":
    sys.exit(main())
