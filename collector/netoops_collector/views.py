# SPDX-License-Identifier: GPL-2.0
"""Text and JSON rendering for the query commands."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from . import proto
from .reassembly import ranges
from .report import describe_taint, strip_levels


def when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def to_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=False) + "\n"


def _with_times(d: dict[str, Any], *keys: str) -> dict[str, Any]:
    out = dict(d)
    for key in keys:
        if key in out:
            out[key + "_unix"] = out[key]
            out[key] = when(out[key])
    return out


def _state(d: dict[str, Any]) -> str:
    if d["complete"]:
        return "yes"
    return f"{d['packets_received']}/{d['packet_count']}"


# -- list -----------------------------------------------------------------------
def list_json(rows: list[dict[str, Any]]) -> str:
    return to_json([_with_times(r, "received") for r in rows])


def list_text(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "no dumps stored\n"
    head = ("ID", "RECEIVED (UTC)", "HOST", "KERNEL", "TYPE", "COMPLETE", "TITLE")
    table = [head] + [(str(r["id"]), when(r["received"]), r["source"],
                       r["kernel_version"] or "?", r["kind"], _state(r), r["title"])
                      for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(head) - 1)]
    lines = []
    for row in table:
        cells = [c.rjust(widths[0]) if i == 0 else c.ljust(widths[i])
                 for i, c in enumerate(row[:-1])]
        lines.append("  ".join(cells + [row[-1]]).rstrip())
    return "\n".join(lines) + "\n"


# -- show -----------------------------------------------------------------------
def show_json(d: dict[str, Any]) -> str:
    return to_json(_with_times(d, "received", "first_packet"))


def show_text(d: dict[str, Any]) -> str:
    if d["complete"]:
        state = f"yes ({d['packet_count']} of {d['packet_count']} chunks)"
    else:
        state = (f"NO: {len(d['missing'])} of {d['packet_count']} chunks missing "
                 f"(packet_no {ranges(d['missing'])}; 0 is the newest), "
                 f"finalised by {d['finalised_by']}")
    taint = d["taint"] or "none"
    if d["taint"]:
        taint += " (" + ", ".join(describe_taint(d["taint"])) + ")"
    mods = " ".join(m["name"] + (f"({m['flags']})" if m["flags"] else "")
                    for m in d["modules"]) or "-"
    fields = [
        ("dump", str(d["id"])),
        ("title", d["title"]),
        ("type", f"{d['kind']} (wire type {d['type']})"),
        ("received", f"{when(d['received'])} (first packet {when(d['first_packet'])})"),
        ("source", f"{d['source']} port {d['source_port']}"),
        ("boot_id", f"{d['boot_id']}   dump_id {d['dump_id']}"),
        ("kernel", d["kernel_version"] or "?"),
        ("user blob", repr(d["user_blob"]) if d["user_blob"] else "-"),
        ("cpu", f"{d['cpu_vendor_name']} family {d['cpu_family']} model {d['cpu_model']}"
                f" stepping {d['cpu_stepping']}"),
        ("complete", state),
        ("signature", f"{d['signature']}  ({' '.join(d['signature_frames']) or '-'})"),
        ("culprit", d["guilty"] or "-"),
        ("taint", taint),
        ("comm", d["comm"] or "-"),
        ("modules", mods),
    ]
    out = [f"{k:<10} {v}" for k, v in fields]
    out.append("")
    if d.get("fault_registers", True):
        out.append("registers (from the packet header):")
        regs = d["registers"]
        names = list(proto.REG_NAMES)
        for i in range(0, len(names), 3):
            out.append("  " + "  ".join(f"{n:>8} {regs[n][2:]}" for n in names[i:i + 3]))
    else:
        out.append("registers: none (no fault: a plain panic, a lockup or a soft dump)")
    if d["frames"]:
        out.append("")
        out.append("call trace:")
        if d["rip_frame"]:
            out.append(f"  RIP {d['rip_frame']}")
        for f in d["frames"]:
            ctx = f"<{f['context']}> " if f["context"] else ""
            out.append(f"  {ctx}{f['text']}")
    out.append("")
    out.append("log:")
    out.append(strip_levels(d["log"]).rstrip("\n"))
    return "\n".join(out) + "\n"


# -- groups ---------------------------------------------------------------------
def groups_json(rows: list[dict[str, Any]]) -> str:
    return to_json([_with_times(r, "first_seen", "last_seen") for r in rows])


def groups_text(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "no dumps stored\n"
    out = []
    for g in rows:
        out.append(f"{g['signature'][:12]}  {g['dumps']} dump{'s' if g['dumps'] != 1 else ''}"
                   f", {g['boots']} boot{'s' if g['boots'] != 1 else ''}"
                   f", {g['host_count']} host{'s' if g['host_count'] != 1 else ''}: "
                   f"{g['title']}")
        out.append(f"    first seen {when(g['first_seen'])}, last seen {when(g['last_seen'])}")
        out.append(f"    kernels: {', '.join(k or '?' for k in g['kernels'])}")
        out.append(f"    hosts:   {', '.join(g['hosts'])}")
        out.append(f"    dumps:   {', '.join(str(i) for i in g['ids'])}")
    return "\n".join(out) + "\n"


# -- stats ----------------------------------------------------------------------
def stats_json(st: dict[str, Any]) -> str:
    return to_json(st)


def stats_text(st: dict[str, Any]) -> str:
    c = st["counters"]
    s = st["stored"]
    rejected = {k[len("rejected_"):]: v for k, v in c.items() if k.startswith("rejected_") and v}
    out = [
        f"packets received     {c.get('packets', 0)}",
        f"  chunks kept        {c.get('accepted', 0)}",
        f"  duplicates         {c.get('duplicates', 0)}",
        f"  late               {c.get('late', 0)} (for a dump already stored as partial)",
        f"  rejected           {sum(rejected.values())}"
        + (" (" + ", ".join(f"{k} {v}" for k, v in sorted(rejected.items())) + ")"
           if rejected else ""),
        f"dumps complete       {c.get('dumps_complete', 0)}",
        f"dumps partial        {c.get('dumps_partial', 0)} (quiet timeout "
        f"{c.get('partial_timeout', 0)}, finalised early by the memory caps "
        f"{c.get('partial_capacity', 0)}, at shutdown {c.get('partial_shutdown', 0)})",
        f"stored: {s['dumps']} dumps ({s['complete']} complete, {s['partial']} partial), "
        f"{s['signatures']} signatures",
    ]
    return "\n".join(out) + "\n"
