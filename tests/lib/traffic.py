# SPDX-License-Identifier: GPL-2.0
"""Host-side traffic for the busy-machine crash tests, run inside a test
namespace (ip netns exec ...) until it is killed:

  traffic.py discard PORT          a TCP server that reads and drops what
                                   the guest sends it
  traffic.py flood ADDR PORT [N]   UDP datagrams of 1,000 bytes to ADDR,
                                   some 12,000 a second, from N source ports
                                   (default 8: flows that a multi-queue
                                   NIC spreads over its queues)

Each prints "ready" once it runs.
"""

from __future__ import annotations

import signal
import socket
import sys
import threading
import time


def discard(port: int) -> None:
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(16)
    print("ready", flush=True)

    def drain(conn: socket.socket) -> None:
        with conn:
            while conn.recv(1 << 16):
                pass

    while True:
        conn, _ = srv.accept()
        threading.Thread(target=drain, args=(conn,), daemon=True).start()


def flood(addr: str, port: int, flows: int) -> None:
    socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(flows)]
    payload = b"f" * 1000
    print("ready", flush=True)
    while True:
        # 64 datagrams every 5 ms, some 12,000 a second: more than a guest
        # under TCG takes, without taking a host core from it
        for _ in range(64 // flows or 1):
            for s in socks:
                try:
                    s.sendto(payload, (addr, port))
                except OSError:     # ENOBUFS, or ECONNREFUSED after an ICMP reply
                    pass
        time.sleep(0.005)


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    if len(argv) == 2 and argv[0] == "discard":
        discard(int(argv[1]))
    elif len(argv) in (3, 4) and argv[0] == "flood":
        flood(argv[1], int(argv[2]), int(argv[3]) if len(argv) == 4 else 8)
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
