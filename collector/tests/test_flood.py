# SPDX-License-Identifier: GPL-2.0
"""Floods and hostile datagrams through the server's own pipeline (reassembly,
analysis, the junk cap, storage), in process with a simulated clock.

The stated bounds (README, collector section): at default settings, what the
reassembler holds never exceeds ``Limits().bound`` (320 MiB, charged per
structure; the charge is checked against tracemalloc below), and 10^6 fuzzed
datagrams from a few addresses leave a database under 8 MiB.
"""

from __future__ import annotations

import io
import random
import struct
import tracemalloc
from pathlib import Path

from collector_util import Clock, fixture, packets
from netoops_collector import proto, store
from netoops_collector.reassembly import Limits, Reassembler
from netoops_collector.server import ServeConfig, Server

DB_BOUND = 8 << 20
_HDR = struct.Struct("<6H3I")


def fuzz(n: int, seed: int) -> "list[tuple[bytes, str, int]]":
    """``n`` hostile datagrams: random bytes, plausible headers over random
    bodies (any claimed packet_count), and real packets with bits flipped."""
    rnd = random.Random(seed)
    bodies = [rnd.randbytes(proto.PACKET_SIZE - _HDR.size) for _ in range(64)]
    real = packets(fixture("gpf.txt"), boot_id=77)
    out = []
    for i in range(n):
        src = f"198.51.100.{i % 4}"
        port = rnd.randrange(1024, 65536)
        kind = rnd.random()
        if kind < 0.4:
            buf = rnd.choice(bodies)[:rnd.randrange(0, 1500)]
        elif kind < 0.8:
            count = rnd.randrange(1, 4097)
            buf = _HDR.pack(3, rnd.randrange(16), 388, 2, 216, rnd.choice((1, 3)), count,
                            rnd.randrange(count), rnd.randrange(1 << 32)) + rnd.choice(bodies)
        else:
            b = bytearray(rnd.choice(real))
            for _ in range(rnd.randrange(1, 4)):
                b[rnd.randrange(len(b))] ^= 1 << rnd.randrange(8)
            buf = bytes(b)
        out.append((buf, src, port))
    return out


def test_a_million_fuzzed_datagrams_around_real_dumps(tmp_path: Path):
    clock = Clock()
    db = tmp_path / "c.sqlite3"
    err = io.StringIO()
    srv = Server(ServeConfig(db=db), err=err, clock=clock)
    reasm = srv.reasm
    bound = Limits().bound
    logs = [fixture(name) for name in ("null_deref.txt", "gpf.txt", "warn.txt", "bug_on.txt")]
    real = [(p, "192.0.2.2", 6666) for i in range(40)
            for p in packets(logs[i % 4], copies=3, boot_id=1000 + i)]
    total = 1_000_000
    stream = fuzz(total - len(real), seed=23)
    step = len(stream) // len(real)
    for i, item in enumerate(real):          # spread the real dumps through the flood
        stream.insert(i * step + i, item)
    held = 0
    for i, (buf, src, port) in enumerate(stream):
        srv._ready.extend(reasm.feed(buf, src, port, clock.t))
        if i % 1000 == 999:
            clock.t += 0.05
            held = max(held, reasm.held_bytes)
            srv._ready.extend(reasm.expire(clock.t))
            srv._store(everything=True)
    clock.t += 100
    srv._ready.extend(reasm.expire(clock.t))
    srv._ready.extend(reasm.flush(clock.t))
    srv._store(everything=True)
    srv.store.close()
    assert reasm.stats["packets"] == total
    assert held <= bound
    conn = store.open_readonly(db)
    rows = [r for r in store.list_dumps(conn) if r["source"] == "192.0.2.2"]
    assert len(rows) == 40 and all(r["complete"] for r in rows)
    for r in rows:
        assert store.get_dump(conn, r["id"])["log"] == logs[(r["boot_id"] - 1000) % 4]
    st = store.stats(conn)
    conn.close()
    size = sum(f.stat().st_size for f in tmp_path.iterdir() if f.name.startswith("c.sqlite3"))
    print(f"db {size} bytes, {st['stored']['dumps']} dumps stored, counters {st['counters']}")
    assert size < DB_BOUND
    assert st["stored"]["dumps"] <= 4 * ServeConfig(db=db).dumps_per_source + 40
    c = st["counters"]
    assert c["rejected_rate"] > total // 4          # new dumps beyond an address's share
    assert c["dumps_junk_dropped"] + c["dumps_rate_dropped"] > 1000


def test_the_memory_charge_covers_what_python_really_allocates():
    """The byte caps are only a bound if the charge per structure is honest:
    dumps in flight and remembered, measured with tracemalloc."""
    r = Reassembler(Limits(max_dumps=100_000, max_dumps_per_source=100_000),
                    clock=lambda: 0.0)
    pkts = [proto.encode(data=bytes([65 + i % 26]) * 1024, packet_count=64, packet_no=no,
                         boot_id=i) for i in range(300) for no in range(0, 64, 2)]
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    for p in pkts:
        r.feed(p, "192.0.2.2", 1, 0.0)
    used = tracemalloc.get_traced_memory()[0] - base
    assert used <= r.held_bytes, (used, r.held_bytes)
    r.expire(100.0)                          # all partial: remembered with their chunks
    used = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    assert r.inflight_bytes == 0
    assert used <= r.held_bytes + 300 * 2048, (used, r.held_bytes)
