# SPDX-License-Identifier: GPL-2.0
"""`serve` end to end over loopback UDP, in a subprocess."""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from collector_util import COLLECTOR, PYTHON, Serve, chunk_count, cli_env, cli_json, fixture, \
    packets
from netoops_collector import proto
from netoops_collector.server import ListenError, _source, parse_listen


def udp(port: int, pkts: list[bytes], host: str = "127.0.0.1",
        sock: socket.socket | None = None) -> None:
    """Send from ``sock``, or from a new socket (a new source port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = sock or socket.socket(family, socket.SOCK_DGRAM)
    try:
        for p in pkts:
            s.sendto(p, (host, port))
    finally:
        if sock is None:
            s.close()


@pytest.fixture(params=["c", "python"])
def serve_factory(request: pytest.FixtureRequest):
    """`serve` with the C receive thread, then with Python reading the sockets."""
    started: list[Serve] = []

    def start(db: Path, *args: str, **kw: object) -> Serve:
        kw.setdefault("receiver", request.param)
        s = Serve(db, *args, **kw)  # type: ignore[arg-type]
        started.append(s)
        return s
    yield start
    for s in started:
        s.kill()


def test_serve_stores_dumps_and_survives_a_restart(where: Path | str, serve_factory):
    db = where
    srv = serve_factory(db, "--quiet-timeout", "30")
    assert srv.addr.startswith("127.0.0.1:")
    a = packets(fixture("null_deref.txt"), copies=3, boot_id=11)
    random.Random(3).shuffle(a)
    b = [p for p in packets(fixture("gpf.txt"), copies=3, boot_id=12)
         if proto.decode(p).packet_no != 1]
    junk = [b"\xa5" * 1412, b"", b"hello", proto.encode(version=2),
            proto.encode(packet_count=20000), packets("x")[0][:700]]
    udp(srv.port, a)
    udp(srv.port, b + junk)
    line = srv.wait_for("dump 1 from 127.0.0.1:")
    assert "boot 11" in line and "complete" in line and "nto_crash_null_deref" in line
    assert srv.stop() == 0                    # SIGTERM: B is still in flight
    partial = srv.wait_for("dump 2 from")
    assert "PARTIAL 3/4" in partial and "missing packet_no 1; shutdown" in partial
    assert "stopped:" in srv.lines[-1]

    dumps = cli_json("--db", db, "list")
    assert [(d["boot_id"], d["complete"], d["kind"]) for d in dumps] == \
        [(11, True, "oops"), (12, False, "panic")]
    shown = cli_json("--db", db, "show", "2")
    assert shown["missing"] == [[1, 1]] and shown["finalised_by"] == "shutdown"
    assert shown["title"] == "general protection fault in nto_crash_gpf"
    c = cli_json("--db", db, "stats")["counters"]
    assert c["packets"] == len(a) + len(b) + len(junk)
    assert c["accepted"] == chunk_count(fixture("null_deref.txt")) + 3
    assert c["rejected_truncated"] == 3 and c["rejected_version"] == 2
    assert c["rejected_packet_count"] == 1
    assert c["dumps_complete"] == 1 and c["partial_shutdown"] == 1

    srv = serve_factory(db, "--quiet-timeout", "30")      # restart on the same db
    udp(srv.port, packets(fixture("warn.txt"), copies=3, boot_id=13))
    srv.wait_for("dump 3 from")
    assert srv.stop() == 0
    dumps = cli_json("--db", db, "list")
    assert [d["boot_id"] for d in dumps] == [11, 12, 13]
    c2 = cli_json("--db", db, "stats")["counters"]
    assert c2["packets"] == c["packets"] + 3 * chunk_count(fixture("warn.txt"))


def test_quiet_timeout_over_udp_and_late_copies(where: Path | str, serve_factory):
    db = where
    srv = serve_factory(db, "--quiet-timeout", "0.3")
    pkts = packets(fixture("soft_lockup.txt"), copies=1, boot_id=5)
    kernel = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)  # one source port
    kernel.bind(("127.0.0.1", 0))
    udp(srv.port, pkts[1:], sock=kernel)                   # the newest chunk is lost
    line = srv.wait_for("PARTIAL", timeout=10)
    assert "missing packet_no 0; timeout" in line
    udp(srv.port, pkts[:1] + pkts[1:], sock=kernel)        # late and duplicate copies
    fixed = srv.wait_for("dump 1 repaired by late chunks: from")
    assert f"complete {len(pkts)}/{len(pkts)}" in fixed
    udp(srv.port, packets(fixture("sysrq_panic.txt"), boot_id=6))
    srv.wait_for("dump 2 from")
    kernel.close()
    assert srv.stop(sig=signal.SIGINT) == 0
    dumps = cli_json("--db", db, "list")
    assert [(d["id"], d["boot_id"], d["complete"]) for d in dumps] == [(1, 5, True), (2, 6, True)]
    assert cli_json("--db", db, "show", "1")["log"] == fixture("soft_lockup.txt")
    c = cli_json("--db", db, "stats")["counters"]
    assert c["late"] == 1 and c["duplicates"] == len(pkts) - 1
    assert c["partial_timeout"] == 1 and c["dumps_repaired"] == 1
    assert c["dumps_complete"] == 2 and c.get("dumps_partial", 0) == 0


def test_ipv6_loopback(tmp_path: Path, serve_factory):
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as s:
            s.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback")
    db = tmp_path / "c.sqlite3"
    srv = serve_factory(db, listen=["[::1]:0"])
    assert srv.addr.startswith("[::1]:")
    udp(srv.port, packets(fixture("bug_on.txt"), copies=3), host="::1")
    srv.wait_for("dump 1 from ::1:")
    assert srv.stop() == 0
    [d] = cli_json("--db", db, "list")
    assert d["source"] == "::1" and d["title"] == "kernel BUG in nto_crash_bug"


_NETNS_DRIVER = """
import json, socket, subprocess, sys
sys.path[:0] = {paths!r}
from collector_util import Serve, cli_json, fixture, packets
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
srv = Serve({db!r}, listen=None)         # the default: port 2004, IPv4 and IPv6
for host, boot in (("127.0.0.1", 1), ("::1", 2)):
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(fam, socket.SOCK_DGRAM) as s:
        for p in packets(fixture("gpf.txt"), copies=3, boot_id=boot):
            s.sendto(p, (host, 2004))
srv.wait_for("dump 2 from")
rc = srv.stop()
print(json.dumps({{"rc": rc, "addr": srv.addr, "lines": srv.lines,
                   "list": cli_json("--db", {db!r}, "list")}}))
"""


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None
                    or shutil.which("ip") is None, reason="needs root, unshare and ip")
def test_default_listen_is_dual_stack_port_2004(tmp_path: Path):
    """In a private network namespace (only lo), so nothing else is exposed."""
    import json
    db = tmp_path / "c.sqlite3"
    script = _NETNS_DRIVER.format(paths=[str(Path(__file__).parent), str(COLLECTOR)],
                                  db=str(db))
    res = subprocess.run(["unshare", "--net", PYTHON, "-c", script], capture_output=True,
                         text=True, env=cli_env(), timeout=60)
    if res.returncode != 0 and "unshare failed" in res.stderr:
        pytest.skip(res.stderr.strip())
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["rc"] == 0 and out["addr"] == "[::]:2004"
    assert "(dual-stack, C receive thread" in out["lines"][0] and "receive buffer" in out["lines"][0]
    assert [(d["source"], d["boot_id"]) for d in out["list"]] == [("127.0.0.1", 1), ("::1", 2)]


def test_listen_parsing_and_source_addresses():
    assert parse_listen("127.0.0.1:2004") == ("127.0.0.1", 2004)
    assert parse_listen("[::1]:0") == ("::1", 0)
    assert parse_listen(":2004") == ("", 2004)
    assert parse_listen("host.example:9") == ("host.example", 9)
    for bad in ("::1:2004", "[::1]2004", "1.2.3.4", "1.2.3.4:x", "1.2.3.4:70000"):
        with pytest.raises(ListenError):
            parse_listen(bad)
    assert _source(("::ffff:192.0.2.7", 2004, 0, 0)) == ("192.0.2.7", 2004)
    assert _source(("2001:db8::7", 2004, 0, 0)) == ("2001:db8::7", 2004)
    assert _source(("192.0.2.7", 6666)) == ("192.0.2.7", 6666)


def test_listen_failure_is_reported(tmp_path: Path):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as busy:
        busy.bind(("127.0.0.1", 0))
        port = busy.getsockname()[1]
        res = subprocess.run([PYTHON, "-m", "netoops_collector", "--db",
                              str(tmp_path / "c.sqlite3"), "serve", "--netconsole-listen",
                              "off", "--listen", f"127.0.0.1:{port}"], capture_output=True, text=True,
                             env=cli_env(), timeout=30)
    assert res.returncode == 4
    assert f"cannot listen on 127.0.0.1:{port}" in res.stderr
    assert "Traceback" not in res.stderr


def forged(genuine: bytes, size: int, data_offset: int = proto.DATA_OFFSET) -> bytes:
    """The genuine packet_no 0 with forged data, made ``size`` bytes long:
    everything is right but the size (or the data_offset, if given)."""
    p = proto.decode(genuine)
    buf = bytearray(proto.encode(dump_id=p.dump_id, boot_id=p.boot_id,
                                 packet_count=p.packet_count, packet_no=0,
                                 data=b"forged".ljust(1024, b"F")))
    buf[4:6] = data_offset.to_bytes(2, "little")
    return bytes(buf[:size]).ljust(size, b"F")


@pytest.mark.parametrize("size", [4096, 5000, 65000, proto.PACKET_SIZE + 1])
def test_datagrams_longer_than_a_packet_are_rejected_and_change_nothing(
        tmp_path: Path, serve_factory, size: int):
    """Oversize, truncated and wrong-offset copies of a real chunk, sent before
    the real dump: each is rejected for exactly that reason, and the dump is
    stored complete and correct (were any accepted, its chunk 0 would be the
    forged one, which arrives first)."""
    db = tmp_path / "c.sqlite3"
    srv = serve_factory(db, "--quiet-timeout", "30")
    real = packets(fixture("null_deref.txt"), copies=3, boot_id=21)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp(srv.port, [forged(real[0], size)] * 3 + [forged(real[0], 1000)]
        + [forged(real[0], proto.PACKET_SIZE, data_offset=proto.DATA_OFFSET + 1)] + real,
        sock=sock)
    sock.close()
    line = srv.wait_for("dump 1 from 127.0.0.1:")
    assert "complete" in line and "nto_crash_null_deref" in line
    assert srv.stop() == 0
    [dump] = cli_json("--db", db, "list")
    assert dump["complete"] is True and dump["boot_id"] == 21
    shown = cli_json("--db", db, "show", "1")
    assert shown["log"] == fixture("null_deref.txt")
    c = cli_json("--db", db, "stats")["counters"]
    assert (c.get("rejected_oversize"), c.get("rejected_truncated"),
            c.get("rejected_offsets")) == (3, 1, 1)
    assert c["accepted"] == chunk_count(fixture("null_deref.txt"))


def test_kernel_drops_are_counted_and_logged(tmp_path: Path, serve_factory):
    """Datagrams the kernel drops on a full receive buffer (serve stopped with
    SIGSTOP) are counted from SO_RXQ_OVFL, in stats and the periodic line."""
    db = tmp_path / "c.sqlite3"
    srv = serve_factory(db, "--rcvbuf", "65536", "--log-interval", "0.2")
    assert "a burst of" in srv.wait_for("listening on")
    os.kill(srv.proc.pid, signal.SIGSTOP)
    try:
        udp(srv.port, [b"x" * 100] * 3000)
    finally:
        os.kill(srv.proc.pid, signal.SIGCONT)
    srv.wait_for("counters: packets")
    sent = time.time()
    udp(srv.port, [b"y"])                      # the count rides on each datagram
    time.sleep(0.5)
    assert srv.stop() == 0
    line = [x for x in srv.lines if "counters: packets" in x][-1]
    drops = int(line.split("kernel drops ")[1].split(";")[0])
    # the time the last datagram was read, by the receiver's own clock
    read_at = datetime.strptime(line.split("last datagram read at ")[1].strip(),
                                "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    assert sent <= read_at.timestamp() <= sent + 0.5
    c = cli_json("--db", db, "stats")["counters"]
    assert c["kernel_drops"] > 0
    assert c["kernel_drops"] + c["packets"] == 3001
    assert drops == c["kernel_drops"]
    assert f"counters: packets {c['packets']}," in line


def test_counters_per_source_address(tmp_path: Path, serve_factory):
    """Rejected datagrams and conflicts are counted per source address (all
    ports of one address together), shown by `stats`."""
    db = tmp_path / "c.sqlite3"
    srv = serve_factory(db)
    for port_sock in range(3):                 # three source ports, one address
        udp(srv.port, [b"junk", proto.encode(version=9)])
    real = packets(fixture("warn.txt"), boot_id=8)
    kernel = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp(srv.port, real, sock=kernel)
    other = bytearray(real[0])
    other[proto.DATA_OFFSET] ^= 1              # other bytes for a chunk it has
    udp(srv.port, [bytes(other)], sock=kernel)
    kernel.close()
    srv.wait_for("dump 1 from")
    assert srv.stop() == 0
    st = cli_json("--db", db, "stats")
    [src] = st["sources"]
    assert src["source"] == "127.0.0.1"
    assert src["counters"] == {"rejected_conflict": 1, "rejected_truncated": 3,
                               "rejected_version": 3}
    text = subprocess.run([PYTHON, "-m", "netoops_collector", "--db", str(db), "stats"],
                          capture_output=True, text=True, env=cli_env()).stdout
    assert "  127.0.0.1: rejected_conflict 1, rejected_truncated 3, rejected_version 3" in text
