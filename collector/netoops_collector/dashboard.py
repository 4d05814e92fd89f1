# SPDX-License-Identifier: GPL-2.0
"""What the dashboard's pages show, as plain data (the JSON twins print it
as it is; the HTML pages render it).

Each page is a few aggregate queries whatever the number of groups, so a
database of many thousand dumps answers in milliseconds.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import replace
from typing import Any

from . import db, ncstore, plots, store, views
from .query import Filter, QueryError
from .retention import history
from .symbolize import Symbols, annotate

SORTS = ("count", "last", "new")
DUMPS_SHOWN = 200       # a group page lists its newest dumps, up to this many
NEW_FOR = 86400.0       # a group first seen this recently is "new"


def _where(conn: sqlite3.Connection, filt: Filter) -> tuple[str, list[Any]]:
    where, params = filt.where(conn)
    return f"signature IS NOT NULL AND {where}", params


def _axis(filt: Filter, first: float | None, last: float | None) -> plots.Axis:
    lo = filt.since if filt.since is not None else first
    hi = filt.until if filt.until is not None else last
    now = time.time()
    lo = lo if lo is not None else now - 3600
    hi = hi if hi is not None else now
    return plots.Axis.over(lo, max(hi, lo))


def _buckets(conn: sqlite3.Connection, key: str, where: str, params: list[Any],
             axis: plots.Axis) -> dict[str, list[int]]:
    """Dumps per bucket of ``axis``, by the column ``key``."""
    out: dict[str, list[int]] = {}
    for k, b, n in conn.execute(
            f"SELECT {key}, {axis.bucket_sql(db.dialect(conn))} AS b, COUNT(*) FROM dumps WHERE {where} "
            "GROUP BY 1, 2", [axis.start, axis.width] + params):
        out.setdefault(k, [0] * axis.buckets)[b] += n
    return out


def groups(conn: sqlite3.Connection, filt: Filter = Filter(), sort: str = "count",
           now: float | None = None) -> dict[str, Any]:
    """The crash groups that ``filt`` leaves, with a trend each."""
    if sort not in SORTS:
        raise QueryError(f"not a sort order: {sort!r} (one of {', '.join(SORTS)})")
    now = time.time() if now is None else now
    where, params = _where(conn, filt)
    found: dict[str, dict[str, Any]] = {}
    for sig, dumps, boots, first, last, last_id in conn.execute(
            "SELECT signature, COUNT(*), COUNT(DISTINCT source || ' ' || boot_id),"
            f" MIN(received), MAX(received), MAX(id) FROM dumps WHERE {where}"
            " GROUP BY signature", params):
        found[sig] = {"signature": sig, "dumps": dumps, "boots": boots, "first_seen": first,
                      "last_seen": last, "last_id": last_id, "kernels": {}, "hosts": {},
                      "pruned": 0}
    ids = [g["last_id"] for g in found.values()]
    titles: dict[int, str] = {}
    for at in range(0, len(ids), 500):
        part = ids[at:at + 500]
        titles.update(conn.execute(
            f"SELECT id, title FROM dumps WHERE id IN ({','.join('?' * len(part))})", part))
    for col, key in (("kernel_version", "kernels"), ("source", "hosts")):
        for sig, value, n in conn.execute(
                f"SELECT signature, {col}, COUNT(*) FROM dumps WHERE {where} GROUP BY 1, 2",
                params):
            found[sig][key][value] = n
    unfiltered = filt == Filter()
    if unfiltered:      # what retention pruned counts too, when nothing is filtered
        for sig, old in history(conn).items():
            g = found.setdefault(sig, {
                "signature": sig, "dumps": 0, "boots": 0, "first_seen": old["first_seen"],
                "last_seen": old["last_seen"], "last_id": None, "kernels": {}, "hosts": {},
                "pruned": 0})
            g["dumps"] += old["dumps"]
            g["boots"] += old["boots"]
            g["pruned"] = old["dumps"]
            g["first_seen"] = min(g["first_seen"], old["first_seen"])
            g["last_seen"] = max(g["last_seen"], old["last_seen"])
            g.setdefault("title", old["title"])
            for h in old["hosts"]:
                g["hosts"].setdefault(h, 0)
            for k in old["kernels"]:
                g["kernels"].setdefault(k, 0)
    firsts = [g["first_seen"] for g in found.values()]
    lasts = [g["last_seen"] for g in found.values()]
    axis = _axis(filt, min(firsts, default=None), max(lasts, default=None))
    trends = _buckets(conn, "signature", where, params, axis)
    rows = []
    for g in found.values():
        title = titles.get(g["last_id"]) if g["last_id"] is not None else None
        rows.append({
            "signature": g["signature"], "title": title if title is not None else
            g.get("title", ""), "dumps": g["dumps"], "boots": g["boots"],
            "first_seen": g["first_seen"], "last_seen": g["last_seen"],
            "new": g["first_seen"] >= now - NEW_FOR,
            "kernels": sorted(g["kernels"]), "hosts": sorted(g["hosts"]),
            "host_count": len(g["hosts"]), "pruned": g["pruned"], "last_id": g["last_id"],
            "trend": trends.get(g["signature"], [0] * axis.buckets)})
    order = {"count": lambda r: (-r["dumps"], -r["last_seen"]),
             "last": lambda r: (-r["last_seen"], -r["dumps"]),
             "new": lambda r: (-r["first_seen"], -r["dumps"])}[sort]
    rows.sort(key=order)
    plain, plain_params = filt.where(conn)
    ungrouped = conn.execute(f"SELECT COUNT(*) FROM dumps WHERE signature IS NULL AND {plain}",
                             plain_params).fetchone()[0]
    return {"groups": rows, "ungrouped": ungrouped, "sort": sort, "filter": _filter_dict(filt),
            "axis": {"start": axis.start, "bucket_seconds": axis.width,
                     "buckets": axis.buckets},
            "choices": choices(conn)}


def group(conn: sqlite3.Connection, signature: str, filt: Filter = Filter()
          ) -> dict[str, Any] | None:
    """One group: its summary, its newest dumps and its occurrences over
    time by kernel version; None if no dump (or pruned record) has it."""
    sig = _full_signature(conn, signature)
    if sig is None:
        return None
    mine = replace(filt, signature=None)
    page = groups(conn, mine)
    summary = next((g for g in page["groups"] if g["signature"] == sig), None)
    where, params = mine.where(conn)
    where = f"signature = ? AND {where}"
    params = [sig] + params
    total = conn.execute(f"SELECT COUNT(*) FROM dumps WHERE {where}", params).fetchone()[0]
    if summary is None and not total:
        if not conn.execute("SELECT 1 FROM dumps WHERE signature = ? LIMIT 1",
                            (sig,)).fetchone() and sig not in history(conn):
            return None
    rows = [store._decode(r) for r in conn.execute(
        "SELECT id, received, source, source_port, boot_id, dump_id, kind, kernel_version,"
        " title, complete, packet_count, packets_received FROM dumps"
        f" WHERE {where} ORDER BY id DESC LIMIT {DUMPS_SHOWN}", params)]
    first = summary["first_seen"] if summary else None
    last = summary["last_seen"] if summary else None
    axis = _axis(filt, first, last)
    series = _buckets(conn, "kernel_version", where, params, axis)
    return {"signature": sig, "summary": summary, "dumps": rows, "dump_count": total,
            "shown": len(rows), "filter": _filter_dict(filt),
            "by_kernel": series,
            "axis": {"start": axis.start, "bucket_seconds": axis.width,
                     "buckets": axis.buckets}}


def _full_signature(conn: sqlite3.Connection, text: str) -> str | None:
    if not text or any(c not in "0123456789abcdef" for c in text):
        return None
    row = conn.execute("SELECT signature FROM dumps WHERE signature = ? LIMIT 1",
                       (text,)).fetchone()
    if row is not None or text in history(conn):
        return text
    return None


def dump(conn: sqlite3.Connection, dump_no: int, minutes: float = 5.0,
         symbols: Symbols | None = None) -> dict[str, Any] | None:
    """One dump as `show --json` has it (with its netconsole context, and
    source lines if ``symbols``), and the report as `show` prints it."""
    d = store.get_dump(conn, dump_no)
    if d is None:
        return None
    if symbols is not None:
        d = annotate(d, symbols)
    nc = ncstore.before_dump(conn, d, minutes) if minutes else None
    if nc is not None:
        d["netconsole"] = nc
    return {"dump": views.report_dict(d), "report": views.show_text(d)}


def choices(conn: sqlite3.Connection, limit: int = 200) -> dict[str, list[str]]:
    """The hosts and kernels a filter may pick (the most frequent ``limit``)."""
    return {key: [v for (v,) in conn.execute(
        f"SELECT {col} FROM dumps GROUP BY 1 ORDER BY COUNT(*) DESC, 1 LIMIT ?", (limit,))]
        for key, col in (("hosts", "source"), ("kernels", "kernel_version"))}


def _filter_dict(filt: Filter) -> dict[str, Any]:
    return {k: v for k, v in (("since", filt.since), ("until", filt.until),
                              ("host", filt.host), ("kernel", filt.kernel)) if v is not None}
