# SPDX-License-Identifier: GPL-2.0
"""The Wireshark dissector for netoops v3 and netconsole, run by tshark.

The netoops part is checked field by field against the collector's decoder
here on generated packets, and on a real guest's capture in
test_collector_e2e.py; the netconsole part on extended records as 6.1 and
upstream's later netconsole write them."""

from __future__ import annotations

from pathlib import Path

from dissector import check_netconsole, check_netoops, tshark, udp_pcap
from netoops_collector import gen, proto

NC_FIELDS = ["netconsole.extended", "netconsole.level", "netconsole.seq", "netconsole.usec",
             "netconsole.flags", "netconsole.ncfrag.offset", "netconsole.ncfrag.length",
             "netconsole.text", "netconsole.key", "netconsole.value"]


def test_netoops_fields_match_the_collectors_decode(tmp_path: Path):
    log = (Path(__file__).parent.parent / "collector" / "tests" / "fixtures" /
           "null_deref.txt").read_bytes()
    pkts = gen.dump_packets(log, copies=1, boot_id=0xdeadbeef, dump_id=42,
                            user_blob=b"host=web-17 rack=7", type=proto.TYPE_SOFT)
    pcap = tmp_path / "netoops.pcap"
    udp_pcap(pcap, [(2004, p) for p in pkts])
    decoded = check_netoops(pcap)
    assert [p.packet_no for p in decoded] == list(range(len(pkts)))
    assert decoded[0].boot_id == 0xdeadbeef and decoded[0].type == proto.TYPE_SOFT


def test_a_malformed_netoops_packet_is_flagged(tmp_path: Path):
    good = gen.dump_packets(b"<0>[    1.000000] x\n", copies=1)[0]
    pcap = tmp_path / "bad.pcap"
    udp_pcap(pcap, [(2004, good[:600]), (2004, b"\x02\x00" + good[2:])])
    got = tshark(pcap, "netoops", ["_ws.expert.message", "netoops.boot_id"])
    assert len(got) == 2
    for layers in got:
        assert any("Not a netoops v3 packet" in m for m in layers["_ws.expert.message"])
        assert "netoops.boot_id" not in layers


def test_netconsole_extended_and_basic_lines(tmp_path: Path):
    records = [
        b"6,1234,5678901,-;hello world\n",
        # a fragment of a long message (ncfrag), a continuation
        b"4,1235,5679000,c,ncfrag=0/2000;part one\n",
        # the record's dictionary, then upstream's userdata and sysdata
        b"3,99,100,-;e1000e: link down\n SUBSYSTEM=net\n DEVICE=+net:eth0\n"
        b"rack=7\ncpu=1\ntaskname=kworker/1:1\nrelease=6.1.0-netoops\nmsgid=17\n",
        b"plain basic line\n",
    ]
    pcap = tmp_path / "nc.pcap"
    udp_pcap(pcap, [(6666, r) for r in records])
    got = tshark(pcap, "netconsole", NC_FIELDS)
    assert len(got) == 4
    one, frag, dict_, basic = got
    assert (one["netconsole.extended"], one["netconsole.level"], one["netconsole.seq"],
            one["netconsole.usec"], one["netconsole.flags"], one["netconsole.text"]) == \
        (["1"], ["6"], ["1234"], ["5678901"], ["-"], ["hello world"])
    assert (frag["netconsole.flags"], frag["netconsole.ncfrag.offset"],
            frag["netconsole.ncfrag.length"], frag["netconsole.text"]) == \
        (["c"], ["0"], ["2000"], ["part one"])
    assert dict_["netconsole.text"] == ["e1000e: link down"]
    assert list(zip(dict_["netconsole.key"], dict_["netconsole.value"])) == [
        ("SUBSYSTEM", "net"), ("DEVICE", "+net:eth0"), ("rack", "7"), ("cpu", "1"),
        ("taskname", "kworker/1:1"), ("release", "6.1.0-netoops"), ("msgid", "17")]
    assert basic["netconsole.extended"] == ["0"]
    assert basic["netconsole.text"] == ["plain basic line"]


def test_netconsole_release_prefix_and_the_collectors_parse(tmp_path: Path):
    """The r flag's release in front (6.6), as fragments too: the dissector
    and the collector's parse agree on every datagram (check_netconsole)."""
    records = [
        b"6.1.0-netoops,6,10,1000,-;with the release\n cpu=0\n",
        b"6.1.0-netoops,4,11,2000,-,ncfrag=0/1500;" + b"a" * 900,
        b"6.1.0-netoops,4,11,2000,-,ncfrag=900/1500;" + b"a" * 500 + b"\n rack=7\n",
        b"6,12,3000,-;no release\n",
        b"[    1.000000] basic\n",
    ]
    pcap = tmp_path / "nc.pcap"
    udp_pcap(pcap, [(6666, r) for r in records])
    parsed = check_netconsole(pcap)
    assert [p.get("release") for p in parsed] == ["6.1.0-netoops"] * 3 + [None, None]
    assert [p.get("frag") for p in parsed][:3] == [None, (0, 1500), (900, 1500)]
    first = tshark(pcap, "netconsole.seq == 10", ["netconsole.release", "netconsole.text"])
    assert first == [{"netconsole.release": ["6.1.0-netoops"],
                      "netconsole.text": ["with the release"]}]
