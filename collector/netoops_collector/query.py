# SPDX-License-Identifier: GPL-2.0
"""Which dumps a query command shows: the filters of `list` and `export`.

Times are ISO 8601 (``2026-12-06T14:05:00Z``, a date, or a time without a
zone, taken as UTC) or a span back from now: ``90s``, ``30m``, ``2h``,
``7d``, ``2w``.
"""

from __future__ import annotations

import re
import sqlite3
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

_SPAN = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class QueryError(ValueError):
    """A filter that cannot be applied (a bad time, an ambiguous prefix)."""


def parse_time(text: str, now: float | None = None) -> float:
    """Unix time of ``text``: ISO 8601 or a span back from ``now``."""
    m = _SPAN.fullmatch(text.strip())
    if m:
        return (time.time() if now is None else now) - float(m.group(1)) * _UNIT[m.group(2)]
    iso = text.strip()
    if iso.endswith(("Z", "z")):
        iso = iso[:-1] + "+00:00"
    try:
        dt = datetime.fromisoformat(iso)
    except ValueError:
        raise QueryError(f"not a time: {text!r} (ISO 8601, e.g. 2026-12-06T14:05:00Z, "
                         "or a span back from now: 90s, 30m, 2h, 7d, 2w)") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()


@dataclass(frozen=True)
class Filter:
    """Every field that is set must hold; all unset: every dump."""

    since: float | None = None      # received at or after (unix time)
    until: float | None = None      # received before
    host: str | None = None         # source address, exactly
    kernel: str | None = None       # kernel_version, exactly
    signature: str | None = None    # a prefix of the signature
    title: str | None = None        # a substring of the title, any case
    complete: bool | None = None    # True: complete only, False: partial only

    def where(self, conn: sqlite3.Connection) -> tuple[str, list[Any]]:
        """An SQL condition on the ``dumps`` table and its parameters."""
        conds: list[str] = []
        params: list[Any] = []
        if self.since is not None:
            conds.append("received >= ?")
            params.append(self.since)
        if self.until is not None:
            conds.append("received < ?")
            params.append(self.until)
        if self.host is not None:
            conds.append("source = ?")
            params.append(self.host)
        if self.kernel is not None:
            conds.append("kernel_version = ?")
            params.append(self.kernel)
        if self.signature is not None:
            conds.append("signature = ?")
            params.append(resolve_signature(conn, self.signature))
        if self.title is not None:
            conds.append("instr(lower(title), lower(?)) > 0")
            params.append(self.title)
        if self.complete is not None:
            conds.append("complete = ?")
            params.append(1 if self.complete else 0)
        return (" AND ".join(conds) or "TRUE"), params


def resolve_signature(conn: sqlite3.Connection, prefix: str) -> str:
    """The one signature that starts with ``prefix`` (as `groups` prints a
    signature's first 12 characters)."""
    if not re.fullmatch(r"[0-9a-fA-F]+", prefix):
        raise QueryError(f"not a signature prefix: {prefix!r} (hex digits, as `groups` "
                         "prints them)")
    found = [s for (s,) in conn.execute(
        "SELECT DISTINCT signature FROM dumps WHERE substr(signature, 1, ?) = ?"
        " ORDER BY 1 LIMIT 3", (len(prefix), prefix.lower()))]
    if not found:
        raise QueryError(f"no signature starts with {prefix!r}")
    if len(found) > 1:
        raise QueryError(f"signature prefix {prefix!r} is ambiguous: "
                         f"{', '.join(s[:16] for s in found)}...")
    return found[0]
