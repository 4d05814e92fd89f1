# SPDX-License-Identifier: GPL-2.0
"""Text and JSON rendering for the query commands."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from typing import Any

from . import proto
from .reassembly import format_ranges
from .report import describe_taint, strip_levels


# C0 controls, DEL and C1 controls: a terminal acts on them (colours, cursor
# moves, an 8-bit CSI), so text that came in a datagram never reaches one raw.
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def escape(text: str, keep: str = "\n") -> str:
    """``text`` with every control character not in ``keep`` shown as ``\\xNN``.

    A backslash is left alone, so ``\\x1b`` in the output is either an
    escaped ESC or those four characters as sent; never an ESC.
    """
    def one(m: re.Match[str]) -> str:
        c = m.group()
        return c if c in keep else f"\\x{ord(c):02x}"
    return _CONTROL_RE.sub(one, text)


def one_line(text: str | None, default: str = "-") -> str:
    """One line of display text from a stored string (newlines escaped too)."""
    return escape(text, keep="") if text else default


def when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# The version of every --json output and `export` line ("format" in each
# object): raised when a key changes meaning or goes away.
FORMAT = 1


def to_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=False) + "\n"


def _versioned(d: dict[str, Any]) -> dict[str, Any]:
    return {"format": FORMAT, **d}


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
    return to_json([_versioned(_with_times(r, "received")) for r in rows])


def list_text(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "no dumps stored\n"
    head = ("ID", "RECEIVED (UTC)", "HOST", "KERNEL", "TYPE", "COMPLETE", "TITLE")
    table = [head] + [(str(r["id"]), when(r["received"]), one_line(r["source"]),
                       one_line(r["kernel_version"], "?"), one_line(r["kind"]), _state(r),
                       one_line(r["title"]))
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
    return to_json(_versioned(_with_times(d, "received", "first_packet")))


def report_dict(d: dict[str, Any]) -> dict[str, Any]:
    """A stored dump (store.get_dump) as `show --json` prints it."""
    return _versioned(_with_times(d, "received", "first_packet"))


def export_line(d: dict[str, Any]) -> str:
    """One dump, as `show --json` has it, on one line (JSON lines)."""
    return json.dumps(_versioned(_with_times(d, "received", "first_packet")),
                      separators=(",", ":")) + "\n"


def show_text(d: dict[str, Any]) -> str:
    taint = one_line(d["taint"], "none")
    if d["taint"]:
        taint += " (" + ", ".join(one_line(t) for t in describe_taint(d["taint"])) + ")"
    mods = " ".join(one_line(m["name"]) + (f"({one_line(m['flags'])})" if m["flags"] else "")
                    for m in d["modules"]) or "-"
    fields = [
        ("dump", str(d["id"])),
        ("title", one_line(d["title"])),
        ("type", f"{one_line(d['kind'])} (wire type {d['type']})"),
        ("received", f"{when(d['received'])} (first packet {when(d['first_packet'])})"),
        ("source", f"{one_line(d['source'])} port {d['source_port']}"),
        ("boot_id", f"{d['boot_id']}   dump_id {d['dump_id']}"),
        ("kernel", one_line(d["kernel_version"], "?")),
        ("user blob", f"'{one_line(d['user_blob'])}'" if d["user_blob"] else "-"),
        ("cpu", f"{one_line(d['cpu_vendor_name'])} family {d['cpu_family']} "
                f"model {d['cpu_model']} stepping {d['cpu_stepping']}"),
        ("complete", _completeness(d)),
        ("signature", _signature(d)),
        ("culprit", one_line(d["guilty"])),
        ("taint", taint),
        ("comm", one_line(d["comm"])),
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
            out += _with_sources("  RIP ", d["rip_frame"], d.get("rip_source"))
        for f in d["frames"]:
            ctx = f"<{one_line(f['context'])}> " if f["context"] else ""
            out += _with_sources(f"  {ctx}", f["text"], f.get("source"))
        if "symbols" in d:
            out.append(_symbols_line(d))
    if d.get("netconsole"):
        out.append("")
        out += _netconsole_before(d["netconsole"])
    out.append("")
    out.append("log:")
    out.append(escape(strip_levels(d["log"]).rstrip("\n"), keep="\n\t"))
    return "\n".join(out) + "\n"


def _clock(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%H:%M:%S.%f")[:-3]


def nc_line(ln: dict[str, Any], meta: bool = False) -> str:
    """One netconsole line: arrival, the kernel's time and level, the text."""
    from .netconsole import unescape
    parts = [_clock(ln["arrival"])]
    if ln["seq"] is not None:
        ts = ln["ts_us"]
        parts.append(f"[{ts // 1_000_000:5d}.{ts % 1_000_000:06d}] <{ln['level']}>")
        text = unescape(ln["text"])
    else:
        text = ln["text"]
    parts.append(one_line(text, ""))
    if ln["cut"]:
        parts.append("[cut: pieces never came]")
    if meta and ln.get("meta"):
        parts.append("{" + " ".join(one_line(m) for m in ln["meta"].split("\n")) + "}")
    return " ".join(parts)


def stream_note(st: dict[str, Any]) -> str:
    kind = "extended" if st["extended"] else "basic"
    rel = f", release {one_line(st['release'])}" if st["release"] else ""
    lost = f", {_plural(st['lost'], 'record')} lost" if st["lost"] else ""
    seqs = (f", seq {st['first_seq']}..{st['last_seq']}" if st["first_seq"] is not None
            else "")
    return (f"stream {st['id']} from {one_line(st['source'])} port {st['port']}: {kind}"
            f"{rel}{seqs}, {_plural(st['lines'], 'line')}{lost}, {when(st['first_arrival'])}"
            f" to {when(st['last_arrival'])}"
            + (f", ended by {st['ended']}" if st["ended"] else ""))


def _netconsole_before(nc: dict[str, Any]) -> list[str]:
    out = [f"netconsole: {_plural(len(nc['lines']), 'line')} from "
           f"{one_line(nc['source'])} in the {nc['minutes']:g} minutes before the dump; "
           f"'+' marks the {nc['not_in_dump']} of its boot that its log does not have"
           + (f" ({nc['lost_from_dump']} within the log's time span: lost from the dump)"
              if nc["lost_from_dump"] else "")]
    out += [f"  {stream_note(st)}" for st in nc["streams"]]
    for ln in nc["lines"]:
        mark = "  " if ln["in_dump"] or ln.get("other_boot") else "+ "
        out.append(mark + nc_line(ln))
    return out


def tail_text(got: dict[str, Any]) -> str:
    out = [stream_note(got["stream"])]
    out += [nc_line(ln, meta=True) for ln in got["lines"]]
    return "\n".join(out) + "\n"


def tail_json(got: dict[str, Any]) -> str:
    return to_json(_versioned(got))


def silent_text(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "no host went silent\n"
    out: list[str] = []
    for row in rows:
        st = row["stream"]
        out.append(f"{one_line(st['source'])} went silent {st['silent_for']:.0f}s ago "
                   f"(last line {when(st['last_arrival'])}), no dump since")
        out.append(f"  {stream_note(st)}")
        out += [f"  {nc_line(ln)}" for ln in row["lines"]]
    return "\n".join(out) + "\n"


def silent_json(rows: list[dict[str, Any]]) -> str:
    return to_json(_versioned({"silent": rows}))


def _with_sources(lead: str, text: str, sources: list[dict[str, Any]] | None) -> list[str]:
    """A frame, after the functions inlined at its line, syzbot's way:
    ``inner file.c:12 [inline]`` lines, then ``func+0x1e/0x30 file.c:40``."""
    if not sources:
        return [f"{lead}{one_line(text)}"]
    own = sources[-1]
    lines = [f"{lead}{one_line(s['func'])} {one_line(s['where'])} [inline]"
             for s in sources[:-1]]
    lines.append(f"{lead}{one_line(text)} {one_line(own['where'])}")
    return lines


def _symbols_line(d: dict[str, Any]) -> str:
    sym = d["symbols"]
    kernel = one_line(d["kernel_version"], "?")
    if not sym["found"]:
        return f"  (no debug files for kernel {kernel} in {one_line(sym['dir'])})"
    return f"  ({sym['frames']} frame(s) named from the debug files in {one_line(sym['dir'])})"


def _completeness(d: dict[str, Any]) -> str:
    if d["complete"]:
        return f"yes ({d['packet_count']} of {d['packet_count']} chunks)"
    lost = sum(hi - lo + 1 for lo, hi in d["missing"])
    return (f"NO: {lost} of {d['packet_count']} chunks missing "
            f"(packet_no {format_ranges(d['missing'])}; 0 is the newest), "
            f"finalised by {one_line(d['finalised_by'])}")


def _signature(d: dict[str, Any]) -> str:
    if d["signature"] is None:
        return "none (no crash text: not grouped with other dumps)"
    names = " ".join(one_line(n) for n in d["signature_frames"]) or "-"
    return f"{one_line(d['signature'])}  ({names})"


# -- groups ---------------------------------------------------------------------
def groups_json(rows: list[dict[str, Any]]) -> str:
    return to_json([_versioned(_with_times(r, "first_seen", "last_seen")) for r in rows])


def groups_text(rows: list[dict[str, Any]], ungrouped: int = 0) -> str:
    """The groups; ``ungrouped`` dumps (no crash text) are only counted."""
    if not rows and not ungrouped:
        return "no dumps stored\n"
    out = []
    for g in rows:
        out.append(f"{one_line(g['signature'])[:12]}  {_plural(g['dumps'], 'dump')}"
                   f", {_plural(g['boots'], 'boot')}, {_plural(g['host_count'], 'host')}: "
                   f"{one_line(g['title'])}")
        out.append(f"    first seen {when(g['first_seen'])}, last seen {when(g['last_seen'])}")
        out.append(f"    kernels: {', '.join(one_line(k, '?') for k in g['kernels'])}")
        out.append(f"    hosts:   {', '.join(one_line(h) for h in g['hosts'])}")
        pruned = f" (and {g['pruned']} pruned)" if g.get("pruned") else ""
        out.append(f"    dumps:   {', '.join(str(i) for i in g['ids']) or '-'}{pruned}")
    if ungrouped:
        out.append(f"{_plural(ungrouped, 'dump')} without crash text "
                   "(soft dumps, logs without a crash): not grouped")
    return "\n".join(out) + "\n"


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' if n != 1 else ''}"


# -- stats ----------------------------------------------------------------------
def stats_json(st: dict[str, Any]) -> str:
    return to_json(_versioned(st))


def stats_text(st: dict[str, Any]) -> str:
    c = st["counters"]
    s = st["stored"]
    rejected = {k[len("rejected_"):]: v for k, v in c.items() if k.startswith("rejected_") and v}
    out = [
        f"packets received     {c.get('packets', 0)}",
        f"  dropped by kernel  {c.get('kernel_drops', 0)} (receive buffer full; not "
        "in the packets received)",
        f"  chunks kept        {c.get('accepted', 0)}",
        f"  duplicates         {c.get('duplicates', 0)}",
        f"  late               {c.get('late', 0)} (repaired a dump finalised as partial; "
        f"{c.get('late_dropped', 0)} more did not fit in memory)",
        f"  rejected           {sum(rejected.values())}"
        + (" (" + ", ".join(f"{one_line(k)} {v}" for k, v in sorted(rejected.items())) + ")"
           if rejected else ""),
        f"dumps complete       {c.get('dumps_complete', 0)}",
        f"dumps partial        {c.get('dumps_partial', 0)} (quiet timeout "
        f"{c.get('partial_timeout', 0)}, finalised early by the memory caps "
        f"{c.get('partial_capacity', 0)}, at shutdown {c.get('partial_shutdown', 0)})",
        f"dumps repaired       {c.get('dumps_repaired', 0)} (by late chunks)",
        f"dumps not stored     {c.get('dumps_junk_dropped', 0)} without crash text, "
        f"{c.get('dumps_rate_dropped', 0)} more, over their source's share",
        f"database errors      {c.get('store_errors', 0)} (dumps spooled to a file: "
        f"{c.get('spooled', 0)}); journal errors {c.get('journal_errors', 0)}",
        f"stored: {s['dumps']} dumps ({s['complete']} complete, {s['partial']} partial), "
        f"{s['signatures']} signatures, {s.get('no_crash_text', 0)} without crash text",
    ]
    g = st.get("gauges") or {}
    if g:
        out.append(f"at the last write: {int(g.get('inflight_dumps', 0))} dumps in flight, "
                   f"{int(g.get('held_bytes', 0))} bytes held, "
                   f"{int(g.get('ring_bytes', 0))} bytes queued in the receive ring, "
                   f"{int(g.get('unsaved_dumps', 0))} dumps not yet stored, "
                   f"{int(g.get('journal_bytes', 0))} bytes in the journal; most delay in "
                   f"the interval: queued {g.get('queue_delay_max', 0):.3f}s, finalised to "
                   f"durable {g.get('durable_delay_max', 0):.3f}s, to stored "
                   f"{g.get('store_delay_max', 0):.3f}s")
    sources = st.get("sources") or []
    if sources:
        out.append("sources with rejected or dropped traffic (most first):")
        for src in sources:
            counts = ", ".join(f"{k} {v}" for k, v in src["counters"].items())
            out.append(f"  {one_line(src['source'])}: {counts}")
    return "\n".join(out) + "\n"
