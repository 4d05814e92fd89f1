# SPDX-License-Identifier: GPL-2.0
"""``netoops-collector web``: a read-only crash dashboard (WSGI).

Pages, each with a JSON twin (the same path with ``.json``):

    /                       crash groups (also /groups)
    /group/SIGNATURE        one group: its dumps, occurrences by kernel
    /dump/ID                one dump: the report as `show` prints it, the log
    /dump/ID/log            the raw log, text/plain

Filters, as query parameters on the group pages: ``since``, ``until`` (as
`list` takes them), ``host``, ``kernel``; ``sort`` (count, last, new) on
the groups page.  Bad input is answered 400 with the reason.

The HTML has no script; every value is escaped by the templates
(autoescape), and a Content-Security-Policy forbids scripts and anything
not from the dashboard itself.  There is no login: it binds to localhost
by default; put it behind a reverse proxy with authentication to share it
(see the README).  Each request opens the database read-only.
"""

from __future__ import annotations

import re
import threading
import time
import urllib.parse
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable

from . import dashboard, db, plots, store, views
from .query import Filter, QueryError, parse_time
from .symbolize import Symbols

HERE = Path(__file__).resolve().parent
_ROUTES = (
    (re.compile(r"/(?:groups)?"), "groups"),
    (re.compile(r"/groups\.json"), "groups.json"),
    (re.compile(r"/group/([0-9a-f]{1,128})"), "group"),
    (re.compile(r"/group/([0-9a-f]{1,128})\.json"), "group.json"),
    (re.compile(r"/dump/(\d{1,18})"), "dump"),
    (re.compile(r"/dump/(\d{1,18})\.json"), "dump.json"),
    (re.compile(r"/dump/(\d{1,18})/log"), "log"),
    (re.compile(r"/static/style\.css"), "style"),
    (re.compile(r"/(?:static/favicon\.svg|favicon\.ico)"), "icon"),
)
_HEADERS = [
    ("Content-Security-Policy",
     "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
     "base-uri 'none'; frame-ancestors 'none'"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "same-origin"),
    ("Cache-Control", "no-store"),
]
_FILTER_KEYS = ("since", "until", "host", "kernel")
POOL = 8               # PostgreSQL connections kept between requests

StartResponse = Callable[[str, list[tuple[str, str]]], Any]


class BadRequest(ValueError):
    """A query parameter that cannot be used (answered 400)."""


def _environment() -> Any:
    import jinja2
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(HERE / "templates")),
        autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
        lstrip_blocks=True)
    env.filters["when"] = views.when
    env.filters["short"] = lambda sig: (sig or "")[:12]
    env.globals["trend"] = plots.trend
    env.filters["span"] = plots.span
    return env


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M")


class App:
    """The WSGI application over the database at ``db``."""

    def __init__(self, db: Path | str, netconsole_minutes: float = 5.0,
                 symbols: Symbols | None = None) -> None:
        self.db = db
        self.symbols = symbols
        # PostgreSQL: connections are kept for the next request (a new one
        # costs more than most pages); a SQLite file is opened per request.
        self._idle: list[Any] = []
        self._idle_lock = threading.Lock()
        self.minutes = netconsole_minutes
        self.env = _environment()
        self.static = {
            "style": ("text/css; charset=utf-8", (HERE / "templates" / "style.css").read_bytes()),
            "icon": ("image/svg+xml", (HERE / "templates" / "favicon.svg").read_bytes())}

    def __call__(self, environ: dict[str, Any], start: StartResponse) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        path = environ.get("PATH_INFO", "/") or "/"
        if method not in ("GET", "HEAD"):
            return self._reply(start, "405 Method Not Allowed", "text/plain",
                               b"read-only: GET and HEAD only\n", [("Allow", "GET, HEAD")],
                               method)
        for pattern, name in _ROUTES:
            m = pattern.fullmatch(path)
            if m:
                break
        else:
            return self._error(start, "404 Not Found", f"no such page: {path}",
                               path.endswith(".json"), method)
        if name in self.static:
            ctype, data = self.static[name]
            return self._reply(start, "200 OK", ctype, data, [], method)
        as_json = name.endswith(".json")
        try:
            query = _query(environ.get("QUERY_STRING", ""))
            conn = self._connect()
        except BadRequest as err:
            return self._error(start, "400 Bad Request", str(err), as_json, method)
        except store.StoreError as err:
            return self._error(start, "503 Service Unavailable", str(err), as_json, method)
        healthy = False
        try:
            out = self._page(start, name, m.groups(), query, conn, method)
            healthy = True
            return out
        except (BadRequest, QueryError) as err:
            healthy = True
            return self._error(start, "400 Bad Request", str(err), as_json, method)
        except db.ERRORS as err:     # the database went away, or is locked
            return self._error(start, "503 Service Unavailable",
                               f"{store.display(self.db)}: database error: {err}", as_json,
                               method)
        finally:
            self._release(conn, healthy)

    def close(self) -> None:
        """Close the connections kept for the next requests."""
        with self._idle_lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _connect(self) -> Any:
        with self._idle_lock:
            if self._idle:
                return self._idle.pop()
        return store.open_readonly(self.db, shared=True)

    def _release(self, conn: Any, healthy: bool) -> None:
        if healthy and db.dialect(conn) == "postgresql":
            with self._idle_lock:
                if len(self._idle) < POOL:
                    self._idle.append(conn)
                    return
        conn.close()

    def _page(self, start: StartResponse, name: str, groups: tuple[str, ...],
              query: dict[str, str], conn: Any, method: str) -> Iterable[bytes]:
        as_json = name.endswith(".json")
        base = name.removesuffix(".json")
        filt = _filter(query)
        keep = {k: v for k, v in query.items() if k in _FILTER_KEYS}
        if base == "groups":
            data = dashboard.groups(conn, filt, query.get("sort", "count"))
            title = "crash groups"
        elif base == "group":
            got = dashboard.group(conn, groups[0], filt)
            if got is None:
                return self._error(start, "404 Not Found", f"no group {groups[0]}", as_json,
                                   method)
            data = got
            title = (got["summary"] or {}).get("title") or got["signature"][:12]
        else:
            got = dashboard.dump(conn, int(groups[0]), self.minutes, self.symbols)
            if got is None:
                return self._error(start, "404 Not Found", f"no dump {groups[0]}", as_json,
                                   method)
            data = got
            if base == "log":
                return self._reply(start, "200 OK", "text/plain; charset=utf-8",
                                   got["dump"]["log"].encode("utf-8", "replace"), [], method)
            title = f"dump {groups[0]}: {got['dump']['title']}"
        if as_json:
            body = views.to_json({"format": views.FORMAT, **data}).encode()
            return self._reply(start, "200 OK", "application/json", body, [], method)
        html = self.env.get_template(f"{base}.html").render(
            page=data, title=title, keep=keep, query=query, qs=_qs,
            by_kernel=_by_kernel_svg(data) if base == "group" else "",
            iso=_iso, json_link=_json_link(name, groups, query))
        return self._reply(start, "200 OK", "text/html; charset=utf-8", html.encode(), [],
                           method)

    def _error(self, start: StartResponse, status: str, message: str, as_json: bool,
               method: str) -> Iterable[bytes]:
        if as_json:
            body = views.to_json({"error": message, "status": int(status.split()[0])})
            return self._reply(start, status, "application/json", body.encode(), [], method)
        html = self.env.get_template("error.html").render(
            title=status, status=status, message=message, keep={}, qs=_qs)
        return self._reply(start, status, "text/html; charset=utf-8", html.encode(), [],
                           method)

    @staticmethod
    def _reply(start: StartResponse, status: str, ctype: str, body: bytes,
               extra: list[tuple[str, str]], method: str) -> Iterable[bytes]:
        start(status, [("Content-Type", ctype), ("Content-Length", str(len(body)))]
              + _HEADERS + extra)
        return [b"" if method == "HEAD" else body]


def _query(text: str) -> dict[str, str]:
    try:
        pairs = urllib.parse.parse_qsl(text, keep_blank_values=False, strict_parsing=False,
                                       max_num_fields=20)
    except ValueError as err:
        raise BadRequest(f"bad query string: {err}") from None
    out: dict[str, str] = {}
    for k, v in pairs:
        if k in out:
            raise BadRequest(f"{k} given twice")
        if len(v) > 300:
            raise BadRequest(f"{k}: too long")
        out[k] = v
    return out


def _filter(query: dict[str, str]) -> Filter:
    now = time.time()
    try:
        since = parse_time(query["since"], now) if "since" in query else None
        until = parse_time(query["until"], now) if "until" in query else None
    except QueryError as err:
        raise BadRequest(str(err)) from None
    return Filter(since=since, until=until, host=query.get("host"),
                  kernel=query.get("kernel"))


def _qs(keep: dict[str, str], **more: str) -> str:
    """A query string of the filters in ``keep`` and ``more`` ("" if none)."""
    items = {**keep, **{k: v for k, v in more.items() if v}}
    return "?" + urllib.parse.urlencode(items) if items else ""


def _json_link(name: str, groups: tuple[str, ...], query: dict[str, str]) -> str:
    base = {"groups": "/groups.json", "group": f"/group/{groups[0] if groups else ''}.json",
            "dump": f"/dump/{groups[0] if groups else ''}.json"}.get(name, "")
    return base + _qs(query) if base else ""


def _by_kernel_svg(data: dict[str, Any]) -> str:
    ax = data["axis"]
    axis = plots.Axis(ax["start"], ax["bucket_seconds"], ax["buckets"])
    end = axis.start + axis.width * axis.buckets
    return plots.by_kernel(data["by_kernel"], axis, [_iso(axis.start), _iso(end)])


def serve(app: App, host: str, port: int, threads: int = 4,
          ready: Callable[[str], None] | None = None) -> None:
    """Serve ``app`` with waitress until SIGINT or SIGTERM."""
    import signal

    from waitress.server import create_server
    server = create_server(app, host=host, port=port, threads=threads,
                           ident="netoops-collector")

    def stop(_sig: int, _frame: object) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, stop)
    try:
        where = f"{host}:{server.effective_port}" if ":" not in host else \
            f"[{host}]:{server.effective_port}"
        if ready is not None:
            ready(f"http://{where}/")
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
        app.close()
        signal.signal(signal.SIGTERM, old)
