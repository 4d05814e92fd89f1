# SPDX-License-Identifier: GPL-2.0
"""Crash reports from kernel log text: title, frames, taint, modules, signature.

The parsing follows what ABRT (``koops``, satyr) and syzkaller
(``pkg/report``) do with Linux 6.1 x86_64 oops text:

* timestamps (``[   12.345678]``), ``<N>`` levels and ``[ T123]`` caller ids
  are stripped;
* every crash header in the log is found (``BUG:``, ``WARNING:``,
  ``kernel BUG at``, ``general protection fault``, traps, soft lockups,
  ``Kernel panic - not syncing``, ...); the report is about the first oops
  (the first crash is the cause, later ones are consequences), else the
  panic, else the first warning.  A panic that ``panic_on_warn`` raised is
  reported as the warning before it;
* the frames are the kernel ``RIP`` of that crash and its ``Call Trace``;
  frames marked ``?`` are unreliable and only kept for display;
* the title is syzkaller's ``<crash> in <function>``, where the function is
  the first frame that is not crash machinery (dump_stack, panic, the trap
  and page-fault handlers, ...) or generic noise (locks, delays, mem*/str*);
* the signature hashes the crash kind and the first few reliable, non
  generic frames of the stack that crashed, so the same bug from many
  machines, kernels and load addresses groups together.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

SIGNATURE_FRAMES = 6
MAX_TITLE = 120
_SCAN_LINES = 400      # how far below a crash header its frames are looked for

# -- line prefixes ------------------------------------------------------------
_PREFIX = r"(?:<\d{1,3}>(?:\[\s*\d+\.\d+\])?|\[\s*\d+\.\d+\])(?:\[\s*[CT]\d+\])? ?"
_PREFIX_RE = re.compile("(?m)^" + _PREFIX)
_LINE_PREFIX_RE = re.compile(_PREFIX)


def strip_prefixes(text: str) -> str:
    """Remove printk timestamps, syslog levels and caller ids from every line."""
    return _PREFIX_RE.sub("", text)


_LEVEL_RE = re.compile(r"(?m)^<\d{1,3}>")


def strip_levels(text: str) -> str:
    """Remove the syslog ``<N>`` level prefixes (netoops sends them) only."""
    return _LEVEL_RE.sub("", text)


def strip_line(line: str) -> str:
    m = _LINE_PREFIX_RE.match(line)
    return line[m.end():] if m else line


def _lines_from(text: str, pos: int, limit: int) -> list[str]:
    """Up to ``limit`` prefix-stripped lines of ``text`` from offset ``pos``."""
    return [strip_line(line) for line in text[pos:].split("\n", limit)[:limit]]


# -- crash headers ------------------------------------------------------------
_HEADER_RE = re.compile(
    r"""(?x)(?:
        (?:watchdog:\ )?BUG:\ .*
      | WARNING:\ .*
      | kernel\ BUG\ at\ .*
      | Kernel\ panic\ -\ not\ syncing.*
      | [a-z][a-z0-9 ]*(?:,[^:\n]*)?:\ [0-9a-f]{4}\ \[\#\d+\].*
      | Oops:\ .*
      | INFO:\ (?:task\ |rcu_).*
      | UBSAN:\ .*
      | (?:watchdog:\ )?Watchdog\ detected\ hard\ LOCKUP.*
    )""")

OOPS, WARNING, PANIC = "oops", "warning", "panic"

_FUNC = r"[A-Za-z_.$][\w.$]*"
# (regex on the header line, title base or None to use group 1, kind)
_RULES: tuple[tuple[re.Pattern[str], str | None, str], ...] = tuple(
    (re.compile(rx), base, kind) for rx, base, kind in (
        (r"^(?:watchdog: )?BUG: soft lockup", "BUG: soft lockup", OOPS),
        (r"^BUG: kernel NULL pointer dereference", "BUG: kernel NULL pointer dereference", OOPS),
        (r"^BUG: unable to handle page fault", "BUG: unable to handle page fault", OOPS),
        (r"^BUG: unable to handle kernel (paging request|NULL pointer dereference)",
         None, OOPS),
        (rf"^BUG: KASAN: ([\w-]+) in (?P<func>{_FUNC})", None, OOPS),
        (r"^BUG: (.+?)(?:: | at | - |, | in |!|$)", None, OOPS),
        (r"^kernel BUG at ", "kernel BUG", OOPS),
        (r"^(?:watchdog: )?Watchdog detected hard LOCKUP", "hard LOCKUP", OOPS),
        (r"^INFO: task \S+ blocked for more than", "INFO: task hung", OOPS),
        (r"^INFO: rcu_\w+ (?:self-)?detected stall", "INFO: rcu detected stall", OOPS),
        (r"^UBSAN: ([\w-]+)", None, OOPS),
        (r"^([a-z][a-z0-9 ]*?)(?:,[^:]*)?: [0-9a-f]{4} \[#\d+\]", None, OOPS),
        (r"^Oops: ", "Oops", OOPS),
        (r"^WARNING: possible (?:circular|recursive) locking dependency", "possible deadlock",
         WARNING),
        (rf"^WARNING: CPU: \d+ PID: \d+ at (?:\S+ )?(?P<func>{_FUNC})\+0x", "WARNING", WARNING),
        (rf"^WARNING: at \S+ (?P<func>{_FUNC})\+0x", "WARNING", WARNING),
        (r"^WARNING: (.+?)(?: at |!|$)", None, WARNING),
        (r"^Kernel panic - not syncing: ?(.*)", "Kernel panic - not syncing", PANIC),
    ))


@dataclass(frozen=True)
class Header:
    """One crash header line found in the log."""

    pos: int            # offset of the line in the log text
    line: str
    kind: str           # oops, warning or panic
    base: str           # the title before " in <function>"
    func: str | None    # a function named by the header line itself


def _classify(pos: int, line: str) -> Header | None:
    for rx, base, kind in _RULES:
        m = rx.match(line)
        if not m:
            continue
        if kind == PANIC:
            msg = normalise(m.group(1).strip())
            return Header(pos, line, kind, f"{base}: {msg}" if msg else str(base), None)
        if base is None:
            if line.startswith("BUG: KASAN"):
                base = f"KASAN: {m.group(1)}"
            elif line.startswith(("BUG: ", "UBSAN: ")):
                base = line.split(":", 1)[0] + ": " + normalise(m.group(1))
            elif line.startswith("WARNING: "):
                base = "WARNING: " + normalise(m.group(1))
            else:
                base = normalise(m.group(1))
        func = m.groupdict().get("func")
        return Header(pos, line, kind, base, canonical(func) if func else None)
    return None


# Every header line contains one of these; only those lines are matched, the
# first _MAX_CANDIDATES of each (a log made of "BUG: " lines stays cheap).
_MAX_CANDIDATES = 256
_HEADER_KEYS = ("BUG: ", "WARNING: ", "kernel BUG at ", "Kernel panic - not syncing",
                " [#", "Oops: ", "INFO: ", "UBSAN: ", "hard LOCKUP")


def headers(text: str) -> list[Header]:
    """Every crash header in ``text``, in log order (``pos``: line offset).

    str.find() picks the candidate lines, so a long log costs little more
    than a scan for a few fixed strings.
    """
    starts: set[int] = set()
    for key in _HEADER_KEYS:
        i = text.find(key)
        for _ in range(_MAX_CANDIDATES):
            if i < 0:
                break
            start = text.rfind("\n", 0, i) + 1
            starts.add(start)
            end = text.find("\n", i)
            if end < 0:
                break
            i = text.find(key, end)
    found = []
    for start in sorted(starts):
        end = text.find("\n", start)
        line = strip_line(text[start:end if end >= 0 else len(text)]).rstrip()
        if _HEADER_RE.fullmatch(line):
            h = _classify(start, line)
            if h is not None:
                found.append(h)
    return found


def choose(found: list[Header]) -> Header | None:
    """The header the report is about (see the module docstring)."""
    for h in found:
        if h.kind == OOPS:
            return h
    for h in found:
        if h.kind == PANIC:
            if "panic_on_warn" in h.line:
                warned = [w for w in found if w.kind == WARNING and w.pos < h.pos]
                if warned:
                    return warned[-1]
            return h
    for h in found:
        if h.kind == WARNING:
            return h
    return None


# -- frames -------------------------------------------------------------------
_FRAME_RE = re.compile(
    rf"^\s*(?P<q>\? )?(?:(?P<func>{_FUNC})\+0x(?P<off>[0-9a-f]+)/0x(?P<size>[0-9a-f]+)"
    r"|(?P<addr>0x[0-9a-f]+))(?: \[(?P<mod>[\w-]+)(?: [0-9a-f]+)?\])?\s*$")
_MARKER_RE = re.compile(r"^\s*<(/?)([#A-Z_]+)>\s*$")
_REGDUMP_RE = re.compile(r"^\s*(?:RIP|Code|RSP|R[A-Z0-9]{1,2}|[CDEFGS]S|CR\d|DR\d|PKRU)\s*:")
_KERNEL_RIP_RE = re.compile(r"^RIP: 0010:(.*)$")
_CALL_TRACE_RE = re.compile(r"^\s*Call Trace:\s*$")
_CPU_RE = re.compile(
    r"^CPU: (?P<cpu>\d+) PID: (?P<pid>\d+) Comm: (?P<comm>.*?) "
    r"(?:Not tainted|Tainted: (?P<taint>[A-Z ]*?)) +(?P<release>\d\S*)")
_MODULES_RE = re.compile(r"Modules linked in:(.*)$")
_SUFFIX_RE = re.compile(r"(?:\.(?:cold|isra|constprop|part|llvm|lto_priv|localalias)(?:\.\d+)*)+$")


@dataclass(frozen=True)
class Frame:
    """One stack frame: ``[? ]func+0xoff/0xsize [module]`` or a bare address."""

    func: str | None
    offset: int | None
    size: int | None
    module: str | None
    reliable: bool
    context: str = ""         # the <TASK>/<IRQ>/... section, "" if none
    block: int = 0            # index of that section within the trace
    address: int | None = None  # for a frame without a symbol

    def text(self) -> str:
        if self.func:
            where = f"{self.func}+{self.offset or 0:#x}/{self.size or 0:#x}"
        else:
            where = f"{self.address or 0:#x}"
        mod = f" [{self.module}]" if self.module else ""
        return f"{'' if self.reliable else '? '}{where}{mod}"

    def as_dict(self) -> dict[str, object]:
        return {"func": self.func, "offset": self.offset, "size": self.size,
                "module": self.module, "reliable": self.reliable,
                "context": self.context,
                "address": None if self.address is None else f"{self.address:#x}",
                "text": self.text()}


def parse_frame(line: str, context: str = "", block: int = 0) -> Frame | None:
    m = _FRAME_RE.match(line)
    if not m:
        return None
    if m.group("func"):
        return Frame(m.group("func"), int(m.group("off"), 16), int(m.group("size"), 16),
                     m.group("mod"), m.group("q") is None, context, block)
    return Frame(None, None, None, m.group("mod"), m.group("q") is None, context, block,
                 int(m.group("addr"), 16))


def canonical(func: str) -> str:
    """A function name without compiler suffixes (.cold, .isra.0, ...)."""
    return _SUFFIX_RE.sub("", func)


def parse_trace(lines: list[str]) -> list[Frame]:
    """Frames of the call trace whose lines follow a ``Call Trace:`` line."""
    frames: list[Frame] = []
    context, block = "", 0
    for line in lines:
        frame = parse_frame(line, context, block)
        if frame is not None:
            frames.append(frame)
            continue
        m = _MARKER_RE.match(line)
        if m:
            block += 1
            context = "" if m.group(1) else m.group(2).lower()
            continue
        if _REGDUMP_RE.match(line):
            continue
        break
    return frames


# Crash machinery: never the culprit, never part of a signature.
_GENERIC_RE = re.compile(r"""^(?:
    dump_stack(?:_lvl)? | show_stack | show_trace_log_lvl | show_regs | __show_regs
  | panic | nmi_panic | vpanic | check_panic_on_warn
  | __warn | warn_slowpath_fmt | __warn_printk | report_bug | handle_bug
  | die | __die | __die_body | die_addr | oops_begin | oops_end
  | do_trap | do_error_trap | do_int3 | do_int3_user | math_error
  | fixup_exception | page_fault_oops | kernelmode_fixup_or_oops | no_context
  | __bad_area_nosemaphore | bad_area_nosemaphore | bad_area | spurious_kernel_fault
  | do_user_addr_fault | do_kern_addr_fault | handle_page_fault
  | search_module_extables | search_exception_tables
  | exc_\w+ | asm_exc_\w+ | asm_sysvec_\w+ | sysvec_\w+ | __sysvec_\w+
  | asm_common_interrupt | common_interrupt | irq_exit_rcu | __irq_exit_rcu
  | irqentry_\w+ | noist_exc_\w+
  | watchdog_timer_fn | __hrtimer_run_queues | hrtimer_interrupt | __run_hrtimer
  | lockup_detector_\w+ | watchdog_overflow_callback | __perf_event_overflow
  | __pfx_\w+
  | kasan_\w+ | __kasan_\w+ | kmsan_\w+ | __asan_\w+ | __msan_\w+ | __ubsan_\w+
  | __sanitizer_\w+ | check_memory_region\w* | report_\w+
  | print_report | end_report | ubsan_epilogue
  | lockdep_\w+ | __lock_acquire | lock_acquire | print_\w+ | debug_\w+
)$""", re.X)
# Generic helpers: skipped when naming the culprit and in signatures.
_NOISE_RE = re.compile(r"""^(?:
    delay_tsc | delay_halt\w* | delay_loop | __const_udelay | __udelay | __ndelay | __delay
  | _raw_\w+ | do_raw_\w+ | queued_\w+ | native_queued_\w+ | __pv_queued_\w+
  | mutex_lock\w* | __mutex_lock\w* | mutex_unlock | down_\w+ | up_\w+
  | mem(?:cpy|set|move|cmp|chr)\w* | __mem(?:cpy|set|move)\w* | str\w+
  | _?copy_(?:to|from)_user\w* | copy_user_\w+ | rep_movs_alternative
  | __list_(?:add|del)\w* | list_\w+
  | _?printk | vprintk\w* | printk_\w+ | dev_\w*printk\w* | _dev_\w+
  | refcount_warn_saturate | __might_\w+ | __might_sleep | __cant_sleep | ___might_sleep
  | __schedule | schedule | schedule_timeout\w* | schedule_preempt_disabled
  | io_schedule\w* | preempt_schedule\w* | wait_for_completion\w* | __wait_for_common
  | do_wait_for_common
)$""", re.X)


def is_generic(func: str) -> bool:
    return bool(_GENERIC_RE.match(func) or _NOISE_RE.match(func))


# -- taint --------------------------------------------------------------------
TAINT_FLAGS: dict[str, str] = {
    "P": "proprietary module", "F": "module force loaded",
    "S": "unsafe SMP / out of spec", "R": "module force unloaded",
    "M": "machine check", "B": "bad page", "U": "user request",
    "D": "died recently (oops or BUG)", "A": "ACPI table overridden",
    "W": "warning issued", "C": "staging driver", "I": "firmware workaround",
    "O": "out-of-tree module", "E": "unsigned module", "L": "soft lockup",
    "K": "live patched", "X": "auxiliary", "T": "struct randomization",
    "N": "in-kernel test",
}


def describe_taint(taint: str) -> list[str]:
    return [TAINT_FLAGS.get(c, f"unknown flag {c}") for c in taint if c != "G"]


# -- the report ---------------------------------------------------------------
@dataclass
class Report:
    title: str
    kind: str | None                 # oops, warning, panic, or None: no crash seen
    guilty: str | None
    rip: Frame | None
    frames: list[Frame] = field(default_factory=list)
    signature_frames: list[str] = field(default_factory=list)
    signature: str | None = ""     # None: no crash text, nothing to group by
    taint: str = ""                  # e.g. "GOE"; "" for "Not tainted" or unknown
    modules: list[tuple[str, str]] = field(default_factory=list)   # (name, flags)
    comm: str | None = None
    release: str | None = None
    panic: bool = False              # "Kernel panic - not syncing" is in the log


def normalise(text: str) -> str:
    """syzkaller-style title clean-up: no addresses, line or CPU numbers."""
    text = "".join(c for c in text if c.isprintable())
    text = re.sub(r"\b(?:0x)?[0-9a-f]{6,}\b", "ADDR", text)
    text = re.sub(r"CPU#\d+", "CPU", text)
    text = re.sub(r"(\.[ch]):\d+", r"\1:LINE", text)
    text = re.sub(rf"({_FUNC})\+0x[0-9a-f]+/0x[0-9a-f]+", r"\1", text)
    return " ".join(text.split())[:MAX_TITLE]


def parse_modules(line: str) -> list[tuple[str, str]]:
    """``Modules linked in:`` text -> [(name, flags)], without [last unloaded]."""
    line = re.sub(r"\[last unloaded:[^\]]*\]", " ", line)
    mods: list[tuple[str, str]] = []
    for tok in line.split():
        m = re.match(r"^([\w-]+)(?:\(([A-Z+\-]*)\))?$", tok)
        if m:
            mods.append((m.group(1), m.group(2) or ""))
    return mods


def _signature(base: str, names: list[str]) -> str:
    h = hashlib.sha1()
    h.update(base.encode())
    for name in names:
        h.update(b"\n" + name.encode())
    return h.hexdigest()


def analyse(text: str, *, soft: bool = False) -> Report:
    """Build the :class:`Report` for a dump's log text.

    ``soft`` is true for a soft dump (sysrq), which needs no crash in it.
    """
    is_panic = "Kernel panic - not syncing" in text
    header = choose(headers(text))
    if header is None:
        return _headless(text, soft, is_panic)
    lines = _lines_from(text, header.pos, _SCAN_LINES)
    rip, frames = _trace(lines, header)
    names = _stack_names(rip, frames)
    guilty = header.func if header.func and not is_generic(header.func) else None
    if guilty is None and names:
        guilty = names[0]
    base = header.base
    access = _KASAN_ACCESS_RE.match(lines[1]) if len(lines) > 1 else None
    if base.startswith("KASAN: ") and access:
        base += " " + access.group(1)          # syzkaller: "KASAN: ... Read in f"
    title = base if header.kind == PANIC or guilty is None else f"{base} in {guilty}"
    report = Report(title[:MAX_TITLE], header.kind, guilty, rip, frames, names,
                    _signature(base, names), panic=is_panic)
    _fill_context(report, lines, text)
    return report


_KASAN_ACCESS_RE = re.compile(r"^(Read|Write) of size \d+")
_DIE_RE = re.compile(r"^(?:Oops: |[a-z][a-z0-9 ]*(?:,[^:]*)?: [0-9a-f]{4} \[#\d+\])")


def _trace(lines: list[str], header: Header | None) -> tuple[Frame | None, list[Frame]]:
    """The kernel RIP frame and the call trace in ``lines`` (below ``header``)."""
    rip: Frame | None = None
    for i, line in enumerate(lines):
        if i and (line.startswith("---[ end trace")
                  or (header is not None and _is_other_header(line, header))):
            break
        m = _KERNEL_RIP_RE.match(line)
        if m and rip is None:
            rip = parse_frame(m.group(1))
            continue
        if _CALL_TRACE_RE.match(line):
            return rip, parse_trace(lines[i + 1:])
    return rip, []


HEADLESS = "crash report without its first lines"
_TRACE_START_RE = re.compile(r"(?m)^(?:<\d{1,3}>)?(?:\[[^\]\n]*\] ?)*(?:RIP: 0010:|\s*Call Trace:)")


def _headless(text: str, soft: bool, is_panic: bool) -> Report:
    """A log with no crash header: a soft dump, a log without a crash, or a
    partial dump whose header chunk was lost but whose trace arrived.

    Only the last gets a title from its frames and a signature; a log
    without crash text gets no signature, so such dumps are never grouped
    together as if they were one crash.
    """
    m = _TRACE_START_RE.search(text)
    rip, frames = _trace(_lines_from(text, m.start(), _SCAN_LINES), None) if m else (None, [])
    names = _stack_names(rip, frames)
    if not names:
        title = "soft dump" if soft else "no crash report in the log"
        report = Report(title, None, None, None, panic=is_panic, signature=None)
        _fill_context(report, [], text)
        return report
    report = Report(f"{HEADLESS} in {names[0]}"[:MAX_TITLE], None, names[0], rip, frames,
                    names, _signature(HEADLESS, names), panic=is_panic)
    _fill_context(report, [], text)
    return report


def _is_other_header(line: str, header: Header) -> bool:
    """A crash header that starts another report (not the die() line of this one)."""
    return (line != header.line and _HEADER_RE.fullmatch(line.rstrip()) is not None
            and _DIE_RE.match(line) is None)


def _stack_names(rip: Frame | None, frames: list[Frame]) -> list[str]:
    """Function names for the culprit and the signature, most recent first.

    The RIP, then the reliable frames of the first trace section that has
    any (the stack that crashed, not the task an interrupt came in on),
    without compiler suffixes, repeats, crash machinery and noise.
    """
    reliable = [f for f in frames if f.reliable and f.func]
    candidates: list[str] = []
    if rip is not None and rip.func:
        candidates.append(rip.func)
    if reliable:
        first = reliable[0].block
        candidates += [f.func for f in reliable if f.block == first and f.func]
    names: list[str] = []
    for func in candidates:
        func = canonical(func)
        if is_generic(func) or (names and names[-1] == func):
            continue
        names.append(func)
        if len(names) == SIGNATURE_FRAMES:
            break
    return names


def _fill_context(report: Report, region: list[str], whole: str) -> None:
    """Taint, comm, release and modules: from the crash region, else the log."""
    cpu = next((m for m in map(_CPU_RE.match, region) if m), None) \
        or _first_line_match(whole, "Comm: ", _CPU_RE)
    if cpu:
        report.taint = (cpu.group("taint") or "").replace(" ", "")
        report.comm = cpu.group("comm")
        report.release = cpu.group("release")
    mods = next((m for m in map(_MODULES_RE.match, region) if m), None) \
        or _first_line_match(whole, "Modules linked in:", _MODULES_RE)
    if mods:
        report.modules = parse_modules(mods.group(1))


def _first_line_match(text: str, key: str, rx: re.Pattern[str]) -> re.Match[str] | None:
    """The first line containing ``key`` that ``rx`` matches (prefix stripped)."""
    i = text.find(key)
    while i >= 0:
        start = text.rfind("\n", 0, i) + 1
        end = text.find("\n", i)
        m = rx.match(strip_line(text[start:end if end >= 0 else len(text)]))
        if m:
            return m
        if end < 0:
            return None
        i = text.find(key, end)
    return None


def kind_of(dump_type: int, text: str) -> str:
    """'soft' for a soft dump; for type 1, 'panic' or 'oops' from the text."""
    if dump_type == 3:
        return "soft"
    return "panic" if "Kernel panic - not syncing" in text else "oops"
