# SPDX-License-Identifier: GPL-2.0
"""The ``netoops-collector`` command line.

Exit status: 0 success, 1 no such dump, 2 bad arguments, 3 the database is
missing, unreadable or not a collector database (query commands never create
one), 4 serve could not listen.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from pathlib import Path
from typing import Callable, Sequence

from . import __version__, proto, store, views
from .reassembly import Limits
from .server import DEFAULT_RCVBUF, ListenError, ServeConfig, Server, parse_listen

EXIT_OK, EXIT_NOT_FOUND, EXIT_USAGE, EXIT_DB, EXIT_LISTEN = 0, 1, 2, 3, 4


def _positive(kind: Callable[[str], float | int]) -> Callable[[str], float | int]:
    def check(text: str) -> float | int:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
        return value
    check.__name__ = kind.__name__
    return check


def _listen(text: str) -> str:
    try:
        parse_listen(text)
    except ListenError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def build_parser() -> argparse.ArgumentParser:
    db_help = ("the SQLite database (default: $XDG_DATA_HOME or ~/.local/share, "
               "then netoops/collector.sqlite3)")
    ap = argparse.ArgumentParser(
        prog="netoops-collector",
        description="Receive netoops crash dumps over UDP, store them in SQLite "
                    "and show them as crash reports.")
    ap.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    ap.add_argument("--db", type=Path, help=db_help)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--db", type=Path, default=argparse.SUPPRESS, help=db_help)
    query = argparse.ArgumentParser(add_help=False, parents=[common])
    query.add_argument("--json", action="store_true", help="print JSON")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", required=True)

    lim = Limits()
    serve = sub.add_parser("serve", parents=[common], help="receive and store dumps",
                           description="Receive netoops dumps over UDP and store them.")
    serve.add_argument("--listen", action="append", type=_listen, metavar="HOST:PORT",
                       help="address to listen on, repeatable: HOST:PORT, [V6ADDR]:PORT "
                            "(IPv6 only), or :PORT for every IPv4 and IPv6 address on one "
                            f"dual-stack socket (default :{proto.PORT})")
    serve.add_argument("--quiet-timeout", type=_positive(float), default=lim.quiet_timeout,
                       metavar="SECONDS",
                       help="finalise an incomplete dump as partial after this much "
                            "silence (default %(default)s)")
    serve.add_argument("--rcvbuf", type=_positive(int), default=DEFAULT_RCVBUF,
                       metavar="BYTES", help="socket receive buffer (default %(default)s)")
    serve.add_argument("--max-inflight", type=_positive(int), default=lim.max_dumps,
                       metavar="N", help="dumps in flight, in total (default %(default)s)")
    serve.add_argument("--max-inflight-bytes", type=_positive(int), default=lim.max_bytes,
                       metavar="BYTES", help="bytes in flight, in total (default %(default)s)")
    serve.add_argument("--max-inflight-per-source", type=_positive(int),
                       default=lim.max_dumps_per_source, metavar="N",
                       help="dumps in flight per source address "
                            "(default %(default)s)")
    serve.add_argument("--max-inflight-bytes-per-source", type=_positive(int),
                       default=lim.max_bytes_per_source, metavar="BYTES",
                       help="bytes in flight per source (default %(default)s)")
    serve.add_argument("--max-packet-count", type=_positive(int), default=lim.max_packet_count,
                       metavar="N", help="the most packets a dump may have, 1 KiB of log "
                                         "each: set it above netoops.ko's log_bytes / 1024 "
                                         "(default %(default)s, a 16 MiB log)")
    serve.add_argument("--new-dumps-per-source", type=_positive(int),
                       default=lim.max_new_dumps_per_source, metavar="N",
                       help="new dumps a source address may start: N at once and N a minute "
                            "after that; beyond, a datagram that would start one is rejected "
                            "(default %(default)s)")
    cfg0 = ServeConfig(db=Path())
    serve.add_argument("--receiver", choices=("auto", "c", "python"), default=cfg0.receiver,
                       help="who reads the sockets: the C receive thread (recvmmsg, copies "
                            "dropped, a ring buffer so that receiving never waits for "
                            "analysis or storage), Python, or auto: C if it is built "
                            "(default %(default)s)")
    serve.add_argument("--ring-bytes", type=_positive(int), default=cfg0.ring_bytes,
                       metavar="BYTES", help="the C receiver's ring buffer per socket "
                                             "(default %(default)s)")
    serve.add_argument("--log-interval", type=_positive(float), default=cfg0.log_interval,
                       metavar="SECONDS", help="log the counters this often when they "
                                               "changed (default %(default)s)")
    for name, what in (("dumps", "dumps"), ("partial", "partial dumps"),
                       ("junk", "dumps without crash text")):
        serve.add_argument(f"--{name}-per-source", type=_positive(int),
                           default=getattr(cfg0, f"{name}_per_source"), metavar="N",
                           help=f"{what} stored per source address: N at once, then N per "
                                "--budget-window (default %(default)s); the rest are counted")
    serve.add_argument("--budget-window", type=_positive(float), default=cfg0.budget_window,
                       metavar="SECONDS", help="see --dumps-per-source (default %(default)s)")
    serve.add_argument("--log-journal", action="store_true",
                       help="log a line each time finalised dumps are made durable in the "
                            "journal (before analysis); for benchmarks")

    ls = sub.add_parser("list", parents=[query], help="list the stored dumps")
    ls.add_argument("--limit", type=_positive(int), metavar="N",
                    help="only the N most recent")
    show = sub.add_parser("show", parents=[query], help="show one dump")
    show.add_argument("id", type=int, metavar="ID", help="dump id, from `list`")
    sub.add_parser("groups", parents=[query], help="dumps grouped by crash signature")
    sub.add_parser("stats", parents=[query], help="receive statistics")
    return ap


def _serve(args: argparse.Namespace, db: Path) -> int:
    limits = Limits(quiet_timeout=args.quiet_timeout, max_packet_count=args.max_packet_count,
                    max_new_dumps_per_source=args.new_dumps_per_source,
                    max_dumps=args.max_inflight,
                    max_bytes=args.max_inflight_bytes,
                    max_dumps_per_source=args.max_inflight_per_source,
                    max_bytes_per_source=args.max_inflight_bytes_per_source)
    cfg = ServeConfig(db=db, listen=args.listen or [], limits=limits, rcvbuf=args.rcvbuf,
                      log_interval=args.log_interval, dumps_per_source=args.dumps_per_source,
                      receiver=args.receiver, ring_bytes=args.ring_bytes,
                      partial_per_source=args.partial_per_source,
                      junk_per_source=args.junk_per_source, budget_window=args.budget_window,
                      log_journal=args.log_journal)
    try:
        server = Server(cfg)
    except store.StoreError as err:
        print(f"netoops-collector: {err}", file=sys.stderr)
        return EXIT_DB
    try:
        return server.run()
    except ListenError as err:
        server.close()
        print(f"netoops-collector: {err}", file=sys.stderr)
        return EXIT_LISTEN


def _query(args: argparse.Namespace, db: Path) -> int:
    conn = store.open_readonly(db)
    try:
        if args.command == "list":
            rows = store.list_dumps(conn, args.limit)
            sys.stdout.write(views.list_json(rows) if args.json else views.list_text(rows))
        elif args.command == "show":
            dump = store.get_dump(conn, args.id)
            if dump is None:
                print(f"netoops-collector: no dump with id {args.id} in {db}", file=sys.stderr)
                return EXIT_NOT_FOUND
            sys.stdout.write(views.show_json(dump) if args.json else views.show_text(dump))
        elif args.command == "groups":
            rows = store.groups(conn)
            sys.stdout.write(views.groups_json(rows) if args.json
                             else views.groups_text(rows, store.ungrouped(conn)))
        elif args.command == "stats":
            st = store.stats(conn)
            sys.stdout.write(views.stats_json(st) if args.json else views.stats_text(st))
    finally:
        conn.close()
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    db = args.db if args.db is not None else store.default_db_path()
    try:
        if args.command == "serve":
            return _serve(args, db)
        return _query(args, db)
    except store.StoreError as err:
        print(f"netoops-collector: {err}", file=sys.stderr)
        return EXIT_DB
    except sqlite3.DatabaseError as err:
        print(f"netoops-collector: {db}: database error: {err}", file=sys.stderr)
        return EXIT_DB
    except BrokenPipeError:
        return EXIT_OK
    except KeyboardInterrupt:
        return 130
