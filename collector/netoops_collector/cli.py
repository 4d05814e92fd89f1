# SPDX-License-Identifier: GPL-2.0
"""The ``netoops-collector`` command line (exit statuses: EXIT_STATUS)."""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import urllib.parse
from pathlib import Path
from typing import Callable, Sequence

from . import __version__, config, ncstore, proto, store, views
from .db import ERRORS as DB_ERRORS
from .alerts import AlertConfig
from .query import Filter, QueryError, parse_time
from .reassembly import Limits
from .retention import Retention, prune
from .symbolize import SymbolError, Symbols, annotate
from .netconsole import DEFAULT_PORT as NETCONSOLE_PORT
from .server import DEFAULT_RCVBUF, ListenError, ServeConfig, Server, parse_listen

EXIT_OK, EXIT_NOT_FOUND, EXIT_USAGE, EXIT_DB, EXIT_LISTEN = 0, 1, 2, 3, 4
EXIT_STATUS = """exit status:
  0  success (a query that matches nothing too)
  1  no such dump (show), no netconsole lines from that host (tail)
  2  bad arguments: an unknown option, a bad time, an ambiguous or unknown
     signature prefix, a --symbols directory that is missing or holds a
     file binutils cannot read
  3  the database is missing, unreadable or not a collector database (query
     commands never create one)
  4  serve could not listen"""


def _number(kind: Callable[[str], float | int], zero: bool = False
            ) -> Callable[[str], float | int]:
    """An argparse type: a positive number (``zero``: or 0, no limit)."""
    def check(text: str) -> float | int:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if value < 0 or (value == 0 and not zero):
            raise argparse.ArgumentTypeError(
                f"must be 0 (no limit) or more: {text!r}" if zero
                else f"must be positive: {text!r}")
        return value
    check.__name__ = kind.__name__
    return check


def _positive(kind: Callable[[str], float | int]) -> Callable[[str], float | int]:
    return _number(kind)


def _limit(kind: Callable[[str], float | int]) -> Callable[[str], float | int]:
    return _number(kind, zero=True)


def _time(text: str) -> float:
    try:
        return parse_time(text)
    except QueryError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _hostport(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"not HOST:PORT or [V6ADDR]:PORT: {text!r}")
    return host, int(port)


def _url(text: str) -> str:
    parts = urllib.parse.urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise argparse.ArgumentTypeError(f"not an http:// or https:// URL: {text!r}")
    return text


def _listen(text: str) -> str:
    try:
        parse_listen(text)
    except ListenError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def _nc_listen(text: str) -> str:
    return text if text == "off" else _listen(text)


def _symbols_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--symbols", type=Path, metavar="DIR",
                        default=os.environ.get("NETOOPS_SYMBOLS") or None,
                        help=what + ": DIR/<release>/vmlinux and its modules' .ko files, or "
                                    "Debian's -dbg layout (DIR/boot/vmlinux-<release>, "
                                    "DIR/lib/modules/<release>/), as /usr/lib/debug has it "
                                    "(default: $NETOOPS_SYMBOLS); needs binutils")


def build_parser() -> argparse.ArgumentParser:
    db_help = ("the SQLite database file, or a PostgreSQL URL (postgresql://USER@HOST/DB; "
               "needs python3-psycopg) that several collectors may write into "
               "(default: $NETOOPS_DB, else collector.sqlite3 in "
               "$STATE_DIRECTORY, as systemd sets it for the service, else in "
               "$XDG_DATA_HOME/netoops or ~/.local/share/netoops)")
    ap = argparse.ArgumentParser(
        prog="netoops-collector",
        description="Receive netoops crash dumps over UDP, store them in SQLite "
                    "and show them as crash reports.",
        epilog=EXIT_STATUS, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    ap.add_argument("--db", type=store.parse_db, help=db_help)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--db", type=store.parse_db, default=argparse.SUPPRESS, help=db_help)
    query = argparse.ArgumentParser(add_help=False, parents=[common])
    query.add_argument("--json", action="store_true", help="print JSON")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", required=True)

    keep = argparse.ArgumentParser(add_help=False)
    ret = Retention()
    assert ret.max_age and ret.max_dumps and ret.max_bytes
    keep.add_argument("--keep-days", type=_limit(float), default=ret.max_age / 86400,
                      metavar="DAYS", help="remove dumps older than this; 0: no limit "
                                           "(default %(default)g)")
    keep.add_argument("--keep-dumps", type=_limit(int), default=ret.max_dumps, metavar="N",
                      help="keep the N newest dumps; 0: no limit (default %(default)s)")
    keep.add_argument("--keep-bytes", type=_limit(int), default=ret.max_bytes,
                      metavar="BYTES", help="keep the newest dumps whose logs fit in BYTES; "
                                            "0: no limit (default %(default)s)")
    cfg0 = ServeConfig(db=Path())
    keep.add_argument("--keep-netconsole-days", type=_limit(float),
                      default=cfg0.netconsole_days, metavar="DAYS",
                      help="remove netconsole lines older than this; 0: no limit "
                           "(default %(default)g)")
    keep.add_argument("--keep-netconsole-lines", type=_limit(int),
                      default=cfg0.netconsole_lines, metavar="N",
                      help="keep the N newest netconsole lines; 0: no limit "
                           "(default %(default)s)")
    lim = Limits()
    serve = sub.add_parser("serve", parents=[common, keep], help="receive and store dumps",
                           description="Receive netoops dumps over UDP and store them.",
                           epilog=EXIT_STATUS,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    _symbols_option(serve, "the reports of --hook and --webhook name each frame's source "
                           "line from the kernels' debug files in DIR")
    serve.add_argument("--config", type=Path, metavar="FILE",
                       help="a TOML file of serve options (a key is an option's long name: "
                            "quiet-timeout = 5, listen = [\":2004\"], db = \"...\"); "
                            "options given here override it")
    serve.add_argument("--listen", action="append", type=_listen, metavar="HOST:PORT",
                       help="address to listen on, repeatable: HOST:PORT, [V6ADDR]:PORT "
                            "(IPv6 only), or :PORT for every IPv4 and IPv6 address on one "
                            f"dual-stack socket (default :{proto.PORT})")
    serve.add_argument("--netconsole-listen", action="append", type=_nc_listen,
                       metavar="HOST:PORT",
                       help="where netconsole lines are received, repeatable, as --listen; "
                            "off: nowhere (default :%d: if that port is taken, netconsole "
                            "reception is off and the log says so)" % NETCONSOLE_PORT)
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
    serve.add_argument("--hook", metavar="COMMAND",
                       help="run COMMAND (split as a shell would, run without one) for each "
                            "new crash signature, the report as JSON (show --json, with "
                            "\"event\") on its standard input and NETOOPS_EVENT set")
    serve.add_argument("--webhook", metavar="URL", type=_url,
                       help="POST the same JSON to URL for each new crash signature")
    serve.add_argument("--hook-every-dump", action="store_true",
                       help="run the hook and the webhook for every dump stored, not only "
                            "for new signatures (event \"dump\")")
    serve.add_argument("--hook-timeout", type=_positive(float), default=10.0,
                       metavar="SECONDS", help="the most a hook run or a POST may take "
                                               "(default %(default)s)")
    serve.add_argument("--metrics", type=_hostport, metavar="HOST:PORT",
                       help="serve Prometheus metrics at http://HOST:PORT/metrics")
    serve.add_argument("--metrics-textfile", type=Path, metavar="PATH",
                       help="write the same metrics to PATH every 2 s, for node-exporter's "
                            "textfile collector")
    serve.add_argument("--log-journal", action="store_true",
                       help="log a line each time finalised dumps are made durable in the "
                            "journal or the packet log (before analysis); for benchmarks")

    select = argparse.ArgumentParser(add_help=False)
    select.add_argument("--since", type=_time, metavar="TIME",
                        help="received at or after TIME: ISO 8601 (UTC unless it says) "
                             "or a span back from now (90s, 30m, 2h, 7d, 2w)")
    select.add_argument("--until", type=_time, metavar="TIME", help="received before TIME")
    select.add_argument("--host", metavar="ADDR", help="sent from this address")
    select.add_argument("--kernel", metavar="RELEASE", help="of this kernel release")
    select.add_argument("--signature", metavar="PREFIX",
                        help="of the crash signature that starts with PREFIX (as `groups` "
                             "prints it)")
    select.add_argument("--title", metavar="TEXT", help="whose title contains TEXT (any case)")
    state = select.add_mutually_exclusive_group()
    state.add_argument("--complete", dest="complete", action="store_const", const=True,
                       help="complete dumps only")
    state.add_argument("--partial", dest="complete", action="store_const", const=False,
                       help="partial dumps only")
    symbols = argparse.ArgumentParser(add_help=False)
    _symbols_option(symbols, "name each frame's source line from the kernels' debug files in "
                             "DIR")
    ls = sub.add_parser("list", parents=[query, select], help="list the stored dumps",
                        epilog=EXIT_STATUS,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    ls.add_argument("--limit", type=_positive(int), metavar="N",
                    help="only the N most recent")
    sub.add_parser("export", parents=[common, select, symbols],
                   help="the dumps as JSON lines, for bulk use",
                   description="Print each dump that the filters take as one line of JSON "
                               "(the keys of `show --json`, with its log and frames), "
                               "oldest first.",
                   epilog=EXIT_STATUS, formatter_class=argparse.RawDescriptionHelpFormatter)
    show = sub.add_parser("show", parents=[query, symbols], help="show one dump")
    show.add_argument("id", type=int, metavar="ID", help="dump id, from `list`")
    show.add_argument("--netconsole", type=_limit(float), default=5.0, metavar="MINUTES",
                      help="with the netconsole lines its source sent in the MINUTES "
                           "before the dump; 0: none (default %(default)g)")
    tail = sub.add_parser("tail", parents=[query],
                          help="a host's netconsole lines, newest last",
                          description="The last lines of the newest netconsole stream "
                                      "(one boot) of a source address.",
                          epilog=EXIT_STATUS,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    tail.add_argument("--host", required=True, metavar="ADDR", help="the source address")
    tail.add_argument("-n", "--lines", type=_positive(int), default=20, metavar="N",
                      help="how many lines (default %(default)s)")
    tail.add_argument("-f", "--follow", action="store_true",
                      help="then print each new line as it is stored, a new stream (boot) "
                           "announced, until interrupted; with --json one object a line; "
                           "waits for a host that has sent nothing yet")
    tail.add_argument("--interval", type=_positive(float), default=0.5, metavar="SECONDS",
                      help="how often --follow looks for new lines (default %(default)g)")
    quiet = sub.add_parser("silent", parents=[query],
                           help="hosts whose netconsole stopped without a dump",
                           description="Sources whose newest netconsole stream stopped at "
                                       "least --after seconds ago with no dump from them "
                                       "since: machines that went silent.  Each with its "
                                       "last lines.",
                           epilog=EXIT_STATUS,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    quiet.add_argument("--after", type=_positive(float), default=300.0, metavar="SECONDS",
                       help="silent for at least this long (default %(default)g)")
    quiet.add_argument("-n", "--lines", type=_positive(int), default=5, metavar="N",
                       help="last lines shown of each (default %(default)s)")
    sub.add_parser("groups", parents=[query], help="dumps grouped by crash signature")
    sub.add_parser("stats", parents=[query], help="receive statistics")
    prune = sub.add_parser(
        "prune", parents=[common, keep], help="apply the retention policy now",
        description="Remove the dumps the --keep-* limits do not keep, oldest first, as\n"
                    "serve does every minute; their groups keep their counts and first\n"
                    "and last seen.", epilog=EXIT_STATUS,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    prune.add_argument("--dry-run", action="store_true",
                       help="say what would be removed, remove nothing")
    prune.add_argument("--json", action="store_true", help="print JSON")
    web = sub.add_parser(
        "web", help="serve a read-only crash dashboard over HTTP",
        description="A read-only dashboard of the database: crash groups with trends, "
                    "each group's dumps and occurrences by kernel, each dump's report; "
                    "every page has a JSON twin (the same path with .json).  No login: it "
                    "listens on localhost unless told otherwise; share it through a "
                    "reverse proxy with authentication.",
        epilog=EXIT_STATUS, formatter_class=argparse.RawDescriptionHelpFormatter)
    web.add_argument("--listen", default="127.0.0.1:8080", metavar="HOST:PORT",
                     help="where to serve (default %(default)s; port 0: any free one)")
    web.add_argument("--threads", type=_positive(int), default=4,
                     help="requests served at once (default %(default)s)")
    web.add_argument("--netconsole", type=_limit(float), default=5.0, metavar="MINUTES",
                     help="a dump page's netconsole context, as `show` has it "
                          "(default %(default)g)")
    _symbols_option(web, "a dump page names the source line of each frame")
    ap.set_defaults(serve_parser=serve)
    return ap


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The arguments, with serve's --config file under those given."""
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.command != "serve" or args.config is None:
        return args
    try:
        cfg = config.load(args.config, args.serve_parser)
    except config.ConfigError as err:
        ap.exit(EXIT_USAGE, f"netoops-collector: {err}\n")
    listen, db = cfg.pop("listen", None), cfg.pop("db", None)
    nc_listen = cfg.pop("netconsole_listen", None)
    args.serve_parser.set_defaults(**cfg)
    args = ap.parse_args(argv)
    args.listen = args.listen or listen
    args.netconsole_listen = args.netconsole_listen or nc_listen
    if args.db is None:
        args.db = db
    return args


def _retention(args: argparse.Namespace) -> Retention:
    return Retention(max_age=args.keep_days * 86400 or None,
                     max_dumps=args.keep_dumps or None, max_bytes=args.keep_bytes or None)


def _web(args: argparse.Namespace, db: Path | str) -> int:
    try:
        host, port = parse_listen(args.listen)
    except ValueError as err:
        print(f"netoops-collector: --listen: {err}", file=sys.stderr)
        return EXIT_USAGE
    syms = _symbols(args)                  # SymbolError: a usage error, before the rest
    store.open_readonly(db).close()        # a clear error now, not on every page
    try:
        from . import web
        app = web.App(db, args.netconsole, syms)
    except ImportError as err:
        print(f"netoops-collector: web needs python3-jinja2 and python3-waitress ({err})",
              file=sys.stderr)
        return EXIT_USAGE
    try:
        web.serve(app, host or "0.0.0.0", port, args.threads,
                  ready=lambda url: print(f"netoops-collector: dashboard of {store.display(db)} on {url}",
                                          file=sys.stderr, flush=True))
    except OSError as err:
        print(f"netoops-collector: cannot listen on {args.listen}: {err.strerror or err}",
              file=sys.stderr)
        return EXIT_LISTEN
    return EXIT_OK


def _prune(args: argparse.Namespace, db: Path | str) -> int:
    if isinstance(db, Path) and not db.exists():
        raise store.StoreError(f"{db}: no such database")
    st = store.Store(db)
    try:
        done = prune(st.conn, _retention(args), dry_run=args.dry_run)
        lines = ncstore.prune(st.conn, args.keep_netconsole_days * 86400 or None,
                              args.keep_netconsole_lines or None, dry_run=args.dry_run)
    finally:
        st.close()
    if args.json:
        sys.stdout.write(views.to_json({"format": views.FORMAT, "dry_run": args.dry_run,
                                        **done.as_dict(), "netconsole_lines": lines}))
    else:
        verb = "would remove" if args.dry_run else "removed"
        print(f"{verb} {done.dumps} dump(s), {done.bytes} bytes of logs ({done.by_age} by "
              f"age, {done.by_count} by count, {done.by_size} by size), {lines} netconsole "
              "line(s)")
    return EXIT_OK


def _serve(args: argparse.Namespace, db: Path | str) -> int:
    if args.symbols is not None:
        Symbols(args.symbols)       # SymbolError (exit 2) before anything is opened
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
                      log_journal=args.log_journal, retention=_retention(args),
                      alerts=AlertConfig(hook=args.hook, webhook=args.webhook,
                                         every_dump=args.hook_every_dump,
                                         timeout=args.hook_timeout,
                                         symbols=args.symbols),
                      metrics=args.metrics, metrics_textfile=args.metrics_textfile,
                      netconsole=_nc_specs(args.netconsole_listen),
                      netconsole_days=args.keep_netconsole_days or None,
                      netconsole_lines=args.keep_netconsole_lines or None)
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


def _nc_specs(given: list[str] | None) -> list[str] | None:
    """None: the default port; []: off."""
    if not given:
        return None
    return [] if "off" in given else given


def _filter(args: argparse.Namespace) -> Filter:
    return Filter(since=args.since, until=args.until, host=args.host, kernel=args.kernel,
                  signature=args.signature, title=args.title, complete=args.complete)


def _symbols(args: argparse.Namespace) -> Symbols | None:
    path = getattr(args, "symbols", None)
    return Symbols(path) if path is not None else None


def _follow(conn: sqlite3.Connection, args: argparse.Namespace) -> None:
    """``tail --follow``: the last lines, then each new one, until SIGINT or
    SIGTERM (or stdout closes)."""
    import json
    import signal
    import time

    def stop(_sig: int, _frame: object) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, stop)
    shown: int | None = None        # the stream whose lines are being printed

    def emit(lines: list[dict], stream: dict | None = None) -> None:
        nonlocal shown
        for ln in lines:
            if args.json:
                print(json.dumps(dict(ln, source=args.host), sort_keys=True))
                continue
            if ln["stream"] != shown:
                st = stream if stream and stream["id"] == ln["stream"] else \
                    ncstore.stream(conn, ln["stream"])
                if st is not None:
                    print(views.stream_note(st))
                shown = ln["stream"]
            print(views.nc_line(ln, meta=True))
        sys.stdout.flush()

    try:
        got, after = ncstore.tail_from(conn, args.host, args.lines)
        if got is not None:
            emit(got["lines"], got["stream"])
        while True:
            time.sleep(args.interval)
            new = ncstore.lines_after(conn, args.host, after)
            if new:
                after = new[-1]["id"]
                emit(new)
    except KeyboardInterrupt:
        pass
    except BrokenPipeError:
        sys.stderr.close()      # no second complaint at exit
    finally:
        signal.signal(signal.SIGTERM, old)


def _query(args: argparse.Namespace, db: Path | str) -> int:
    syms = _symbols(args)
    conn = store.open_readonly(db)
    try:
        if args.command == "list":
            rows = store.list_dumps(conn, args.limit, _filter(args))
            sys.stdout.write(views.list_json(rows) if args.json else views.list_text(rows))
        elif args.command == "export":
            for dump_no in store.dump_ids(conn, _filter(args)):
                dump = store.get_dump(conn, dump_no)
                if dump is not None:
                    sys.stdout.write(views.export_line(annotate(dump, syms) if syms else dump))
        elif args.command == "show":
            dump = store.get_dump(conn, args.id)
            if dump is None:
                print(f"netoops-collector: no dump with id {args.id} in {store.display(db)}", file=sys.stderr)
                return EXIT_NOT_FOUND
            if syms is not None:
                dump = annotate(dump, syms)
            nc = ncstore.before_dump(conn, dump, args.netconsole) if args.netconsole else None
            if nc is not None:      # the key only where there are lines
                dump["netconsole"] = nc
            sys.stdout.write(views.show_json(dump) if args.json else views.show_text(dump))
        elif args.command == "tail" and args.follow:
            _follow(conn, args)
        elif args.command == "tail":
            got = ncstore.tail(conn, args.host, args.lines)
            if got is None:
                print(f"netoops-collector: no netconsole lines from {args.host} in {store.display(db)}",
                      file=sys.stderr)
                return EXIT_NOT_FOUND
            sys.stdout.write(views.tail_json(got) if args.json else views.tail_text(got))
        elif args.command == "silent":
            rows = ncstore.silent(conn, args.after, args.lines)
            sys.stdout.write(views.silent_json(rows) if args.json else views.silent_text(rows))
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
    args = _parse(argv)
    db = args.db if args.db is not None else store.default_db_path()
    try:
        if args.command == "serve":
            return _serve(args, db)
        if args.command == "prune":
            return _prune(args, db)
        if args.command == "web":
            return _web(args, db)
        return _query(args, db)
    except store.StoreError as err:
        print(f"netoops-collector: {err}", file=sys.stderr)
        return EXIT_DB
    except (QueryError, SymbolError) as err:
        print(f"netoops-collector: {err}", file=sys.stderr)
        return EXIT_USAGE
    except DB_ERRORS as err:
        print(f"netoops-collector: {store.display(db)}: database error: {err}",
              file=sys.stderr)
        return EXIT_DB
    except BrokenPipeError:
        return EXIT_OK
    except KeyboardInterrupt:
        return 130
