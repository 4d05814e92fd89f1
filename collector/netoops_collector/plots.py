# SPDX-License-Identifier: GPL-2.0
"""Small SVG plots for the dashboard, drawn on the server (no script, no CDN).

:func:`trend` is a group's sparkline: dumps per time bucket.
:func:`by_kernel` is a group's occurrences over time, one colour per kernel
version, stacked, with a legend.  Both return one ``<svg>`` element; every
piece of text in it is escaped.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Sequence

# Colour-blind-safe (Okabe-Ito), then grey for "other kernels".
PALETTE = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442")
OTHER = "#999999"


@dataclass(frozen=True)
class Axis:
    """``buckets`` equal spans from ``start`` (unix time) of ``width`` seconds."""

    start: float
    width: float
    buckets: int

    @classmethod
    def over(cls, first: float, last: float, buckets: int = 30,
             least: float = 3600.0) -> "Axis":
        """Buckets covering [first, last], at least ``least`` seconds in all."""
        span = max(last - first, least)
        return cls(first, span / buckets * (1 + 1e-9), buckets)

    def index(self, t: float) -> int:
        return min(self.buckets - 1, max(0, int((t - self.start) / self.width)))

    def bucket_sql(self, dialect: str = "sqlite") -> str:
        """The bucket of ``received`` as an SQL expression (parameters: start, width)."""
        if dialect == "postgresql":     # its CAST rounds; LEAST/GREATEST, not MIN/MAX
            return (f"LEAST({self.buckets - 1}, GREATEST(0, "
                    "FLOOR((received - ?) / ?)::BIGINT))")
        return f"MIN({self.buckets - 1}, MAX(0, CAST((received - ?) / ? AS INTEGER)))"


def span(seconds: float) -> str:
    """A bucket's width for people: "2 min", "1.5 h", "3 days"."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 3599:
        return f"{seconds / 60:.0f} min"
    if seconds < 36 * 3600:
        return f"{seconds / 3600:.3g} h"
    return f"{seconds / 86400:.3g} days"


def trend(counts: Sequence[int], width: int = 120, height: int = 24, label: str = "") -> str:
    """Bars of ``counts``, the highest full height."""
    top = max(counts, default=0) or 1
    n = max(len(counts), 1)
    bar = width / n
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="trend" width="{width}" '
           f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
           f'aria-label="{escape(label)}">',
           f'<rect width="{width}" height="{height}" fill="#f4f4f4"/>']
    for i, c in enumerate(counts):
        if c:
            h = max(1.0, c / top * (height - 2))
            out.append(f'<rect x="{i * bar:.2f}" y="{height - h:.2f}" '
                       f'width="{max(bar - 0.5, 0.5):.2f}" height="{h:.2f}" fill="#0072b2">'
                       f'<title>{c}</title></rect>')
    out.append("</svg>")
    return "".join(out)


def by_kernel(series: dict[str, Sequence[int]], axis: Axis, labels: Sequence[str],
              width: int = 720, height: int = 220) -> str:
    """Stacked bars per bucket, one colour per kernel (the most frequent
    first; beyond the palette, "other"); ``labels`` are the first and last
    bucket's times, as text."""
    ranked = sorted(series, key=lambda k: (-sum(series[k]), k))
    shown = ranked[:len(PALETTE)]
    rest = ranked[len(PALETTE):]
    layers: list[tuple[str, str, list[int]]] = [
        (k, PALETTE[i], list(series[k])) for i, k in enumerate(shown)]
    if rest:
        other = [sum(series[k][b] for k in rest) for b in range(axis.buckets)]
        layers.append((f"{len(rest)} other kernels", OTHER, other))
    totals = [sum(layer[2][b] for layer in layers) for b in range(axis.buckets)]
    top = max(totals, default=0) or 1
    legend_h = 16 * len(layers) + 8
    plot_h = height - 24
    full_h = height + legend_h
    left, bar = 36, (width - 36) / axis.buckets
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="by-kernel" width="{width}" '
           f'height="{full_h}" viewBox="0 0 {width} {full_h}" role="img" '
           f'aria-label="occurrences over time by kernel version">',
           f'<rect x="{left}" width="{width - left}" height="{plot_h}" fill="#f8f8f8"/>',
           f'<text x="{left - 4}" y="10" font-size="10" text-anchor="end">{top}</text>',
           f'<text x="{left - 4}" y="{plot_h}" font-size="10" text-anchor="end">0</text>']
    for b in range(axis.buckets):
        y = float(plot_h)
        for name, colour, counts in layers:
            c = counts[b]
            if not c:
                continue
            h = c / top * (plot_h - 4)
            y -= h
            out.append(f'<rect x="{left + b * bar:.2f}" y="{y:.2f}" width="{max(bar - 1, 1):.2f}"'
                       f' height="{h:.2f}" fill="{colour}"><title>{escape(name)}: {c}</title>'
                       "</rect>")
    first, last = (labels[0], labels[-1]) if labels else ("", "")
    out.append(f'<text x="{left}" y="{plot_h + 14}" font-size="10">{escape(first)}</text>')
    out.append(f'<text x="{width}" y="{plot_h + 14}" font-size="10" text-anchor="end">'
               f'{escape(last)}</text>')
    for i, (name, colour, counts) in enumerate(layers):
        y = height + 4 + 16 * i
        out.append(f'<rect x="{left}" y="{y}" width="10" height="10" fill="{colour}"/>')
        out.append(f'<text x="{left + 16}" y="{y + 9}" font-size="11">{escape(name)} '
                   f'({sum(counts)})</text>')
    out.append("</svg>")
    return "".join(out)
