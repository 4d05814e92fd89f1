# SPDX-License-Identifier: GPL-2.0
"""Record every UDP datagram on a port as a JSON line (src, hex data).

Runs inside a test namespace (ip netns exec ...); prints "ready" once bound.
With --vlan VID it reads IPv4 frames of that VLAN off --ifname with a
packet socket instead (the machine's kernel may have no 8021q to end the
VLAN in): the tag as the kernel took it off (PACKET_AUXDATA) or still in
the frame.
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import struct
import sys
from typing import Iterator

ETH_P_ALL = 0x0003
ETH_P_IP = 0x0800
VLAN_TPIDS = (0x8100, 0x88A8)
SOL_PACKET = 263
PACKET_AUXDATA = 8
TP_STATUS_VLAN_VALID = 0x10
# struct tpacket_auxdata: status, len, snaplen (u32); mac, net, vlan_tci,
# vlan_tpid (u16)
AUXDATA = struct.Struct("=IIIHHHH")


def udp_socket(port: int, family: str) -> socket.socket:
    if family == "inet6":
        sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(("::", port))
    else:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind(("0.0.0.0", port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    return sock


def udp_datagrams(sock: socket.socket) -> Iterator[tuple[str, bytes]]:
    while True:
        data, src = sock.recvfrom(65535)
        yield f"{src[0]}:{src[1]}", data


def vlan_of(frame: bytes, ancdata) -> tuple[int | None, bytes]:
    """The frame's VLAN id (None: untagged) and what follows the tag."""
    for level, kind, data in ancdata:
        if level == SOL_PACKET and kind == PACKET_AUXDATA:
            status, _, _, _, _, tci, _ = AUXDATA.unpack_from(data)
            if status & TP_STATUS_VLAN_VALID:
                return tci & 0xFFF, frame[12:]
    (tpid,) = struct.unpack_from("!H", frame, 12)
    if tpid in VLAN_TPIDS:
        (tci,) = struct.unpack_from("!H", frame, 14)
        return tci & 0xFFF, frame[16:]
    return None, frame[12:]


def vlan_datagrams(ifname: str, vid: int, port: int) -> Iterator[tuple[str, bytes]]:
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.bind((ifname, 0))
    print("ready", flush=True)
    while True:
        frame, anc, _, _ = sock.recvmsg(65535, socket.CMSG_SPACE(AUXDATA.size))
        got, rest = vlan_of(frame, anc)
        if got != vid or len(rest) < 2 + 20 + 8:
            continue
        (proto,) = struct.unpack_from("!H", rest, 0)
        ip = rest[2:]
        if proto != ETH_P_IP or ip[9] != socket.IPPROTO_UDP:
            continue
        ihl = (ip[0] & 0xF) * 4
        sport, dport, ulen = struct.unpack_from("!HHH", ip, ihl)
        if dport != port:
            continue
        yield f"{socket.inet_ntoa(ip[12:16])}:{sport}", ip[ihl + 8:ihl + ulen]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--family", choices=["inet", "inet6"], default="inet")
    ap.add_argument("--vlan", type=int, help="read VLAN VID's frames off --ifname")
    ap.add_argument("--ifname", default="ntobr0")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    if args.vlan is not None:
        source = vlan_datagrams(args.ifname, args.vlan, args.port)
    else:
        sock = udp_socket(args.port, args.family)
        print("ready", flush=True)
        source = udp_datagrams(sock)
    with open(args.out, "a", buffering=1) as out:
        for src, data in source:
            out.write(json.dumps({"src": src, "data": data.hex()}) + "\n")


if __name__ == "__main__":
    sys.exit(main())
