# SPDX-License-Identifier: GPL-2.0
"""Reassembly: duplicates, reordering, loss, interleaving, timeouts, caps."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collector_util import Clock, fixture, packets
from netoops_collector import proto
from netoops_collector.reassembly import Dump, Limits, Reassembler, assemble, ranges

LOG = fixture("null_deref.txt")           # about 4.6 KiB: 5 chunks
N = len(proto.split_log(LOG.encode()))


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
    assert not dump.complete and dump.missing == [(1, 1), (3, 3)]
    assert dump.finalised_by == "timeout" and dump.packets_received == N - 2
    assert r.stats["dumps_partial"] == 1 and r.stats["partial_timeout"] == 1
    # the newest chunk (packet_no 0) holds the end of the oops: it is there
    newest = proto.split_log(LOG.encode())[0].decode()
    assert dump.log.endswith(newest)
    assert dump.log.count("--- netoops: 1 chunk of 5 missing here (packet_no 3") == 1
    assert dump.log.count("--- netoops: 1 chunk of 5 missing here (packet_no 1") == 1
    # a late chunk reopens the dump; the last one completes it: the same
    # dump (uid), a new revision, to replace the stored partial one
    late = {proto.decode(p).packet_no: p for p in pkts}
    assert not r.feed(late[1], "192.0.2.2", 2004)
    assert r.stats["late"] == 1 and r.inflight == 1
    [fixed] = r.feed(late[3], "192.0.2.2", 2004)
    assert fixed.complete and fixed.log == LOG
    assert (fixed.uid, fixed.revision) == (dump.uid, 1)
    assert r.stats["dumps_complete"] == 1 and r.stats["dumps_partial"] == 0
    assert r.stats["dumps_repaired"] == 1
    # and its third copy is a duplicate, never a new dump
    assert feed_all(r, pkts[2 * N:]) == [] and r.flush() == []


def test_gap_marker_at_the_oldest_end_and_runs_grouped():
    text = assemble({0: b"new\n", 3: b"mid"}, 6)
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
    assert assemble({0: b"tail\n", 1: b"head " + b"\0" * 100}, 2) == "head tail\n"


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
                proto.encode(packet_count=20000), proto.encode(packet_count=2, packet_no=2)):
        assert not r.feed(buf, "192.0.2.9", 1)
    st = r.stats
    assert (st["rejected_truncated"], st["rejected_oversize"], st["rejected_version"],
            st["rejected_arch"], st["rejected_type"], st["rejected_offsets"],
            st["rejected_packet_count"], st["rejected_packet_no"]) == (2, 1, 1, 1, 1, 1, 1, 1)
    assert st["packets"] == 9 and st["accepted"] == 0
    assert r.inflight == 0 and r.flush() == []


def test_per_address_cap_finalises_the_least_active_dump_of_that_address():
    """One host on many ports is one source: its own dumps make room."""
    r, clock = reasm(max_dumps_per_source=2)
    first = [packets(LOG, dump_id=i)[0] for i in range(3)]
    assert not r.feed(first[0], "192.0.2.2", 2004)
    clock.t += 1
    assert not r.feed(first[1], "192.0.2.2", 2005)
    assert not r.feed(packets(LOG, dump_id=9)[0], "192.0.2.3", 2004)   # other address
    clock.t += 1
    [evicted] = r.feed(first[2], "192.0.2.2", 2006)
    assert evicted.dump_id == 0 and evicted.finalised_by == "capacity"
    assert evicted.missing == [(1, 4)]
    assert r.stats["partial_capacity"] == 1 and r.inflight == 3


def test_total_cap_takes_the_newest_dump_of_the_heaviest_address():
    r, clock = reasm(max_dumps=4)
    for i in range(3):                                     # 192.0.2.2 holds three
        r.feed(packets(LOG, dump_id=i)[0], "192.0.2.2", 2004 + i)
        clock.t += 1
    r.feed(packets(LOG, dump_id=7)[0], "192.0.2.3", 2004)  # the least active
    [evicted] = r.feed(packets(LOG, dump_id=3)[0], "192.0.2.9", 2004)
    assert (evicted.source, evicted.dump_id) == ("192.0.2.2", 2)
    assert r.inflight == 4


def test_a_flood_from_one_address_on_many_ports_leaves_another_dump_complete():
    """512 forged datagrams from one address on 512 ports, each the start of
    a dump claiming 127 chunks, while a real dump from another address is in
    progress: the real dump is not finalised early and ends complete."""
    r, _ = reasm(max_dumps=64, max_dumps_per_source=8)
    log = ("x" * 1023 + "\n") * 127
    real = packets(log, copies=3, boot_id=5)
    count = len(real) // 3
    out = feed_all(r, real[:50], src="192.0.2.50")
    for port in range(512):
        out += r.feed(proto.encode(packet_count=127, packet_no=port % 127, boot_id=port),
                      "192.0.2.66", 1024 + port)
    out += feed_all(r, real[50:], src="192.0.2.50")
    mine = [d for d in out if d.source == "192.0.2.50"]
    assert [d.complete for d in mine] == [True] and mine[0].log == log
    assert count == 127 and r.stats["duplicates"] == 2 * count
    assert all(d.source == "192.0.2.66" for d in out if d not in mine)


def test_the_table_of_finished_dumps_cannot_be_flushed_by_one_address():
    """A real dump completes on its first copy; a flood of finished dumps from
    another address cannot make the collector forget it, so its second and
    third copies are duplicates, never a second dump."""
    r, _ = reasm(max_recent=64, max_recent_per_source=16, max_new_dumps_per_source=10**6)
    pkts = packets(LOG, copies=3)
    assert len(feed_all(r, pkts[:N])) == 1
    for i in range(2000):
        r.feed(proto.encode(data=b"junk", boot_id=i), "192.0.2.66", 1024 + i % 50)
    assert feed_all(r, pkts[N:]) == [] and r.stats["duplicates"] == 2 * N
    assert r.stats["dumps_complete"] == 2001


def test_work_and_memory_follow_what_arrived_not_what_a_header_claims():
    from netoops_collector.reassembly import CHUNK_COST, ENTRY_COST
    r, clock = reasm(quiet_timeout=1)
    assert not r.feed(proto.encode(packet_count=4096, packet_no=7, data=b"x"), "192.0.2.9", 1)
    assert r.inflight_bytes == ENTRY_COST + CHUNK_COST
    clock.t += 2
    [dump] = r.expire()
    assert dump.missing == [(0, 6), (8, 4095)] and dump.packets_received == 1
    assert len(dump.log) < 300 and dump.log.count("--- netoops:") == 2
    assert r.inflight_bytes == 0 and r.recent_bytes == ENTRY_COST + CHUNK_COST


def test_byte_caps_bound_memory():
    from netoops_collector.reassembly import CHUNK_COST, ENTRY_COST
    per_dump = ENTRY_COST + 4 * CHUNK_COST
    r, _ = reasm(max_bytes=3 * per_dump, max_bytes_per_source=per_dump)
    big = "x" * (20 * 1024)                          # 20 chunks
    out = feed_all(r, packets(big, dump_id=1))
    assert r.inflight_bytes <= per_dump
    assert all(d.finalised_by == "capacity" for d in out) and out
    assert r.stats["late_dropped"] > 0        # no reopening while memory is short
    for i in range(5):
        out += feed_all(r, packets(big, dump_id=i)[:3], src=f"192.0.2.{10 + i}")
    assert r.inflight_bytes <= 3 * per_dump
    kept = sum(d.packets_received for d in out)
    assert kept + sum(len(e.chunks) for e in r._inflight.values()) == r.stats["accepted"]


def test_flush_finalises_everything_in_flight_as_partial():
    r, _ = reasm()
    feed_all(r, packets(LOG)[:2])
    feed_all(r, packets(LOG, boot_id=2)[:1])
    out = r.flush()
    assert sorted(d.packets_received for d in out) == [1, 2]
    assert {d.finalised_by for d in out} == {"shutdown"}
    assert r.stats["partial_shutdown"] == 2 and r.inflight == 0


def test_single_packet_dump():
    r, _ = reasm()
    [dump] = r.feed(proto.encode(data=b"one line\n"), "192.0.2.2", 2004)
    assert dump.log == "one line\n" and dump.complete


def test_memory_of_finalised_keys_is_bounded():
    r, _ = reasm(max_recent=2)
    for boot in (1, 2, 3):
        feed_all(r, packets(LOG, boot_id=boot))
    # boot 1 is forgotten (count cap), 2 and 3 are remembered
    assert feed_all(r, packets(LOG, boot_id=3)) == [] and r.stats["duplicates"] == N
    assert len(feed_all(r, packets(LOG, boot_id=1))) == 1     # forgotten: a new dump
    assert r.stats["dumps_complete"] == 4
    from netoops_collector.reassembly import ENTRY_COST, HASH_COST
    r, _ = reasm(max_recent_bytes=ENTRY_COST + HASH_COST * N)   # room for one dump
    feed_all(r, packets(LOG, boot_id=1))
    feed_all(r, packets(LOG, boot_id=2))
    assert r.recent_bytes == ENTRY_COST + HASH_COST * N
    assert len(feed_all(r, packets(LOG, boot_id=1))) == 1     # forgotten: a new dump


@settings(max_examples=200, deadline=None, database=None)
@given(st.lists(st.booleans(), min_size=3 * N, max_size=3 * N),
       st.lists(st.sampled_from([0.0, 0.5, 12.0]), min_size=3 * N, max_size=3 * N),
       st.randoms(use_true_random=False))
def test_three_copies_in_any_order_and_timing_make_one_dump(lost: list[bool],
                                                            gaps: list[float], rnd):
    """Three copies with any loss, order and pauses (some longer than the
    quiet timeout, all inside the recent window): one dump (one uid), stored
    partial at most once per repair, whose last revision has every chunk that
    arrived, and is complete when every packet_no arrived at least once."""
    r, clock = reasm(quiet_timeout=10, recent_ttl=60)
    pkts = packets(LOG, copies=3)
    rnd.shuffle(pkts)
    sent = [p for p, gone in zip(pkts, lost) if not gone]
    out: list[Dump] = []
    for p, gap in zip(sent, gaps):
        clock.t += gap
        out += r.expire()
        out += r.feed(p, "192.0.2.2", 2004)
    clock.t += 11
    out += r.expire()
    arrived = {proto.decode(p).packet_no for p in sent}
    if not arrived:
        assert out == []
        return
    assert len({d.uid for d in out}) == 1
    assert [d.revision for d in out] == list(range(len(out)))
    last = out[-1]
    assert last.packets_received == len(arrived)
    assert last.complete == (len(arrived) == N)
    if last.complete:
        assert last.log == LOG
    assert r.stats["dumps_complete"] + r.stats["dumps_partial"] == 1


def test_dumps_over_4096_packets_and_the_configured_limit():
    """A 5 MiB log (5,120 packets, over the old fixed limit) is one complete
    dump at default settings; a dump over the configured limit is rejected."""
    log = ("y" * 1023 + "\n") * 5120
    r, _ = reasm()
    [dump] = feed_all(r, packets(log))
    assert dump.complete and dump.packet_count == 5120 and dump.log == log
    r, _ = reasm(max_packet_count=5119)
    assert feed_all(r, packets(log)[:10]) == []
    assert r.stats["rejected_packet_count"] == 10 and r.inflight == 0


def test_new_dumps_per_address_are_rate_limited_and_copies_are_not():
    r, clock = reasm(max_new_dumps_per_source=3, new_dumps_window=30)
    for boot in range(3):
        feed_all(r, packets(LOG, boot_id=boot)[:2], src="192.0.2.66")
    assert r.inflight == 3
    # a fourth new dump from that address is turned away, cheaply...
    assert feed_all(r, packets(LOG, boot_id=9), src="192.0.2.66") == []
    assert r.stats["rejected_rate"] == N and r.inflight == 3
    assert r.source_delta[("192.0.2.66", "rejected_rate")] == N
    # ...while its dumps in flight go on, and other addresses are not affected
    [done] = feed_all(r, packets(LOG, boot_id=0)[2:], src="192.0.2.66")
    assert done.complete
    assert len(feed_all(r, packets(LOG, boot_id=9), src="192.0.2.7")) == 1
    clock.t += 10                       # a third of the window: one more start
    assert len(feed_all(r, packets(LOG, boot_id=9), src="192.0.2.66")) == 1
