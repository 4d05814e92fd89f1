# SPDX-License-Identifier: GPL-2.0
"""The journal: each finalised dump is durable before it is analysed, and
what a collector that died left unstored is stored at the next start."""

from __future__ import annotations

import io
import socket
import threading
import time
from pathlib import Path
from typing import Callable

import pytest

from collector_util import Clock, fixture, packets, rx_lib
from netoops_collector import journal, proto, rx, server, store
from netoops_collector.journal import Journal
from netoops_collector.reassembly import Dump, Reassembler
from netoops_collector.server import ServeConfig, Server


def make_dump(log: str, boot: int, lose: tuple[int, ...] = ()) -> Dump:
    """A dump reassembled from real packets; ``lose``: packet_no never sent (partial)."""
    clock = Clock()
    reasm = Reassembler(clock=clock)
    out: list[Dump] = []
    for p in packets(log, boot_id=boot):
        if proto.decode(p).packet_no not in lose:
            out += reasm.feed(p, "192.0.2.2", 6666, clock.t)
    clock.t += 3600
    out += reasm.expire(clock.t)
    [dump] = out
    dump.uid = boot         # one reassembler's uids: each test dump has its own
    return dump


def boots(db: Path) -> list[int]:
    conn = store.open_readonly(db)
    try:
        return [r["boot_id"] for r in store.list_dumps(conn)]
    finally:
        conn.close()


def in_packet_log(db: Path) -> list[Dump]:
    """The complete dumps in the C receivers' packet logs (see _rx.c)."""
    reasm = Reassembler()
    out: list[Dump] = []
    for path in Journal(db).packet_logs():
        for pkt, host, port, when in rx.read_log(path.read_bytes())[0]:
            out += reasm.feed(pkt, host, port, when)
    return out


def journaled(db: Path) -> list[Dump]:
    """What is in the journal, or in the packet log (a dump taken whole by
    the C receiver is durable there and never written to the journal)."""
    return [d for _, p in Journal(db).segments() for d in journal.decode(p.read_bytes())[0]] \
        + in_packet_log(db)


def wait(cond: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"not within {timeout}s: {what}")
        time.sleep(0.01)


def test_records_round_trip_and_a_damaged_record_ends_decoding():
    """A complete and a partial dump come back equal; a cut or flipped byte stops there."""
    whole = make_dump(fixture("null_deref.txt"), 1)
    part = make_dump(fixture("gpf.txt"), 2, lose=(1, 2))
    assert whole.complete and not part.complete and part.missing == [(1, 2)]
    a, b = journal.encode(whole), journal.encode(part)
    assert journal.decode(a) == ([whole], True)
    assert journal.decode(a + b) == ([whole, part], True)
    assert journal.decode(b"") == ([], True)
    assert journal.decode(a + b[:-1]) == ([whole], False)         # cut short
    assert journal.decode(a + b[:10]) == ([whole], False)         # cut in the header
    for at in (5, 20, len(b) - 1):                                # header, metadata, log
        bad = bytearray(b)
        bad[at] ^= 0x40
        assert journal.decode(a + bytes(bad)) == ([whole], False), at
    assert journal.decode(b"\x00" * 40 + a) == ([], False)


def test_a_segment_is_kept_until_its_dumps_are_released(tmp_path: Path):
    """Emptied in place when it is the current one, deleted once rotated."""
    db = tmp_path / "c.sqlite3"
    a, b, c = (make_dump(fixture(f), n) for n, f in
               enumerate(("null_deref.txt", "gpf.txt", "warn.txt"), 1))
    size = {d.boot_id: len(journal.encode(d)) for d in (a, b, c)}
    j = Journal(db)
    j.append([a])
    j.append([b])
    [(seq, path)] = j.segments()
    assert path.stat().st_size == j.bytes == size[1] + size[2]
    assert journal.decode(path.read_bytes()) == ([a, b], True)
    j.release(a)
    assert path.stat().st_size == j.bytes == size[1] + size[2]
    j.release(a)                                  # twice: nothing more
    j.release(c)                                  # never appended: nothing
    assert path.stat().st_size == size[1] + size[2]
    j.release(b)
    assert path.exists() and path.stat().st_size == 0 and j.bytes == 0
    j.close()
    assert not j.segments()

    j = Journal(db, segment_bytes=size[1] + 1)    # the second append closes a segment
    j.append([a])
    j.append([b])
    j.append([c])
    [(s1, p1), (s2, p2)] = j.segments()
    assert s2 == s1 + 1 and journal.decode(p2.read_bytes()) == ([c], True)
    assert j.bytes == p1.stat().st_size + p2.stat().st_size == sum(size.values())
    j.release(b)
    assert p1.exists() and j.bytes == sum(size.values())
    j.release(a)
    assert not p1.exists() and j.segments() == [(s2, p2)] and j.bytes == size[3]
    j.release(c)
    assert p2.stat().st_size == 0 and j.bytes == 0
    j.close()
    assert not j.segments()


def crashed_run(db: Path, dumps: list[Dump], stored: list[Dump]) -> Path:
    """``stored`` in the database, ``dumps`` journaled and never released."""
    srv = Server(ServeConfig(db=db), err=io.StringIO(), clock=Clock())
    srv._ready.extend(stored)
    srv._store(everything=True)
    srv.close()
    j = Journal(store.local_base(db))
    j.append(dumps)
    j.close()                                     # dumps not released: the segment stays
    [(_, path)] = j.segments()
    return path


def restart(db: Path, left: Path) -> tuple[Server, io.StringIO]:
    """Replay and store; the segment ``left`` stays until its dumps are stored."""
    err = io.StringIO()
    srv = Server(ServeConfig(db=db), err=err, clock=Clock())
    srv._replay_journal()
    assert left.exists() == bool(srv._ready)
    srv._store(everything=True)
    return srv, err


def test_replay_stores_what_the_database_lacks_once(where: Path | str, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("STATE_DIRECTORY", str(tmp_path))    # a PostgreSQL collector's journal
    db = where
    a, b, c = (make_dump(fixture(f), n) for n, f in
               enumerate(("null_deref.txt", "gpf.txt", "warn.txt"), 1))
    path = crashed_run(db, [a, b, c], stored=[b])
    assert boots(db) == [2]
    srv, err = restart(db, path)
    assert "journal: 3 dump(s) from an earlier run, 2 of them not in the database" \
        in err.getvalue()
    assert not path.exists() and not srv.journal.segments()
    srv.close()
    assert boots(db) == [2, 1, 3]
    srv, err = restart(db, path)                  # nothing left to replay
    srv.close()
    assert boots(db) == [2, 1, 3] and "earlier run" not in err.getvalue()
    path = crashed_run(db, [c], stored=[])        # all stored: deleted at start
    srv, err = restart(db, path)
    srv.close()
    assert boots(db) == [2, 1, 3] and "1 dump(s) from an earlier run, 0 of" in err.getvalue()


def test_replay_keeps_the_good_records_before_a_damaged_tail(tmp_path: Path):
    db = tmp_path / "c.sqlite3"
    a, b = make_dump(fixture("null_deref.txt"), 1), make_dump(fixture("gpf.txt"), 2, lose=(0,))
    path = crashed_run(db, [a, b], stored=[])
    with open(path, "ab") as f:
        f.write(b"NJR1\x07garbage of a write cut by the crash")
    srv, err = restart(db, path)
    assert "ends with a damaged or cut record after 2 dump(s)" in err.getvalue()
    assert not path.exists()
    srv.close()
    conn = store.open_readonly(db)
    try:
        rows = [(r["boot_id"], bool(r["complete"])) for r in store.list_dumps(conn)]
    finally:
        conn.close()
    assert rows == [(1, True), (2, False)]


def use_c_receiver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NETOOPS_RX_LIB", str(rx_lib()))
    monkeypatch.setattr(rx, "_lib", None)


def hold_analysis(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, threading.Event]:
    """Analysis waits (at most 10 s) until ``held`` is set; ``entered``
    says it has begun."""
    held, entered = threading.Event(), threading.Event()
    real = server.safe_analyse

    def slow_analyse(dump: Dump):  # type: ignore[no-untyped-def]
        entered.set()
        held.wait(10)                             # bounded: a failure cannot hang
        return real(dump)
    monkeypatch.setattr(server, "safe_analyse", slow_analyse)
    return held, entered


def serve_driven(srv: Server, err: io.StringIO, held: threading.Event,
                 drive: Callable[[int], None]) -> None:
    """Server.run() in this (the main) thread, for its signal handlers,
    while ``drive(port)`` runs in another once it listens; then analysis
    is let go and the server stopped.  What ``drive`` raised is raised."""
    failed: list[BaseException] = []

    def driver() -> None:
        try:
            wait(lambda: "synced once per round" in err.getvalue(), "serve started")
            line = err.getvalue().split("listening on ", 1)[1]
            drive(int(line.split()[0].rsplit(":", 1)[1]))
        except BaseException as e:  # noqa: B902 - re-raised in the test's thread
            failed.append(e)
        finally:
            held.set()
            srv._stop = True
            try:
                srv._wake_w.send(b"\0")
            except OSError:
                pass
    t = threading.Thread(target=driver)
    t.start()
    try:
        assert srv.run() == 0
    finally:
        held.set()
        t.join(30)
    if failed:
        raise failed[0]


def send(port: int, pkts: list[bytes]) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for p in pkts:
            s.sendto(p, ("127.0.0.1", port))


@pytest.mark.parametrize("receiver", ["python", "c"])
def test_a_dump_is_durable_while_analysis_is_held_and_receiving_goes_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, receiver: str):
    """The test drives the server over loopback UDP."""
    if receiver == "c":
        use_c_receiver(monkeypatch)
    db = tmp_path / "c.sqlite3"
    held, entered = hold_analysis(monkeypatch)
    err = io.StringIO()
    srv = Server(ServeConfig(db=db, listen=["127.0.0.1:0"], receiver=receiver,
                             log_journal=True), err=err)     # a line once synced

    def in_journal(boot: int) -> bool:
        return any(d.boot_id == boot for d in journaled(db))

    def drive(port: int) -> None:
        send(port, packets(fixture("null_deref.txt"), boot_id=21))
        wait(lambda: in_journal(21), "dump A journaled")
        wait(entered.is_set, "dump A analysed")
        send(port, packets(fixture("gpf.txt"), boot_id=22))
        wait(lambda: in_journal(22), "dump B journaled while A's analysis is held")
        wait(lambda: "durable, 2 this run" in err.getvalue(), "dump B synced")
        assert not held.is_set()
        assert sorted(d.boot_id for d in journaled(db)) == [21, 22]
        assert boots(db) == []
    serve_driven(srv, err, held, drive)
    conn = store.open_readonly(db)
    try:
        rows = [(r["boot_id"], bool(r["complete"])) for r in store.list_dumps(conn)]
    finally:
        conn.close()
    assert rows == [(21, True), (22, True)], err.getvalue()
    assert all(p.stat().st_size == 0 for _, p in Journal(db).segments())


def test_the_same_dump_written_twice_is_kept_once(tmp_path: Path):
    """Writing a dump again (the same uid and revision) counts it once and
    never empties the segment that holds it."""
    j = Journal(tmp_path / "t.sqlite3")
    a = make_dump(fixture("null_deref.txt"), 1)
    j.append([a])
    j.append([a])
    [(_, seg)] = j.segments()
    assert journal.decode(seg.read_bytes()) == ([a, a], True)
    j.release(a)
    assert seg.stat().st_size == 0 and j.bytes == 0
    j.close()


def test_a_dump_durable_in_the_packet_log_is_stored_after_a_crash(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The C receiver's packet log makes a whole dump durable without the
    journal; what a crash leaves of it (copied while analysis is held) is
    replayed and stored by the next start, and its segment then deleted."""
    use_c_receiver(monkeypatch)
    db, crashed = tmp_path / "c.sqlite3", tmp_path / "crashed" / "c.sqlite3"
    crashed.parent.mkdir()
    held, _ = hold_analysis(monkeypatch)
    err = io.StringIO()
    srv = Server(ServeConfig(db=db, listen=["127.0.0.1:0"], receiver="c", log_journal=True),
                 err=err)
    sent = fixture("null_deref.txt")
    seg_name: list[str] = []

    def drive(port: int) -> None:
        send(port, packets(sent, boot_id=21, copies=3))
        wait(lambda: "durable, 1 this run" in err.getvalue(), "dump durable")
        assert "(packet log)" in err.getvalue()
        # what a crash now would leave: the packet log, an empty journal
        assert not [d for _, p in Journal(db).segments()
                    for d in journal.decode(p.read_bytes())[0]]
        [seg] = Journal(db).packet_logs()
        seg_name.append(seg.name)
        (crashed.parent / seg.name).write_bytes(seg.read_bytes())
        assert boots(db) == []
    serve_driven(srv, err, held, drive)
    assert boots(db) == [21]
    assert not Journal(db).packet_logs()          # stored: its segment deleted
    # A crash after it was stored, before its segment went: not stored twice.
    (db.parent / seg_name[0]).write_bytes((crashed.parent / seg_name[0]).read_bytes())
    err1 = io.StringIO()
    srv = Server(ServeConfig(db=db), err=err1)
    srv._replay_journal()
    srv._store(everything=True)
    srv.close()
    assert "1 dump(s) from an earlier run, 0 of them not in the database" in err1.getvalue()
    assert boots(db) == [21] and not Journal(db).packet_logs()
    err2 = io.StringIO()
    again = Server(ServeConfig(db=crashed), err=err2)
    again._replay_journal()
    again._store(everything=True)
    again.close()
    assert "journal: 1 dump(s) from an earlier run, 1 of them not in the database" \
        in err2.getvalue()
    assert not Journal(crashed).packet_logs()
    conn = store.open_readonly(crashed)
    try:
        [row] = store.list_dumps(conn)
        d = store.get_dump(conn, row["id"])
    finally:
        conn.close()
    assert d is not None and d["boot_id"] == 21 and d["complete"]
    assert d["log"] == make_dump(sent, 21).log


def test_without_a_packet_log_whole_dumps_are_journaled(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch):
    """A packet log that cannot be created is said at start; dumps the C
    receiver takes whole are then made durable by the journal."""
    use_c_receiver(monkeypatch)
    monkeypatch.setattr(Journal, "packet_log_prefix",
                        lambda self, n: str(tmp_path / "gone" / f"c.sqlite3.packets{n}."))
    db = tmp_path / "c.sqlite3"
    held, _ = hold_analysis(monkeypatch)
    err = io.StringIO()
    srv = Server(ServeConfig(db=db, listen=["127.0.0.1:0"], receiver="c", log_journal=True),
                 err=err)

    def drive(port: int) -> None:
        assert "packets0.N: No such file or directory; dumps are durable once journaled" \
            in err.getvalue()
        send(port, packets(fixture("null_deref.txt"), boot_id=31, copies=3))
        wait(lambda: "durable, 1 this run" in err.getvalue(), "dump durable")
        assert "(packet log)" not in err.getvalue()
        assert [d.boot_id for _, p in Journal(db).segments()
                for d in journal.decode(p.read_bytes())[0]] == [31]
    serve_driven(srv, err, held, drive)
    assert boots(db) == [31]
