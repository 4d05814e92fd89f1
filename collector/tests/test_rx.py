# SPDX-License-Identifier: GPL-2.0
"""The C receive thread (netoops_collector/_rx.c through rx.py)."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from collector_util import COLLECTOR, fixture, packets, rx_lib
from netoops_collector import proto, rx
from netoops_collector.journal import numbered
from netoops_collector.reassembly import Reassembler


@pytest.fixture(autouse=True)
def built(monkeypatch: pytest.MonkeyPatch) -> Path:
    lib = rx_lib()
    monkeypatch.setenv("NETOOPS_RX_LIB", str(lib))
    monkeypatch.setattr(rx, "_lib", None)
    return lib


def receiver(family: int = socket.AF_INET, rcvbuf: int = 0,
             ring: int = rx.DEFAULT_RING, **kw: object) -> tuple[rx.CReceiver, socket.socket]:
    sock = socket.socket(family, socket.SOCK_DGRAM)
    sock.bind(("::1" if family == socket.AF_INET6 else "127.0.0.1", 0))
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    return rx.CReceiver(sock, ring, **kw), sock  # type: ignore[arg-type]


def send_numbered(src: socket.socket, sock: socket.socket, n: int) -> None:
    """``n`` 400-byte datagrams, each its sequence number repeated."""
    for i in range(n):
        src.sendto(i.to_bytes(4, "little") * 100, sock.getsockname())


def size(items: list[tuple[rx.Datagram, str, int]]) -> int:
    return sum(1 if isinstance(d, bytes) else d.count for d, _, _ in items)


def take_all(r: rx.CReceiver, want: int, timeout: float = 5
             ) -> list[tuple[rx.Datagram, str, int]]:
    """What the thread passes on, until ``want`` datagrams (a group counts
    its packets) or ``timeout``."""
    out: list[tuple[rx.Datagram, str, int]] = []
    end = time.monotonic() + timeout
    while size(out) < want and time.monotonic() < end:
        # a group's packets are a view of the receiver's buffer, valid
        # until the next take(): kept here, so copied
        out += [(buf._replace(packets=bytes(buf.packets)) if isinstance(buf, rx.Group)
                 else buf, host, port) for buf, host, port in r.take(0.05)]
    return out


def packet_no(pkt: bytes) -> int:
    return int.from_bytes(pkt[16:20], "little")


def test_datagrams_arrive_with_their_source_and_copies_are_dropped():
    r, sock = receiver()
    src = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    src.bind(("127.0.0.1", 0))
    pkts = packets(fixture("null_deref.txt"), copies=3)
    n = len(pkts) // 3
    odd = [b"short", b"x" * 3000, proto.encode(version=9)]
    try:
        for p in pkts + odd:
            src.sendto(p, sock.getsockname())
        got = take_all(r, n + len(odd))
        st = r.stats()
    finally:
        r.stop()
        sock.close()
    port = src.getsockname()[1]
    src.close()
    # The whole dump as one group, in packet_no order with its chunk hashes.
    group = got[0][0]
    assert isinstance(group, rx.Group) and n > 1
    assert group.packets == b"".join(sorted(pkts[:n], key=packet_no))
    assert list(group.hashes) == [rx.chunk_hash(p[proto.DATA_OFFSET:]) for p in
                                  sorted(pkts[:n], key=packet_no)]
    assert [g[0] for g in got[1:]] == [b"short", b"x" * (proto.PACKET_SIZE + 1) + b"\0",
                                       proto.encode(version=9)]
    assert {(g[1], g[2]) for g in got} == {("127.0.0.1", port)}
    assert st["packets"] == len(pkts) + len(odd) and st["duplicates"] == 2 * n
    assert st["ring_used"] == 0 and st["grouped"] == 1 and st["groups"] == 0


def test_raw_mode_passes_every_datagram_on_copies_included():
    """max_count 0 (netconsole's receiver): no copy filter, no grouping,
    even for datagrams of exactly a netoops packet's size."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    r = rx.CReceiver(sock, max_count=0)
    src = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    pkts = packets(fixture("null_deref.txt"), copies=3)
    line = b"6,1,1000,-;the same line twice\n"
    try:
        for p in pkts + [line, line]:
            src.sendto(p, sock.getsockname())
        got = take_all(r, len(pkts) + 2)
        st = r.stats()
    finally:
        r.stop()
        sock.close()
        src.close()
    assert [d for d, _, _ in got] == pkts + [line, line]
    assert st["duplicates"] == 0 and st["grouped"] == 0 and st["packets"] == len(pkts) + 2


def test_a_group_feeds_exactly_as_its_packets_would():
    """A group gives the dump its packets give one by one; afterwards a copy
    of a chunk is a duplicate and a changed chunk a conflict (its hash);
    while part of the dump is in flight the group is fed packet by packet."""
    pkts = packets(fixture("null_deref.txt"), boot_id=5)
    group = rx.Group(b"".join(sorted(pkts, key=packet_no)), __import__("array").array(
        "q", [rx.chunk_hash(p[proto.DATA_OFFSET:]) for p in sorted(pkts, key=packet_no)]))
    one, whole = Reassembler(), Reassembler(chunk_hash=rx.chunk_hash)
    by_one = [d for p in pkts for d in one.feed(p, "192.0.2.1", 9, 1.0)]
    [d] = whole.feed_group(group.packets, group.hashes, "192.0.2.1", 9, 1.0)
    [want] = by_one
    assert (d.log, d.complete, d.boot_id, d.missing) == (want.log, True, 5, [])
    assert whole.stats == one.stats
    assert not whole.feed(pkts[1], "192.0.2.1", 9, 2.0)
    bad = bytearray(pkts[1])
    bad[-1] ^= 1
    assert not whole.feed(bytes(bad), "192.0.2.1", 9, 2.0)
    assert whole.stats["duplicates"] == 1 and whole.stats["rejected_conflict"] == 1
    # Part of another dump already here: fed one by one, same result.
    other = packets(fixture("null_deref.txt"), boot_id=6)
    part = Reassembler(chunk_hash=rx.chunk_hash)
    assert not part.feed(other[0], "192.0.2.1", 9, 1.0)
    rest = sorted(other, key=packet_no)
    got = part.feed_group(b"".join(rest), __import__("array").array("q", [0] * len(rest)),
                          "192.0.2.1", 9, 1.0)
    assert [g.log for g in got] == [want.log] and part.stats["duplicates"] == 1


def test_a_dump_with_a_gap_comes_out_packet_by_packet_after_the_hold():
    """A dump missing a packet is held, then passed on as it arrived; a
    packet that repeats a held packet_no with other data passes at once."""
    r, sock = receiver()
    src = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    pkts = packets(fixture("null_deref.txt"))
    sent = pkts[:-1]
    changed = bytearray(pkts[0])
    changed[-1] ^= 1
    try:
        for p in sent:
            src.sendto(p, sock.getsockname())
        src.sendto(bytes(changed), sock.getsockname())
        first = take_all(r, 1, timeout=2)
        assert [g[0] for g in first] == [bytes(changed)]      # not held
        assert r.stats()["groups"] == 1
        got = take_all(r, len(sent), timeout=2)
        st = r.stats()
    finally:
        r.stop()
        sock.close()
        src.close()
    assert [g[0] for g in got] == sent
    assert st["group_flushes"] == 1 and st["grouped"] == 0 and st["groups"] == 0


def test_ipv6_sources():
    r, sock = receiver(socket.AF_INET6)
    src = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    try:
        src.sendto(b"hello", sock.getsockname()[:2])
        [(data, host, port)] = take_all(r, 1)
    finally:
        r.stop()
        sock.close()
        src.close()
    assert (data, host) == (b"hello", "::1") and port > 0


def test_the_ring_takes_a_burst_while_python_is_held_back():
    """Nothing is taken from the ring while 32 dumps (12,288 datagrams,
    17 MB) arrive through a 256 KiB kernel buffer that holds about a
    hundred: the thread alone keeps draining the socket, nothing is lost,
    and the dumps reassemble complete afterwards.  The sender waits for the
    thread to catch up after each group of 64 (bounded), so the test does
    not race a sender that never pauses on a loaded machine."""
    import sys
    sys.path.insert(0, str(COLLECTOR / "bench"))
    from load import Burst                  # the benchmark's burst of dumps
    b = Burst(32)
    r, sock = receiver(rcvbuf=256 << 10)
    src = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        to = sock.getsockname()
        for i in range(0, b.packets, 64):
            for _, pkt in b.schedule[i:i + 64]:
                src.sendto(pkt, to)
            end = time.monotonic() + 2
            while r.stats()["packets"] < min(i + 64, b.packets) and time.monotonic() < end:
                time.sleep(0.0005)
        st = r.stats()
        assert st["packets"] == b.packets and st["kernel_drops"] == 0
        assert st["duplicates"] == b.packets * 2 // 3
        assert st["ring_used"] >= b.packets // 3 * proto.PACKET_SIZE   # all still queued
        reasm = Reassembler(chunk_hash=rx.chunk_hash)
        dumps = []
        for buf, host, port in take_all(r, b.packets // 3):
            assert isinstance(buf, rx.Group)
            dumps += reasm.feed_group(buf.packets, buf.hashes, host, port)
    finally:
        r.stop()
        sock.close()
        src.close()
    assert len(dumps) == 32 and all(d.complete for d in dumps) and st["grouped"] == 32
    assert {d.boot_id: d.log.encode() for d in dumps} == b.logs


def test_a_full_ring_makes_the_thread_wait_and_the_kernel_drops_are_counted():
    r, sock = receiver(rcvbuf=64 << 10, ring=64 << 10)
    src = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        send_numbered(src, sock, 2000)
        time.sleep(0.3)
        st = r.stats()
        assert st["ring_waits"] > 0 and st["ring_used_max"] <= 64 << 10
        got = take_all(r, 2000, timeout=1)     # the thread drains the kernel buffer
        src.sendto(b"last", sock.getsockname())   # carries the kernel's drop count
        got += take_all(r, 1, timeout=2)
        st = r.stats()
    finally:
        r.stop()
        sock.close()
        src.close()
    assert st["kernel_drops"] > 0
    assert len(got) + st["kernel_drops"] == 2001 == st["packets"] + st["kernel_drops"]
    seq = [int.from_bytes(g[0][:4], "little") for g in got if g[0] != b"last"]
    assert seq == sorted(seq)               # in order, none twice


def test_stop_while_the_thread_waits_for_room():
    r, sock = receiver(ring=64 << 10)
    src = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for _ in range(200):
        src.sendto(b"y" * 1000, sock.getsockname())
    time.sleep(0.2)
    assert r.stats()["ring_waits"] > 0
    r.stop()                                # returns: the waiting thread is woken
    sock.close()
    src.close()


def test_not_built_means_python_reads(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("NETOOPS_RX_LIB", str(tmp_path / "absent.so"))
    monkeypatch.setattr(rx, "_lib", None)
    assert rx.load() is None
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with pytest.raises(OSError, match="not built"):
        rx.CReceiver(sock)
    sock.close()


def test_a_take_that_leaves_records_keeps_the_notify_fd_readable():
    """One take copies at most 4 MiB; if more is queued the selector must
    still see the receiver as ready, or the rest waits for the next datagram."""
    import select
    r, sock = receiver(rcvbuf=16 << 20)
    src = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for i in range(4000):               # 5.6 MB of distinct packets
            src.sendto(proto.encode(boot_id=i, packet_count=2), sock.getsockname())
            end = time.monotonic() + 2      # the kernel buffer may hold only ~100
            while i % 64 == 63 and r.stats()["packets"] <= i and time.monotonic() < end:
                time.sleep(0.0005)
        end = time.monotonic() + 5
        while (r.stats()["packets"] < 4000 or r.stats()["groups"]) and \
                time.monotonic() < end:
            time.sleep(0.01)            # and the groups held are passed on
        r.drain()
        first = list(r.take())
        assert 0 < len(first) < 4000
        ready, _, _ = select.select([r], [], [], 0)
        assert ready == [r]
        rest = take_all(r, 4000 - len(first))
        assert len(first) + len(rest) == 4000
    finally:
        r.stop()
        sock.close()
        src.close()


def test_finish_loses_nothing_the_thread_has_read():
    """Halting while the thread waits for room in a small ring: what it read
    comes out of finish(), the rest is still in the socket."""
    r, sock = receiver(rcvbuf=8 << 20, ring=64 << 10)
    src = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        send_numbered(src, sock, 2000)
        time.sleep(0.2)
        assert r.stats()["ring_waits"] > 0
        got = [g[0] for g in r.finish(time.monotonic() + 5)]
        st = r.stats()
        assert st["exited"] and not st["error"] and st["packets"] == len(got)
        sock.setblocking(False)
        rest = []
        try:
            while True:
                rest.append(sock.recv(2048))
        except BlockingIOError:
            pass
    finally:
        r.stop()
        sock.close()
        src.close()
    seq = [int.from_bytes(d[:4], "little") for d in got + rest]
    assert seq == list(range(2000))


def test_room_for_a_group_evicts_only_what_it_needs():
    """16 dumps of 128 packets arrive interleaved into an 8 MiB ring, whose
    groups may hold 2 MiB (about 11 such dumps): the evictions that make
    room flush a few groups, not all the others each time."""
    import sys
    sys.path.insert(0, str(COLLECTOR / "bench"))
    from load import Burst
    b = Burst(16)
    r, sock = receiver(ring=8 << 20)
    src = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        first_copy = b.schedule[:b.packets // 3]
        for i, (_, pkt) in enumerate(first_copy):
            src.sendto(pkt, sock.getsockname())
            end = time.monotonic() + 2      # the kernel buffer may hold only ~100
            while i % 64 == 63 and r.stats()["packets"] <= i and time.monotonic() < end:
                time.sleep(0.0005)
        got = take_all(r, len(first_copy))
        st = r.stats()
    finally:
        r.stop()
        sock.close()
        src.close()
    assert size(got) == len(first_copy) and st["kernel_drops"] == 0
    assert st["grouped"] >= 6, st


def wait_synced(r: rx.CReceiver, pos: tuple[int, int], timeout: float = 5) -> dict[str, int]:
    end = time.monotonic() + timeout
    while True:
        st = r.stats()
        if (st["log_synced_seq"], st["log_synced_off"]) >= pos or time.monotonic() > end:
            return st


def test_packet_log_holds_every_grouped_packet_and_says_when_it_is_synced(tmp_path: Path):
    prefix = str(tmp_path / "db.packets0.")
    r, sock = receiver(log_prefix=prefix, log_seq=7)
    src = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    src.bind(("127.0.0.1", 0))
    pkts = packets(fixture("null_deref.txt"), copies=3)
    n = len(pkts) // 3
    odd = [b"short", proto.encode(version=9)]
    try:
        for p in pkts + odd:
            src.sendto(p, sock.getsockname())
        got = take_all(r, n + len(odd))
        group = got[0][0]
        assert isinstance(group, rx.Group)
        st = wait_synced(r, group.log_pos)
    finally:
        r.stop()
        sock.close()
    port = src.getsockname()[1]
    src.close()
    # One copy of each packet, none of the others, in arrival order.
    record = 48 + proto.PACKET_SIZE
    assert (group.log_first, group.log_pos) == (7, (7, n * record))
    assert (st["log_seq"], st["log_error"]) == (7, 0)
    assert (st["log_synced_seq"], st["log_synced_off"]) == (7, n * record)
    assert st["log_synced_ns"] / 1e9 == pytest.approx(time.time(), abs=10)
    assert [seq for seq, _ in numbered(prefix)] == [7]
    records, clean = rx.read_log((tmp_path / "db.packets0.00000007").read_bytes())
    assert clean
    assert [pkt for pkt, _, _, _ in records] == pkts[:n]
    assert {(host, p) for _, host, p, _ in records} == {("127.0.0.1", port)}
    # What a crash in the middle of a write leaves: the records before it.
    buf = (tmp_path / "db.packets0.00000007").read_bytes()
    cut, clean = rx.read_log(buf[:-100])
    assert not clean and len(cut) == n - 1
    bad = bytearray(buf)
    bad[3 * record + 100] ^= 1
    damaged, clean = rx.read_log(bytes(bad))
    assert not clean and len(damaged) == 3


def test_without_a_writable_log_the_receiver_runs_and_says_why(tmp_path: Path):
    r, sock = receiver(log_prefix=str(tmp_path / "missing" / "db.packets0."))
    src = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    pkts = packets(fixture("null_deref.txt"), copies=1)
    try:
        for p in pkts:
            src.sendto(p, sock.getsockname())
        got = take_all(r, len(pkts))
        st = r.stats()
    finally:
        r.stop()
        sock.close()
        src.close()
    assert isinstance(got[0][0], rx.Group) and got[0][0].log_pos == (0, 0)
    assert st["log_error"] == 2 and st["log_seq"] == 0      # ENOENT


def test_a_packet_log_segment_is_closed_when_it_ages(tmp_path: Path):
    """Closed (and synced) once its first packet is log_age old, while
    nothing more arrives: Python may then delete it."""
    prefix = str(tmp_path / "db.packets0.")
    r, sock = receiver(log_prefix=prefix, log_age=0.3)
    src = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    pkts = packets(fixture("null_deref.txt"), copies=1)
    try:
        for p in pkts:
            src.sendto(p, sock.getsockname())
        take_all(r, len(pkts))
        assert r.stats()["log_seq"] == 1
        end = time.monotonic() + 5
        marks: list[rx.Datagram] = []
        while r.stats()["log_synced_seq"] < 2 and time.monotonic() < end:
            marks += [d for d, _, _ in r.take(0.05)]
        marks += [d for d, _, _ in r.take(0.2)]
        st = r.stats()
        # in order with the groups: Python may now let segment 1 go
        assert marks == [rx.LogMark(2)]
        time.sleep(0.5)         # an empty segment does not age
        assert r.stats()["log_seq"] == 2
    finally:
        r.stop()
        sock.close()
        src.close()
    assert (st["log_seq"], st["log_synced_seq"], st["log_synced_off"]) == (2, 2, 0)
    [(one, first), (two, second)] = numbered(prefix)
    assert (one, two) == (1, 2)
    assert len(rx.read_log(first.read_bytes())[0]) == len(pkts)
    assert second.stat().st_size == 0
