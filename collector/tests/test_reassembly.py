# SPDX-License-Identifier: GPL-2.0
"""Reassembly: duplicates, reordering, loss, interleaving, timeouts, caps."""

from __future__ import annotations

import random
from typing import Any

import pytest

from collector_util import fixture, packets
from netoops_collector import proto
from netoops_collector.reassembly import Dump, Limits, Reassembler, assemble, ranges

LOG = fixture("null_deref.txt")           # about 4.6 KiB: 5 chunks
N = len(proto.split_log(LOG.encode()))


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def reasm(**limits: Any) -> tuple[Reassembler, Clock]:
    clock = Clock()
    return Reassembler(Limits(**limits), clock=clock, wallclock=lambda: 1.7e9), clock


def feed_all(r: Reassembler, pkts: list[bytes], src: str = "192.0.2.2",
             port: int = 2004) -> list[Dump]:
    out: list[Dump] = []
    for p in pkts:
        out += r.feed(p, src, port)
    return out


def test_in_order_single_copy_completes_at_the_last_packet():
    r, _ = reasm()
    pkts = packets(LOG, kernel_version="6.1.0-netoops", user_blob="rack=7")
    assert N == 5 and len(pkts) == N
    assert feed_all(r, pkts[:-1]) == []
    [dump] = r.feed(pkts[-1], "192.0.2.2", 2004)
    assert dump.complete and dump.missing == [] and dump.finalised_by == "complete"
    assert dump.log == LOG
    assert (dump.source, dump.port, dump.boot_id, dump.dump_id, dump.type) == \
        ("192.0.2.2", 2004, 1, 7, 1)
    assert dump.kernel_version == "6.1.0-netoops" and dump.user_blob == "rack=7"
    assert dump.regs["rip"] == 0xffffffffc0005009 and dump.regs["ss"] == 0x18
    assert (dump.x86_vendor, dump.x86_family, dump.x86_model, dump.x86_stepping) == \
        (0, 6, 85, 7)
    assert r.inflight == 0 and r.inflight_bytes == 0


def test_three_copies_shuffled_make_one_dump_and_count_duplicates():
    r, _ = reasm()
    pkts = packets(LOG, copies=3)
    random.Random(5).shuffle(pkts)
    dumps = feed_all(r, pkts)
    assert len(dumps) == 1 and dumps[0].log == LOG
    assert r.stats["accepted"] == N
    assert r.stats["duplicates"] == 2 * N
    assert r.stats["dumps_complete"] == 1 and r.stats["dumps_partial"] == 0
    assert r.flush() == []


def test_copies_arriving_after_completion_are_duplicates_not_a_new_dump():
    r, clock = reasm(quiet_timeout=1)
    pkts = packets(LOG, copies=3)
    assert len(feed_all(r, pkts[:N])) == 1
    clock.t += 5                                   # well past the quiet timeout
    assert r.expire() == []
    assert feed_all(r, pkts[N:]) == []
    assert r.flush() == [] and r.expire(clock.t + 100) == []
    assert r.stats["duplicates"] == 2 * N and r.stats["dumps_complete"] == 1


def test_loss_in_one_copy_is_filled_by_the_next():
    r, _ = reasm()
    pkts = packets(LOG, copies=3)
    lossy = [p for i, p in enumerate(pkts) if i not in (0, 2, 3, N + 2, N + 4)]
    [dump] = feed_all(r, lossy)
    assert dump.complete and dump.log == LOG


def test_reversed_order():
    r, _ = reasm()
    [dump] = feed_all(r, list(reversed(packets(LOG))))
    assert dump.log == LOG


def test_quiet_timeout_gives_a_partial_dump_with_the_exact_missing_list():
    r, clock = reasm(quiet_timeout=10)
    pkts = packets(LOG, copies=3)
    lost = {1, 3}
    kept = [p for p in pkts if proto.decode(p).packet_no not in lost]
    assert feed_all(r, kept) == []
    clock.t += 9.9
    assert r.expire() == []
    assert r.next_deadline() == pytest.approx(1010.0)
    clock.t += 0.2
    [dump] = r.expire()
    assert not dump.complete and dump.missing == [1, 3]
    assert dump.finalised_by == "timeout" and dump.packets_received == N - 2
    assert r.stats["dumps_partial"] == 1 and r.stats["partial_timeout"] == 1
    # the newest chunk (packet_no 0) holds the end of the oops: it is there
    newest = proto.split_log(LOG.encode())[0].decode()
    assert dump.log.endswith(newest)
    assert dump.log.count("--- netoops: 1 chunk of 5 missing here (packet_no 3") == 1
    assert dump.log.count("--- netoops: 1 chunk of 5 missing here (packet_no 1") == 1
    # late packets of that dump are counted, not stored as a new dump
    missing_pkt = next(p for p in pkts if proto.decode(p).packet_no == 1)
    assert not r.feed(missing_pkt, "192.0.2.2", 2004)
    assert r.stats["late"] == 1 and r.flush() == []


def test_gap_marker_at_the_oldest_end_and_runs_grouped():
    chunks: list[bytes | None] = [proto.encode(data=b"new\n"), None, None,
                                  proto.encode(data=b"mid"), None, None]
    text = assemble(chunks)
    assert text.splitlines() == [
        "--- netoops: 2 chunks of 6 missing here (packet_no 4-5, up to 2048 bytes) ---",
        "mid",
        "--- netoops: 2 chunks of 6 missing here (packet_no 1-2, up to 2048 bytes) ---",
        "new",
    ]
    assert ranges([7, 1, 2, 3, 9, 10]) == "1-3,7,9-10"


def test_nul_padding_inside_the_stream_is_stripped():
    # netoops sends the two ring-buffer segments separately, so the older
    # segment's zero-padded tail lands in the middle of the stream
    chunks = [proto.encode(data=b"tail\n", packet_no=0, packet_count=2),
              proto.encode(data=b"head " + b"\0" * 100, packet_no=1, packet_count=2)]
    assert assemble(chunks) == "head tail\n"


def test_interleaved_dumps_from_several_sources_and_boots():
    r, _ = reasm()
    logs = {("192.0.2.2", 2004, 1): fixture("gpf.txt"),
            ("192.0.2.3", 2004, 1): fixture("warn.txt"),
            ("2001:db8::4", 2004, 1): fixture("bug_on.txt"),
            ("192.0.2.2", 6666, 1): fixture("sysrq_panic.txt"),
            ("192.0.2.2", 2004, 2): fixture("soft_lockup.txt")}
    streams = [[(src, port, p) for p in packets(log, copies=3, boot_id=boot, dump_id=7)]
               for (src, port, boot), log in logs.items()]
    mixed = [item for group in zip(*[s * 3 for s in streams]) for item in group]
    random.Random(1).shuffle(mixed)
    out: list[Dump] = []
    for src, port, p in mixed:
        out += r.feed(p, src, port)
    got = {(d.source, d.port, d.boot_id): d.log for d in out}
    assert got == logs
    assert r.stats["rejected_conflict"] == 0


def test_soft_and_oops_dumps_with_the_same_ids_are_separate():
    r, _ = reasm()
    a = packets(fixture("soft_dump.txt"), type=proto.TYPE_SOFT)
    b = packets(fixture("null_deref.txt"), type=proto.TYPE_OOPS)
    out = feed_all(r, a + b)
    assert sorted(d.type for d in out) == [1, 3]


@pytest.mark.parametrize("change", [
    {"packet_count": 99}, {"kernel_version": "6.1.0-other"}, {"user_blob": "other"},
    {"regs": {"rip": 1}}, {"cpu": (2, 25, 1, 1)},
])
def test_packets_contradicting_their_dump_are_rejected(change: dict[str, object]):
    r, _ = reasm()
    good = packets(LOG)
    bad = proto.encode(**{**dict(data=b"evil", packet_count=N, packet_no=2, boot_id=1,
                                 dump_id=7, kernel_version="6.1.0-netoops",
                                 regs=proto.decode(good[0]).registers),
                          **change})  # type: ignore[arg-type]
    assert not r.feed(good[0], "192.0.2.2", 2004)
    assert not r.feed(bad, "192.0.2.2", 2004)
    assert r.stats["rejected_conflict"] == 1
    [dump] = feed_all(r, good[1:])
    assert dump.log == LOG
    # ... and after the dump is finalised too
    assert not r.feed(bad, "192.0.2.2", 2004)
    assert r.stats["rejected_conflict"] == 2 and r.flush() == []


def test_other_bytes_for_a_packet_no_already_held_are_a_conflict():
    r, _ = reasm()
    good = packets(LOG)
    forged = bytearray(good[1])
    forged[-1] ^= 0x20
    feed_all(r, good[:2])
    assert not r.feed(bytes(forged), "192.0.2.2", 2004)
    assert r.stats["rejected_conflict"] == 1
    [dump] = feed_all(r, good[2:])
    assert dump.log == LOG


def test_key_is_free_again_after_the_recent_window():
    r, clock = reasm(recent_ttl=60)
    feed_all(r, packets(LOG))
    clock.t += 61
    r.expire()
    [again] = feed_all(r, packets(fixture("gpf.txt")))   # same key: a reboot, same ids
    assert "general protection fault" in again.log


def test_rejected_packets_are_counted_by_reason():
    r, _ = reasm()
    good = proto.encode(packet_count=2)
    for buf in (b"", good[:100], good + b"x", proto.encode(version=1),
                proto.encode(arch=9), proto.encode(type=7), proto.encode(arch_offset=10),
                proto.encode(packet_count=5000), proto.encode(packet_count=2, packet_no=2)):
        assert not r.feed(buf, "192.0.2.9", 1)
    st = r.stats
    assert (st["rejected_truncated"], st["rejected_oversize"], st["rejected_version"],
            st["rejected_arch"], st["rejected_type"], st["rejected_offsets"],
            st["rejected_packet_count"], st["rejected_packet_no"]) == (2, 1, 1, 1, 1, 1, 1, 1)
    assert st["packets"] == 9 and st["accepted"] == 0
    assert r.inflight == 0 and r.flush() == []


def test_per_source_cap_finalises_the_oldest_dump_of_that_source():
    r, clock = reasm(max_dumps_per_source=2)
    first = [packets(LOG, dump_id=i)[0] for i in range(3)]
    assert not r.feed(first[0], "192.0.2.2", 2004)
    clock.t += 1
    assert not r.feed(first[1], "192.0.2.2", 2004)
    assert not r.feed(packets(LOG, dump_id=9)[0], "192.0.2.3", 2004)   # other source
    clock.t += 1
    [evicted] = r.feed(first[2], "192.0.2.2", 2004)
    assert evicted.dump_id == 0 and evicted.finalised_by == "capacity"
    assert evicted.missing == [1, 2, 3, 4]
    assert r.stats["partial_capacity"] == 1 and r.inflight == 3


def test_total_cap_finalises_the_least_recently_active_dump():
    r, clock = reasm(max_dumps=3)
    for i in range(3):
        r.feed(packets(LOG, dump_id=i)[0], f"192.0.2.{i + 2}", 2004)
        clock.t += 1
    r.feed(packets(LOG, dump_id=0)[1], "192.0.2.2", 2004)   # dump 0 is active again
    [evicted] = r.feed(packets(LOG, dump_id=3)[0], "192.0.2.9", 2004)
    assert evicted.dump_id == 1
    assert r.inflight == 3


def test_byte_caps_bound_memory():
    per = proto.PACKET_SIZE
    r, _ = reasm(max_bytes=10 * per, max_bytes_per_source=4 * per)
    big = "x" * (20 * 1024)                          # 20 chunks
    out = feed_all(r, packets(big, dump_id=1))
    assert r.inflight_bytes <= 4 * per
    assert all(d.finalised_by == "capacity" for d in out) and out
    for i in range(5):
        out += feed_all(r, packets(big, dump_id=i)[:3], src=f"192.0.2.{10 + i}")
    assert r.inflight_bytes <= 10 * per
    stored = sum(d.packets_received for d in out)
    assert stored + r.inflight_bytes // per == r.stats["accepted"]


def test_flush_finalises_everything_in_flight_as_partial():
    r, _ = reasm()
    feed_all(r, packets(LOG)[:2])
    feed_all(r, packets(LOG, boot_id=2)[:1])
    out = r.flush()
    assert sorted(len(d.missing) for d in out) == [3, 4]
    assert {d.finalised_by for d in out} == {"shutdown"}
    assert r.stats["partial_shutdown"] == 2 and r.inflight == 0


def test_single_packet_dump():
    r, _ = reasm()
    [dump] = r.feed(proto.encode(data=b"one line\n"), "192.0.2.2", 2004)
    assert dump.log == "one line\n" and dump.complete


def test_memory_of_finalised_keys_is_bounded():
    r, _ = reasm(max_recent=2, max_recent_packets=3 * N)
    for boot in (1, 2, 3):
        feed_all(r, packets(LOG, boot_id=boot))
    # boot 1 is forgotten (count cap), 2 and 3 are remembered
    assert feed_all(r, packets(LOG, boot_id=3)) == [] and r.stats["duplicates"] == N
    assert len(feed_all(r, packets(LOG, boot_id=1))) == 1     # forgotten: a new dump
    assert r.stats["dumps_complete"] == 4
    r, _ = reasm(max_recent_packets=N + 1)          # room for one dump's hashes
    feed_all(r, packets(LOG, boot_id=1))
    feed_all(r, packets(LOG, boot_id=2))
    assert len(feed_all(r, packets(LOG, boot_id=1))) == 1     # forgotten: a new dump
