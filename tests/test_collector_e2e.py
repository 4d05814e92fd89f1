# SPDX-License-Identifier: GPL-2.0
"""netoops-collector receiving real dumps from guests that crash."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from collector_proc import Collector, query, query_json
from crashes import ALLOW_OOPS, ALLOW_PANIC
from dissector import capture, check_netconsole, check_netoops
from harness import (ALLOW_SYSRQ_PANIC, HOST_MAC, PYTHON, Guest, Netns, cache_dir, flavour,
                     run_guest)
from netoops_collector import proto
from test_harness import kernel_release


def test_sysrq_crash_is_one_complete_panic_dump():
    """... and the Wireshark dissector decodes the capture of it exactly as
    the collector does."""
    with Netns() as ns:
        coll = Collector(ns, ns.tmp / "dumps.sqlite3")
        pcap = ns.tmp / "netoops.pcap"
        tcpdump = capture(ns, pcap, "udp", "port", "2004")
        res = run_guest("netoops_crash", ns, timeout=240,
                        allow=ALLOW_SYSRQ_PANIC,
                        args={"hostmac": HOST_MAC, "how": "sysrq",
                              "bootid": "3735928559", "blob": "e2e-blob"})
        rows = coll.wait_dumps(1, timeout=30)
        assert coll.stop() == 0
        ns.kill(tcpdump)
        packets = check_netoops(pcap)
        res.assert_crashed()
        rows = query_json(coll.db, "list")
        assert len(rows) == 1, rows
        row = rows[0]
        assert row["complete"] is True
        assert row["kind"] == "panic"
        assert row["title"] == "Kernel panic - not syncing: sysrq triggered crash"
        dump = query_json(coll.db, "show", str(row["id"]))
        assert dump["kernel_version"] == kernel_release()
        assert dump["boot_id"] == 3735928559
        assert dump["user_blob"] == "e2e-blob"
        assert dump["source"] == "192.0.2.2"
        assert "sysrq triggered crash" in dump["log"]
        assert dump["missing"] == []
        stats = query_json(coll.db, "stats")
        assert stats["stored"]["complete"] == 1
        assert stats["stored"]["partial"] == 0
        assert stats["counters"]["duplicates"] == 2 * row["packet_count"]
    # Every datagram the collector counted, each decoded field for field
    # as the collector decodes it (tests/lib/dissector.py).
    assert len(packets) == stats["counters"]["packets"] == 3 * row["packet_count"]
    assert {(p.boot_id, proto.cstring(p.user_blob)) for p in packets} == \
        {(3735928559, "e2e-blob")}


# Each guest's oops (oops=panic) ends in the panic that sends its dump.
ALLOW_OOPS_PANIC = ALLOW_OOPS + ALLOW_PANIC + [r"Kernel panic - not syncing: Fatal exception"]


def _source_line(path: Path, line: int) -> str:
    return path.read_text().splitlines()[line - 1]


def test_three_guests_oopsing_at_once_give_three_dumps_with_source_lines():
    with Netns() as ns:
        coll = Collector(ns, ns.tmp / "dumps.sqlite3")
        guests = [Guest(ns, "netoops_crash", index=i, timeout=300,
                        allow=ALLOW_OOPS_PANIC, cmdline="oops=panic",
                        args={"hostmac": HOST_MAC, "how": "null",
                              "bootid": str(100 + i), "blob": f"guest-{i}",
                              "trigger": "tcp"}) for i in range(3)]
        for g in guests:
            g.start()
        for g in guests:
            assert g.wait_for_result("ready", timeout=240), f"{g.name} not ready"
        # Connect to every guest's trigger port from one process, back to back.
        ips = [g.ip for g in guests]
        code = ("import socket,sys,time\n"
                "for ip in sys.argv[1:]:\n"
                "    for _ in range(100):\n"
                "        try:\n"
                "            socket.create_connection((ip, 7000), 2).close(); break\n"
                "        except OSError: time.sleep(0.1)\n"
                "    else: sys.exit('no trigger on ' + ip)\n")
        subprocess.run(["ip", "netns", "exec", ns.name, PYTHON, "-c", code,
                        *ips], check=True, timeout=60)
        results = [g.wait() for g in guests]
        rows = coll.wait_dumps(3, timeout=30)
        assert coll.stop() == 0
        dumps = [query_json(coll.db, "show", str(r["id"])) for r in rows]
        groups = query_json(coll.db, "groups")
        # The debug kernel's own vmlinux and nto_crash.ko, with line tables.
        release = kernel_release()
        symbols = ns.tmp / "debug"
        (symbols / release).mkdir(parents=True)
        (symbols / release / "vmlinux").symlink_to(cache_dir() / "out" / flavour() / "vmlinux")
        kmod = cache_dir() / "mod" / flavour() / "tests" / "kmod"
        (symbols / release / "nto_crash.ko").symlink_to(kmod / "nto_crash.ko")
        named = query_json(coll.db, "show", str(rows[0]["id"]), "--symbols", str(symbols))
    for res in results:
        res.assert_crashed()
    assert len(rows) == 3, rows
    assert all(r["complete"] for r in rows)
    assert sorted(r["source"] for r in rows) == sorted(ips)
    assert sorted((d["boot_id"], d["user_blob"]) for d in dumps) == \
        [(100 + i, f"guest-{i}") for i in range(3)]
    # The same bug on three machines: one group.
    assert len(groups) == 1 and groups[0]["dumps"] == 3
    assert sorted(groups[0]["hosts"]) == sorted(ips)
    # The faulting function names the line of its store through NULL, and
    # the frame below it the line that calls it, in the module's source.
    # (KASAN reports the store first, from inside the function: its frame
    # is a return address in it, on the same line.)
    src = Path(__file__).parent / "kmod" / "nto_crash.c"
    frames = {f["func"]: f for f in named["frames"] if f["reliable"]}
    fault = frames["nto_crash_null_deref"]["source"]
    assert fault and Path(fault[-1]["file"]).name == "nto_crash.c", named["frames"]
    assert "WRITE_ONCE(*p, 0x6e746f);" in _source_line(src, fault[-1]["line"])
    init = frames["nto_crash_init"]["source"]
    assert init and "nto_crash_null_deref();" in _source_line(src, init[-1]["line"])
    # A vmlinux frame: do_one_initcall() calls the module's init.
    call = frames["do_one_initcall"]["source"][-1]
    assert call["where"].startswith("init/main.c:"), call
    assert "fn()" in _source_line(cache_dir() / "linux" / "init" / "main.c", call["line"])


def test_netconsole_lines_joined_with_the_dump_and_a_host_that_went_silent():
    """Two machines run netconsole (extended, with the release, userdata and
    the CPU) to the collector: one also runs netoops and oopses, the other
    loses power.  `show` gives the first one's lines before its dump with
    its log; `silent` names the second with its last lines.  The capture
    of port 6666 decodes in Wireshark as the collector parses it."""
    with Netns() as ns:
        coll = Collector(ns, ns.tmp / "dumps.sqlite3")
        pcap = ns.tmp / "netconsole.pcap"
        tcpdump = capture(ns, pcap, "udp", "port", "6666")
        crash = Guest(ns, "nc_stream", index=0, timeout=300, allow=ALLOW_OOPS_PANIC,
                      cmdline="oops=panic",
                      args={"hostmac": HOST_MAC, "end": "crash", "bootid": "77",
                            "blob": "nc-crash"})
        quiet = Guest(ns, "nc_stream", index=1, timeout=300,
                      args={"hostmac": HOST_MAC, "end": "silent"})
        crash.start()
        quiet.start()
        assert quiet.wait_for_result("silent", timeout=240), "the quiet guest never got ready"
        ns.kill(quiet.proc)                 # the plug pulled: no dump, no last words
        quiet_res = quiet.wait()
        crash_res = crash.wait()
        rows = coll.wait_dumps(1, timeout=30)
        time.sleep(2)                       # the two streams stop
        silent = query_json(coll.db, "silent", "--after", "1")
        tail = query_json(coll.db, "tail", "--host", quiet.ip, "-n", "3")
        assert coll.stop() == 0
        ns.kill(tcpdump)
        parsed = check_netconsole(pcap)
        crash_res.assert_crashed()
        assert len(rows) == 1, (rows, coll.log.read_text()[-3000:])
        shown = query_json(coll.db, "show", str(rows[0]["id"]), "--netconsole", "10")
        text = query(coll.db, "show", str(rows[0]["id"])).stdout
    crash_res.assert_crashed()
    assert quiet_res.status == "crash" and not quiet_res.splats, quiet_res.console[-2000:]
    release = kernel_release()
    # the crashed machine: its stream, whole, then its dump
    nc = shown["netconsole"]
    [stream] = nc["streams"]
    assert stream["source"] == crash.ip and stream["extended"] and stream["lost"] == 0
    assert stream["release"] == release
    lines = {ln["text"]: ln for ln in nc["lines"]}
    for i in range(20):
        assert f"nc-stream crash line {i}" in lines, sorted(lines)[:40]
    long = lines[f"nc-stream crash long {'L' * 960}"]
    assert not long["cut"] and "rack=r42" in long["meta"].split("\n")
    assert any(m.startswith("cpu=") for m in long["meta"].split("\n"))
    bug = [ln for t, ln in lines.items() if t.startswith("BUG: kernel NULL pointer dereference")]
    assert bug and bug[0]["in_dump"], bug
    assert "Kernel panic - not syncing: Fatal exception" in "\n".join(lines)
    # netoops' own lines after the dump are not in it, nor lost from it
    after = [ln for ln in nc["lines"] if ln["text"].startswith("netoops: panic dump: ")]
    assert after and not after[0]["in_dump"] and not after[0]["lost_from_dump"]
    assert nc["lost_from_dump"] == 0, [ln for ln in nc["lines"] if ln["lost_from_dump"]]
    # the netconsole section comes before the log, lines the log lacks marked
    assert text.index("netconsole: ") < text.index("\nlog:\n")
    assert f"stream {stream['id']} from {crash.ip} port 6665: extended, release {release}" \
        in text
    # the machine that lost power: went silent, with its last lines
    assert [r["stream"]["source"] for r in silent["silent"]] == [quiet.ip], silent
    last = [ln["text"] for ln in silent["silent"][0]["lines"]]
    assert last[-1] == "nc-stream last words", last
    assert [ln["text"] for ln in tail["lines"]][-1] == "nc-stream last words"
    # the capture: every datagram as the collector parses it; the release
    # in front of every record, pieces for the long one
    assert parsed and all(p["extended"] and p["release"] == release for p in parsed)
    assert any(p["frag"] for p in parsed)
