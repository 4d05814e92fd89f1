# SPDX-License-Identifier: GPL-2.0
"""The Wireshark dissector (deploy/wireshark/netoops.lua) run by tshark on a
capture, and what it decodes checked against the collector's own decoder."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from harness import BRIDGE, TOP, Netns

sys.path.insert(0, str(TOP / "collector"))
from netoops_collector import netconsole, proto  # noqa: E402

LUA = TOP / "deploy" / "wireshark" / "netoops.lua"


def field_name(name: str) -> str:
    """The dissector's field for one of proto.FIELDS."""
    return f"netoops.reg.{name}" if name in proto.REG_NAMES else f"netoops.{name}"


def tshark(pcap: Path, display_filter: str, fields: Sequence[str]) -> list[dict[str, list[str]]]:
    """Each packet that ``display_filter`` takes: its fields as tshark's JSON has them."""
    cmd = ["tshark", "-n", "-r", str(pcap), "-X", f"lua_script:{LUA}", "-Y", display_filter,
           "-T", "json"]
    for f in fields:
        cmd += ["-e", f]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if res.returncode != 0 or "Lua Error" in res.stdout + res.stderr:
        raise AssertionError(f"tshark failed ({res.returncode}): {res.stderr[-2000:]}"
                             f"{res.stdout[-2000:]}")
    return [p["_source"]["layers"] for p in json.loads(res.stdout or "[]")]


def expected(packet: proto.Packet) -> dict[str, str]:
    """What the dissector must show for each field, from the collector's decode."""
    out = {}
    for f in proto.FIELDS:
        if f.name in proto.REG_NAMES:
            out[field_name(f.name)] = f"0x{packet.registers[f.name]:016x}"
        else:
            value = getattr(packet, f.name)
            out[field_name(f.name)] = (proto.cstring(value) if isinstance(value, bytes)
                                       else str(value))
    return out


def check_netoops(pcap: Path) -> list[proto.Packet]:
    """Every netoops packet of the capture decoded by the dissector exactly as
    by the collector; returns the collector's decode of them."""
    fields = ["udp.payload", "_ws.expert.message", *(field_name(f.name) for f in proto.FIELDS)]
    got = tshark(pcap, "udp.dstport == 2004", fields)
    packets = []
    for layers in got:
        payload = bytes.fromhex(layers["udp.payload"][0].replace(":", ""))
        packet = proto.decode(payload)
        want = expected(packet)
        seen = {k: layers.get(k, [None])[0] for k in want}
        assert seen == want, {k: (seen[k], want[k]) for k in want if seen[k] != want[k]}
        assert "_ws.expert.message" not in layers or all(
            "No fault registers" in m for m in layers["_ws.expert.message"]), layers
        packets.append(packet)
    return packets


NC_FIELDS = ["udp.payload", "netconsole.extended", "netconsole.release", "netconsole.level",
             "netconsole.seq", "netconsole.usec", "netconsole.flags",
             "netconsole.ncfrag.offset", "netconsole.ncfrag.length", "netconsole.text",
             "netconsole.kv"]


def check_netconsole(pcap: Path, port: int = 6666) -> list[dict[str, object]]:
    """Every netconsole datagram of the capture decoded by the dissector as
    the collector parses it (netconsole.describe); returns those parses."""
    got = tshark(pcap, f"udp.dstport == {port}", NC_FIELDS)
    out = []
    for layers in got:
        payload = bytes.fromhex(layers["udp.payload"][0].replace(":", ""))
        d = netconsole.describe(payload)
        one = {k: layers.get(k, [None])[0] for k in NC_FIELDS[1:]}
        if not d["extended"]:
            assert (one["netconsole.extended"], one["netconsole.text"]) == ("0", d["text"]), \
                (one, d)
        else:
            frag = d["frag"] or (None, None)
            want = {"netconsole.extended": "1", "netconsole.release": d["release"],
                    "netconsole.level": str(d["prio"]), "netconsole.seq": str(d["seq"]),
                    "netconsole.usec": str(d["ts_us"]), "netconsole.flags": d["flags"],
                    "netconsole.ncfrag.offset": None if frag[0] is None else str(frag[0]),
                    "netconsole.ncfrag.length": None if frag[1] is None else str(frag[1]),
                    "netconsole.text": d["text"]}
            seen = {k: one[k] for k in want}
            assert seen == want, {k: (seen[k], want[k]) for k in want if seen[k] != want[k]}
            if d["frag"] is None:       # a piece may cut a KEY=value line
                assert layers.get("netconsole.kv", []) == d["meta"], (layers, d)
        out.append(d)
    return out


def udp_pcap(path: Path, datagrams: Sequence[tuple[int, bytes]], sport: int = 6665) -> None:
    """A pcap of IPv4 UDP datagrams 192.0.2.2 -> 192.0.2.1 (dport, payload)."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
        for i, (dport, payload) in enumerate(datagrams):
            udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
            ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), i, 0, 64, 17, 0,
                             bytes([192, 0, 2, 2]), bytes([192, 0, 2, 1])) + udp
            eth = bytes.fromhex("026e746f0001525400123456") + b"\x08\x00" + ip
            f.write(struct.pack("<IIII", 1_780_000_000 + i, 0, len(eth), len(eth)) + eth)


def capture(ns: Netns, path: Path, *bpf: str) -> subprocess.Popen:
    """tcpdump on the namespace's bridge into ``path`` (pcap), until
    ns.kill() of what this returns; returns once it is capturing."""
    proc = ns.spawn(["ip", "netns", "exec", ns.name, "tcpdump", "-n", "-i", BRIDGE, "-U",
                     "-Z", "root", "-w", str(path), *bpf],
                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()
    if "listening on" not in line:
        ns.kill(proc)
        raise RuntimeError(f"tcpdump did not start: {line.strip()}")
    return proc
