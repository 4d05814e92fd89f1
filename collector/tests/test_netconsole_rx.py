# SPDX-License-Identifier: GPL-2.0
"""Netconsole reception: parsing, fragments, streams per boot, lost
records, and `serve` storing lines that `show`, `tail` and `silent` use."""

from __future__ import annotations

import json
import queue
import signal
import socket
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

from collector_util import PYTHON, Serve, cli, cli_env, cli_json, fixture, packets
from netoops_collector import ncstore
from netoops_collector.netconsole import Streams, printk_time, unescape


def ext(seq: int, text: str, ts: int | None = None, prio: int = 6, release: str = "",
        meta: tuple[str, ...] = ()) -> bytes:
    ts = ts if ts is not None else 10_000_000 + seq * 1000     # 10 s after boot on
    head = f"{release + ',' if release else ''}{prio},{seq},{ts},-;"
    return (head + text + "\n" + "".join(f" {m}\n" for m in meta)).encode()


def frags(seq: int, body: bytes, size: int, release: str = "") -> list[bytes]:
    head = f"{release + ',' if release else ''}4,{seq},{seq * 1000},-"
    return [f"{head},ncfrag={off}/{len(body)};".encode() + body[off:off + size]
            for off in range(0, len(body), size)]


def streams() -> Streams:
    ids = iter(range(1, 1000))
    return Streams(lambda: next(ids))


def test_extended_records_with_userdata_sysdata_and_release():
    s = streams()
    [a] = s.feed(ext(5, "hello \\x1b world", release="6.1.0-test",
                     meta=("SUBSYSTEM=net", "cpu=1", "taskname=swapper/1", "msgid=9")),
                 "192.0.2.1", 6665, 100.0)
    assert (a.seq, a.level, a.ts_us, a.stream) == (5, 6, 10_005_000, 1)
    assert a.text == "hello \\x1b world" and unescape(a.text) == "hello \x1b world"
    assert a.meta == "SUBSYSTEM=net\ncpu=1\ntaskname=swapper/1\nmsgid=9"
    st = s.current[("192.0.2.1", 6665)]
    assert st.release == "6.1.0-test" and st.extended and st.lines == 1
    # the level is the low 3 bits of the syslog prefix value
    [b] = s.feed(ext(6, "kern", prio=(3 << 3) | 4), "192.0.2.1", 6665, 100.1)
    assert b.level == 4


def test_fragments_reassemble_in_any_order_and_copies_count_once():
    s = streams()
    body = ("x" * 2500 + "\n" + "".join(f" key{i}=value{i}\n" for i in range(20))).encode()
    parts = frags(7, body, 900)
    assert len(parts) == 4
    assert s.feed(parts[2], "192.0.2.1", 6665, 1.0) == []
    assert s.feed(parts[0], "192.0.2.1", 6665, 1.0) == []
    assert s.feed(parts[0], "192.0.2.1", 6665, 1.0) == []       # a copy of a piece
    assert s.feed(parts[3], "192.0.2.1", 6665, 1.0) == []
    [line] = s.feed(parts[1], "192.0.2.1", 6665, 1.0)
    assert line.text == "x" * 2500 and line.meta.split("\n")[19] == "key19=value19"
    assert not line.cut and line.seq == 7


def test_a_record_whose_pieces_stop_is_stored_cut_after_the_timeout():
    s = streams()
    body = ("y" * 2000 + "\n").encode()
    first, _, third = frags(3, body, 800)
    s.feed(first, "192.0.2.1", 6665, 1.0)
    s.feed(third, "192.0.2.1", 6665, 1.0)
    assert s.expire(2.0) == []
    [line] = s.expire(10.0)
    assert line.cut and line.text == "y" * 800 and s.stats["netconsole_cut"] == 1


def test_sequence_gaps_are_lost_late_records_fill_them_and_a_restart_is_a_new_boot():
    s = streams()
    src = ("192.0.2.1", 6665)
    for seq in (10, 11, 15):
        s.feed(ext(seq, f"m{seq}"), *src, 1.0)
    st = s.current[src]
    assert st.lost == 3 and s.stats["netconsole_lost"] == 3
    [late] = s.feed(ext(13, "m13"), *src, 1.0)      # reordered: fills the gap
    assert late.stream == st.id and st.lost == 2 and s.stats["netconsole_late"] == 1
    assert s.feed(ext(13, "m13"), *src, 1.0) == []  # a copy
    assert s.stats["netconsole_duplicates"] == 1
    [boot] = s.feed(ext(0, "Linux version", ts=0), *src, 50.0)  # the machine restarted
    assert boot.stream != st.id and st.ended == "a new boot"
    assert s.current[src].first_seq == 0 and s.current[src].lost == 0
    # a new release is a new boot even if the sequence goes on
    [rel] = s.feed(ext(1, "x", release="6.1.0-new"), *src, 60.0)
    [rel2] = s.feed(ext(2, "y", release="6.1.0-other"), *src, 61.0)
    assert rel.stream != rel2.stream
    # so is a timestamp that goes back while the sequence goes on (the
    # collector missed the reboot)
    [fwd] = s.feed(ext(900, "later boot", ts=2_000_000), *src, 70.0)
    assert fwd.stream != rel2.stream and s.current[src].lost == 0


def test_after_a_restart_an_old_record_is_stale_not_a_boot():
    """The streams known at start have no memory of recent records: one a
    little behind is dropped as stale, one far behind is a new boot."""
    from netoops_collector.netconsole import Stream
    known = Stream(7, "192.0.2.1", 6665, True, 1.0, 1.0, None, 0, 1000, 11_000_000)
    ids = iter(range(8, 100))
    s = Streams(lambda: next(ids), {("192.0.2.1", 6665): known})
    assert s.feed(ext(998, "again"), "192.0.2.1", 6665, 2.0) == []
    assert s.stats["netconsole_duplicates"] == 1 and known.ended is None
    [nxt] = s.feed(ext(1001, "next"), "192.0.2.1", 6665, 2.0)
    assert nxt.stream == 7 and known.lost == 0
    [far] = s.feed(ext(3, "far behind"), "192.0.2.1", 6665, 3.0)
    assert far.stream == 8 and known.ended == "a new boot"


def test_hostile_input_changes_nothing_it_should_not():
    s = streams()
    src = ("192.0.2.9", 6665)
    assert s.feed(b"6,99999999999999999999,1,-;too big\n", *src, 1.0) == []
    assert s.stats["netconsole_malformed"] == 1 and not s.current
    # overlapping pieces that leave a hole: not whole until it is filled
    body = b"0123456789" * 30 + b"\n"
    head = b"4,5,10000000,-"
    s.feed(head + b",ncfrag=0/301;" + body[:100], *src, 1.0)
    s.feed(head + b",ncfrag=50/301;" + body[50:200], *src, 1.0)
    assert s.feed(head + b",ncfrag=210/301;" + body[210:], *src, 1.0) == []
    [line] = s.feed(head + b",ncfrag=200/301;" + body[200:210], *src, 1.0)
    assert line.text == body[:-1].decode() and not line.cut


def test_utf8_escaped_by_the_kernel_is_read_back():
    assert unescape("caf\\xc3\\xa9 \\x1b") == "caf\u00e9 \x1b"


def test_basic_lines_split_and_joined_and_the_banner_starts_a_boot():
    s = streams()
    src = ("192.0.2.2", 6665)
    out = s.feed(b"[    1.000000] one\n[    1.500000] tw", *src, 1.0)
    assert [ln.text for ln in out] == ["[    1.000000] one"] and out[0].ts_us == 1_000_000
    out = s.feed(b"o\n", *src, 1.1)
    assert [ln.text for ln in out] == ["[    1.500000] two"]
    s.feed(b"no newline yet", *src, 2.0)
    [held] = s.expire(5.0)
    assert held.text == "no newline yet"
    first = s.current[src].id
    [banner] = s.feed(b"[    0.000000] Linux version 6.1.0 (gcc)\n", *src, 9.0)
    assert banner.stream != first


def test_printk_time_and_unescape():
    assert printk_time("<4>[   12.345678] hi") == (12_345_678, "hi")
    assert printk_time("no time") == (None, "no time")
    assert unescape("a\\x0ab\\\\") == "a\nb\\\\"


def _send(port: int, datagrams: list[bytes], src: str = "", sport: int = 0) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        if src or sport:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((src or "127.0.0.1", sport))
        for d in datagrams:
            s.sendto(d, ("127.0.0.1", port))
            time.sleep(0.0005)


def _send_dump(port: int, boot_id: int, copies: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for p in packets(fixture("null_deref.txt"), copies=copies, boot_id=boot_id):
            s.sendto(p, ("127.0.0.1", port))


def _wait_lines(db: Path, n: int, timeout: float = 10) -> int:
    end = time.monotonic() + timeout
    got = 0
    while time.monotonic() < end:
        try:
            conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
            got = conn.execute("SELECT COUNT(*) FROM nc_lines").fetchone()[0]
            conn.close()
        except sqlite3.Error:
            pass
        if got >= n:
            return got
        time.sleep(0.1)
    return got


def _log_lines() -> list[tuple[int, str]]:
    """Fixture null_deref.txt (a boot, then an oops) as (printk time, text)."""
    out = []
    for raw in fixture("null_deref.txt").splitlines():
        ts, text = printk_time(raw)
        if ts is not None:
            out.append((ts, text))
    return out


def test_serve_joins_netconsole_lines_with_the_dump(tmp_path: Path):
    for receiver in ("c", "python"):
        db = tmp_path / f"{receiver}.sqlite3"
        srv = Serve(db, "--quiet-timeout", "30", receiver=receiver)
        try:
            log = _log_lines()
            # the boot as netconsole saw it, then the oops: every line but
            # one, which the network lost (a sequence gap), one the dump
            # lost, and one printed after the dump was taken
            before = [ext(i, text, ts=ts) for i, (ts, text) in enumerate(log[:10])]
            crash = []
            seq = 10
            for k, (ts, text) in enumerate(log[10:]):
                if k == 5:
                    crash.append(ext(seq, "the dump lost this", ts=ts, prio=4))
                elif k != 3:
                    crash.append(ext(seq, text, ts=ts, prio=4))
                seq += 1
            crash.append(ext(seq, "only netconsole saw this", ts=log[-1][0] + 1, prio=4))
            _send(srv.nc_port, before + crash)
            assert _wait_lines(db, len(before) + len(crash)) == len(before) + len(crash)
            _send_dump(srv.port, boot_id=5, copies=3)
            srv.wait_for("dump 1 from")
        finally:
            assert srv.stop() == 0
        shown = cli_json("--db", db, "show", "1")
        nc = shown["netconsole"]
        assert len(nc["lines"]) == len(before) + len(crash)
        [st] = nc["streams"]
        assert st["lost"] == 1 and st["extended"]
        mine = {ln["text"]: ln for ln in nc["lines"]}
        assert all(mine[text]["in_dump"] for k, (_, text) in enumerate(log) if k not in (13, 15))
        assert not mine["only netconsole saw this"]["in_dump"]
        assert not mine["only netconsole saw this"]["lost_from_dump"]
        assert mine["the dump lost this"]["lost_from_dump"] and nc["lost_from_dump"] == 1
        text = cli("--db", db, "show", "1").stdout
        assert "netconsole: " in text and "lost" in text
        assert "+ " in text and "only netconsole saw this" in text
        assert "log:" in text and text.index("netconsole: ") < text.index("log:")
        assert "netconsole" not in cli_json("--db", db, "show", "1", "--netconsole", "0")
        c = cli_json("--db", db, "stats")["counters"]
        assert c["netconsole_lines"] == len(before) + len(crash) and c["netconsole_lost"] == 1


def test_tail_and_silent(tmp_path: Path):
    db = tmp_path / "c.sqlite3"
    srv = Serve(db)
    try:
        _send(srv.nc_port, [ext(i, f"quiet host line {i}") for i in range(30)])
        _send(srv.nc_port, [b"[    3.000000] basic line\n"], src="127.0.0.2")
        assert _wait_lines(db, 31) == 31
    finally:
        assert srv.stop() == 0
    res = cli("--db", db, "tail", "--host", "127.0.0.1", "-n", "3")
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("\n") == 4
    assert cli("--db", db, "tail", "--host", "192.0.2.99").returncode == 1
    got = cli_json("--db", db, "tail", "--host", "127.0.0.1", "-n", "3")
    assert [ln["text"] for ln in got["lines"]] == [f"quiet host line {i}" for i in (27, 28, 29)]
    got = cli_json("--db", db, "tail", "--host", "127.0.0.2")
    assert [ln["text"] for ln in got["lines"]] == ["[    3.000000] basic line"]
    assert not got["stream"]["extended"]
    # both streams stopped just now: silent only for --after 0+
    assert cli_json("--db", db, "silent", "--after", "3600")["silent"] == []
    time.sleep(1.1)
    rows = cli_json("--db", db, "silent", "--after", "1")["silent"]
    assert [r["stream"]["source"] for r in rows] == ["127.0.0.1", "127.0.0.2"]
    text = cli("--db", db, "silent", "--after", "1").stdout
    assert "went silent" in text and "quiet host line 29" in text
    # a dump from the host after its last line: not silent any more
    srv = Serve(db, "--quiet-timeout", "30")
    try:
        _send_dump(srv.port, boot_id=9, copies=1)
        srv.wait_for("dump 1 from")
    finally:
        assert srv.stop() == 0
    rows = cli_json("--db", db, "silent", "--after", "1")["silent"]
    assert [r["stream"]["source"] for r in rows] == ["127.0.0.2"]


class _Follow:
    """``tail --follow`` running, its output read as it comes."""

    def __init__(self, db: Path, *args: str) -> None:
        self.proc = subprocess.Popen(
            [PYTHON, "-m", "netoops_collector", "--db", str(db), "tail", "--follow",
             "--interval", "0.05", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=cli_env())
        self.lines: list[str] = []
        self._q: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._q.put(line.rstrip("\n"))
        self._q.put(None)

    def wait_for(self, text: str, timeout: float = 10) -> None:
        end = time.monotonic() + timeout
        while not any(text in line for line in self.lines):
            item = self._q.get(timeout=max(0.01, end - time.monotonic()))
            assert item is not None, f"tail --follow ended: {self.lines}"
            self.lines.append(item)

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(10)
        while (item := self._q.get(timeout=10)) is not None:
            self.lines.append(item)
        return rc


def test_tail_follow_prints_new_lines_and_new_boots_of_that_host_only(tmp_path: Path):
    db = tmp_path / "c.sqlite3"
    srv = Serve(db)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        sport = s.getsockname()[1]      # one target: one source port throughout
    try:
        _send(srv.nc_port, [ext(i, f"old line {i}") for i in range(5)], sport=sport)
        assert _wait_lines(db, 5) == 5
        text = _Follow(db, "--host", "127.0.0.1", "-n", "2")
        js = _Follow(db, "--host", "127.0.0.1", "-n", "1", "--json")
        later = _Follow(db, "--host", "127.0.0.3")        # nothing from it yet: waits
        text.wait_for("old line 4")
        js.wait_for("old line 4")
        _send(srv.nc_port, [b"[    1.000000] another host\n"], src="127.0.0.2")
        _send(srv.nc_port, [ext(i, f"new line {i}") for i in range(5, 8)], sport=sport)
        # a reboot: the timestamp goes back, a new stream
        _send(srv.nc_port, [ext(0, "after the reboot", ts=1_000)], sport=sport)
        _send(srv.nc_port, [ext(0, "the third host", ts=1_000)], src="127.0.0.3")
        for f in (text, js):
            f.wait_for("after the reboot")
        later.wait_for("the third host")
    finally:
        assert srv.stop() == 0
    assert [f.stop() for f in (text, js, later)] == [0, 0, 0]
    shown = [ln for ln in text.lines if not ln.startswith("stream ")]
    assert [ln.rsplit(" ", 1)[-1] for ln in shown[:5]] == ["3", "4", "5", "6", "7"]
    assert "after the reboot" in shown[5]
    assert not any("another host" in ln for ln in text.lines + js.lines)
    notes = [ln for ln in text.lines if ln.startswith("stream ")]
    assert len(notes) == 2 and notes[0] != notes[1], text.lines     # the boot announced
    objs = [json.loads(ln) for ln in js.lines]
    assert [o["text"] for o in objs] == ["old line 4", "new line 5", "new line 6",
                                         "new line 7", "after the reboot"]
    assert len({o["stream"] for o in objs}) == 2 and {o["source"] for o in objs} == {"127.0.0.1"}
    assert "the third host" in later.lines[-1] and later.lines[0].startswith("stream ")


def test_retention_prunes_old_lines(tmp_path: Path):
    db = tmp_path / "c.sqlite3"
    srv = Serve(db)
    try:
        _send(srv.nc_port, [ext(i, f"l{i}") for i in range(50)])
        assert _wait_lines(db, 50) == 50
    finally:
        assert srv.stop() == 0
    res = cli("--db", db, "prune", "--keep-netconsole-lines", "20", "--dry-run")
    assert "30 netconsole line(s)" in res.stdout
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT COUNT(*) FROM nc_lines").fetchone()[0] == 50
    conn.close()
    cli("--db", db, "prune", "--keep-netconsole-lines", "20")
    conn = sqlite3.connect(db)
    texts = [t for (t,) in conn.execute("SELECT text FROM nc_lines ORDER BY id")]
    conn.close()
    assert texts == [f"l{i}" for i in range(30, 50)]
    assert ncstore.prune(sqlite3.connect(db), 1.0, None, now=time.time() + 10) == 20


def test_lines_of_an_earlier_boot_are_shown_not_compared(tmp_path: Path):
    """A crash loop: the window before a dump holds the previous boot's
    lines too; only the dump's own boot is held against its log."""
    conn = sqlite3.connect(tmp_path / "nc.sqlite3")
    ncstore.create(conn)
    s = streams()
    src = ("192.0.2.1", 6665)
    lines = s.feed(ext(500, "old boot line", ts=20_000_000), *src, 100.0)
    lines += s.feed(ext(0, "new boot line", ts=1_000_000), *src, 130.0)   # it rebooted
    lines += s.feed(ext(1, "in both", ts=1_500_000), *src, 131.0)
    lines += s.feed(ext(2, "lost from the dump", ts=1_700_000), *src, 131.0)
    ncstore.write(conn, lines, s.take_changed())
    dump = {"source": "192.0.2.1", "first_packet": 140.0, "received": 141.0,
            "log": "<4>[    1.500000] in both\n[    2.000000] the end\n"}
    nc = ncstore.before_dump(conn, dump, 5)
    got = {ln["text"]: ln for ln in nc["lines"]}
    assert got["old boot line"]["other_boot"] and not got["old boot line"]["lost_from_dump"]
    assert not got["new boot line"]["in_dump"] and not got["new boot line"]["lost_from_dump"]
    assert got["in both"]["in_dump"] and got["lost from the dump"]["lost_from_dump"]
    assert (nc["not_in_dump"], nc["lost_from_dump"]) == (2, 1)
    assert nc["dump_stream"] == got["new boot line"]["stream"] != got["old boot line"]["stream"]
    conn.close()
