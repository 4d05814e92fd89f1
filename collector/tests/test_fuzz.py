# SPDX-License-Identifier: GPL-2.0
"""Property tests: random and mutated datagrams never crash the collector and
never turn into a stored dump of their own."""

from __future__ import annotations

import os
import random
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis.configuration import set_hypothesis_home_dir
from hypothesis import strategies as st

from collector_util import fixture, packets
from netoops_collector import proto, report, store
from netoops_collector.reassembly import Dump, Limits, Reassembler
from netoops_collector.report import analyse
from netoops_collector.server import safe_analyse

# Hypothesis caches data in ./.hypothesis by default: keep the work tree clean.
if not os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
    set_hypothesis_home_dir(os.path.join(tempfile.gettempdir(), "netoops-hypothesis"))

FAST = settings(max_examples=150, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow])
LOG = fixture("gpf.txt")
GOOD = packets(LOG, copies=1, boot_id=3, dump_id=9)
N = len(GOOD)


def run(datagrams: list[bytes]) -> tuple[Reassembler, list[Dump]]:
    r = Reassembler(Limits(max_dumps=4, max_bytes=64 * proto.PACKET_SIZE,
                           max_dumps_per_source=2, max_bytes_per_source=32 * proto.PACKET_SIZE))
    out: list[Dump] = []
    for i, d in enumerate(datagrams):
        out += r.feed(d, "192.0.2.2", 2004, now=float(i))
    out += r.expire(now=1e6)
    out += r.flush()
    return r, out


@FAST
@given(st.lists(st.binary(max_size=2000), max_size=30))
def test_random_bytes_are_rejected(blobs: list[bytes]):
    r, out = run(blobs)
    assert out == []
    rejected = sum(v for k, v in r.stats.items() if k.startswith("rejected_"))
    assert rejected == len(blobs) == r.stats["packets"]


@FAST
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 9), st.integers(0, 9),
                          st.binary(min_size=proto.PACKET_SIZE - 24,
                                    max_size=proto.PACKET_SIZE - 24)), max_size=12))
def test_random_contents_behind_a_plausible_header(items: list[tuple[int, int, int, bytes]]):
    """Valid numbers, random everything else: dumps only from accepted packets."""
    import struct
    dgrams = [struct.pack("<6H3I", 3, dump_id, 388, 2, 216, 1, count, no, 0) + body
              for dump_id, count, no, body in items]
    r, out = run(dgrams)
    for dump in out:
        assert 0 < dump.packet_count <= 9
        assert dump.packets_received >= 1
        analyse(dump.log)
    assert r.stats["accepted"] == sum(d.packets_received for d in out)
    assert r.stats["packets"] == len(dgrams)


mutation = st.tuples(st.integers(0, N - 1), st.sampled_from(["flip", "cut", "grow", "poke"]),
                     st.integers(0, proto.PACKET_SIZE - 1), st.integers(0, 255))


def mutate(buf: bytes, how: str, pos: int, val: int) -> bytes:
    b = bytearray(buf)
    if how == "flip":
        b[pos] ^= 1 << (val % 8)
    elif how == "cut":
        del b[pos:]
    elif how == "grow":
        b += bytes([val]) * (pos % 64 + 1)
    else:
        b[pos] = val
    return bytes(b)


KEY_BYTES = {2, 3, 10, 11, 20, 21, 22, 23}      # dump_id, type, boot_id


@FAST
@given(st.lists(mutation, min_size=1, max_size=12), st.randoms(use_true_random=False))
def test_mutated_copies_never_corrupt_or_multiply_a_dump(muts, rnd: random.Random):
    """The real dump arrives first (copy 1); mutated copies then come in any order.

    Whatever the mutation, the dump is stored once and exactly.  A mutated
    packet is rejected, or is an exact duplicate (a no-op mutation), or, if
    the mutation moved it to another key (dump_id, type, boot_id), it is a
    valid packet of another dump, which can never be told from a real one."""
    bad = [mutate(GOOD[i], how, pos, val) for i, how, pos, val in muts]
    rekeyed = sum(1 for _, how, pos, _ in muts if how in ("flip", "poke") and pos in KEY_BYTES)
    rnd.shuffle(bad)
    r, out = run(GOOD + bad)
    mine = [d for d in out if (d.boot_id, d.dump_id, d.type) == (3, 9, 1)]
    assert len(mine) == 1
    assert mine[0].complete and mine[0].log == LOG
    others = [d for d in out if d not in mine]
    assert len(others) <= rekeyed
    assert all(not d.complete or d.packet_count == 1 for d in others)
    handled = r.stats["duplicates"] + sum(v for k, v in r.stats.items()
                                          if k.startswith("rejected_"))
    assert handled + (r.stats["accepted"] - N) == len(bad)


@FAST
@given(st.lists(mutation, max_size=12), st.permutations(range(N)))
def test_mutated_packets_mixed_in_while_in_flight(muts, order):
    """Mutations mixed with the real packets: never a crash, at most the one
    dump (plus dumps whose header fields were mutated into another key)."""
    bad = [mutate(GOOD[i], how, pos, val) for i, how, pos, val in muts]
    stream = [GOOD[i] for i in order]
    for j, pkt in enumerate(bad):
        stream.insert(j * 2 % (len(stream) + 1), pkt)
    r, out = run(stream)
    mine = [d for d in out if (d.boot_id, d.dump_id, d.type) == (3, 9, 1)]
    assert len({d.uid for d in mine}) == 1
    assert len({d.uid for d in out}) <= 1 + len(bad)
    # every datagram is accounted for exactly once, and every chunk kept is
    # in the last revision of its dump
    st = r.stats
    handled = st["accepted"] + st["duplicates"] + st["late_dropped"] + sum(
        v for k, v in st.items() if k.startswith("rejected_"))
    assert handled == st["packets"] == len(stream)
    last = {d.uid: d for d in out}
    assert sum(d.packets_received for d in last.values()) == st["accepted"]
    for d in out:
        analyse(d.log)          # reports of whatever was stored never raise


@settings(max_examples=60, deadline=None, database=None)
@given(st.text(max_size=3000))
def test_report_parser_never_raises(text: str):
    rep = analyse(text)
    assert rep.title and (rep.signature is None or len(rep.signature) == 40)
    assert (rep.signature is None) == (rep.kind is None and not rep.signature_frames)


@settings(max_examples=60, deadline=None, database=None)
@given(st.lists(st.sampled_from(fixture("soft_lockup.txt").splitlines(True)
                                + fixture("timer_null_deref.txt").splitlines(True)),
                max_size=80))
def test_report_parser_on_shuffled_oops_lines(lines: list[str]):
    """Whatever the order, a log with a crash header line is reported as a
    crash (never "no crash report"), and one without is never given a kind."""
    rep = analyse("".join(lines))
    header = any(report.headers(line) for line in lines)
    assert rep.title
    assert (rep.kind is not None) == header
    if header:
        assert rep.signature and rep.title != "no crash report in the log"


def test_stored_fuzz_dumps_round_trip_through_the_db(tmp_path: Path):
    rnd = random.Random(11)
    st_ = store.Store(tmp_path / "f.sqlite3")
    _, out = run([mutate(p, "poke", rnd.randrange(388, 1412), rnd.randrange(256))
                  for p in GOOD])
    st_.save([(d, safe_analyse(d), None) for d in out])
    st_.close()
    conn = store.open_readonly(tmp_path / "f.sqlite3")
    assert len(store.list_dumps(conn)) == len(out) == 1
