# SPDX-License-Identifier: GPL-2.0
"""Record every UDP datagram on a port as a JSON line (src, hex data).

Runs inside a test namespace (ip netns exec ...); prints "ready" once bound.
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import sys


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--family", choices=["inet", "inet6"], default="inet")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    if args.family == "inet6":
        sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(("::", args.port))
    else:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind(("0.0.0.0", args.port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    with open(args.out, "a", buffering=1) as out:
        print("ready", flush=True)
        while True:
            data, src = sock.recvfrom(65535)
            out.write(json.dumps({"src": f"{src[0]}:{src[1]}",
                                  "data": data.hex()}) + "\n")


if __name__ == "__main__":
    sys.exit(main())
