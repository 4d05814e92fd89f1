# SPDX-License-Identifier: GPL-2.0
"""Titles, frames, taint, modules and signatures from 6.1 x86_64 oops text."""

from __future__ import annotations

import pytest

from collector_util import FIXTURES, fixture
from netoops_collector import report
from netoops_collector.report import analyse, kind_of

# fixture: (title, kind from the text, culprit, taint, first module,
#           first signature frames)
EXPECTED = {
    "null_deref.txt": ("BUG: kernel NULL pointer dereference in nto_crash_null_deref",
                       "oops", "nto_crash_null_deref", "GO", "nto_crash",
                       ["nto_crash_null_deref", "nto_crash_init", "do_one_initcall"]),
    "null_deref_panic.txt": ("BUG: kernel NULL pointer dereference in nto_crash_null_deref",
                             "panic", "nto_crash_null_deref", "GOE", "nto_crash",
                             ["nto_crash_null_deref", "nto_crash_init", "do_one_initcall"]),
    "timer_null_deref.txt": ("BUG: kernel NULL pointer dereference in nto_crash_null_deref",
                             "panic", "nto_crash_null_deref", "GO", "nto_crash",
                             ["nto_crash_null_deref", "call_timer_fn", "__run_timers",
                              "run_timer_softirq", "__do_softirq"]),
    "gpf.txt": ("general protection fault in nto_crash_gpf", "panic", "nto_crash_gpf", "GO",
                "nto_crash", ["nto_crash_gpf", "nto_crash_init", "do_one_initcall"]),
    "gpf_kasan.txt": ("general protection fault in nto_crash_null_deref", "panic",
                      "nto_crash_null_deref", "GO", "nto_crash",
                      ["nto_crash_null_deref", "nto_crash_init", "do_one_initcall"]),
    "bug_on.txt": ("kernel BUG in nto_crash_bug", "panic", "nto_crash_bug", "GO", "nto_crash",
                   ["nto_crash_bug", "nto_crash_init", "do_one_initcall"]),
    "warn.txt": ("WARNING in nto_crash_init", "oops", "nto_crash_init", "GO", "nto_crash",
                 ["nto_crash_init", "do_one_initcall", "do_init_module"]),
    "sysrq_panic.txt": ("Kernel panic - not syncing: sysrq triggered crash", "panic",
                        "sysrq_handle_crash", "GO", None,
                        ["sysrq_handle_crash", "__handle_sysrq", "write_sysrq_trigger"]),
    "soft_lockup.txt": ("BUG: soft lockup in nto_crash_lockup", "panic", "nto_crash_lockup",
                        "GO", "nto_crash",
                        ["nto_crash_lockup", "nto_crash_init", "do_one_initcall"]),
}


def test_every_fixture_has_an_expectation():
    names = {p.name for p in FIXTURES.glob("*.txt")} - {"soft_dump.txt"}
    assert names <= set(EXPECTED), names - set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture(name: str):
    title, kind, culprit, taint, module, frames = EXPECTED[name]
    text = fixture(name)
    rep = analyse(text)
    assert rep.title == title
    assert kind_of(1, text) == kind
    assert rep.guilty == culprit
    assert rep.taint == taint
    assert (rep.modules[0][0] if rep.modules else None) == module
    assert rep.signature_frames[:len(frames)] == frames
    assert len(rep.signature) == 40
    assert rep.release and rep.release.startswith("6.1.0")


def test_same_bug_on_other_machines_groups_together():
    # other host, timestamps, addresses, taint, modules; oops vs panic
    a, b = analyse(fixture("null_deref.txt")), analyse(fixture("null_deref_panic.txt"))
    assert a.signature == b.signature
    timer = analyse(fixture("timer_null_deref.txt"))
    assert timer.title == a.title and timer.signature != a.signature
    gpf = analyse(fixture("gpf_kasan.txt"))
    assert gpf.signature != a.signature        # same stack, another kind of crash


def test_frames_are_parsed_with_reliability_context_and_module():
    rep = analyse(fixture("timer_null_deref.txt"))
    assert rep.rip is not None and rep.rip.text() == "nto_crash_null_deref+0x9/0x20 [nto_crash]"
    first = rep.frames[0]
    assert (first.func, first.reliable, first.context) == ("__die", False, "irq")
    timer = next(f for f in rep.frames if f.func == "call_timer_fn")
    assert (timer.offset, timer.size, timer.reliable, timer.module) == (0x27, 0x130, True, None)
    idle = next(f for f in rep.frames if f.func == "do_idle")
    assert idle.context == "task"                      # after </IRQ> <TASK>
    mod = next(f for f in rep.frames if f.module)
    assert mod.module == "nto_crash"
    bare = next(f for f in analyse(fixture("null_deref.txt")).frames if f.func is None)
    assert bare.address == 0xffffffffc0008000 and not bare.reliable


def test_modules_and_last_unloaded():
    rep = analyse(fixture("null_deref_panic.txt"))
    assert rep.modules == [("nto_crash", "OE+"), ("netoops", "OE"), ("netpoll_targets", "OE"),
                           ("virtio_net", ""), ("net_failover", ""), ("failover", "")]
    assert report.describe_taint("GOE") == ["out-of-tree module", "unsigned module"]


def test_soft_dump_without_a_crash():
    rep = analyse(fixture("soft_dump.txt"), soft=True)
    assert rep.title == "soft dump" and rep.kind is None and rep.frames == []
    assert kind_of(3, fixture("soft_dump.txt")) == "soft"
    assert analyse(fixture("soft_dump.txt")).title == "no crash report in the log"


def test_soft_dump_after_a_warning_is_titled_by_the_warning():
    rep = analyse(fixture("warn.txt"), soft=True)
    assert rep.title == "WARNING in nto_crash_init"


def test_first_oops_wins_over_later_ones_and_over_warnings():
    text = fixture("warn.txt") + fixture("gpf.txt") + fixture("bug_on.txt")
    assert analyse(text).title == "general protection fault in nto_crash_gpf"


def test_panic_on_warn_is_reported_as_the_warning():
    text = fixture("warn.txt").replace(
        "[    2.897488] ---[ end trace",
        "[    2.897400] Kernel panic - not syncing: kernel: panic_on_warn set ...\n"
        "[    2.897488] ---[ end trace")
    rep = analyse(text)
    assert rep.title == "WARNING in nto_crash_init" and rep.panic


def test_partial_log_without_the_header_still_gets_a_title():
    lines = fixture("null_deref.txt").splitlines(True)
    cut = "".join(line for line in lines if "BUG: kernel NULL" not in line)
    assert analyse(cut).title == "Oops in nto_crash_null_deref"


def test_log_levels_caller_ids_and_no_timestamps():
    text = fixture("gpf.txt")
    plain = "".join(line[15:] for line in text.splitlines(True))
    leveled = "".join("<4>" + line for line in text.splitlines(True))
    caller = "".join(line[:14] + "[ T93] " + line[15:] for line in text.splitlines(True))
    want = analyse(text)
    for variant in (plain, leveled, caller):
        got = analyse(variant)
        assert (got.title, got.signature, got.taint) == (want.title, want.signature, want.taint)


@pytest.mark.parametrize("line, title", [
    ("BUG: unable to handle page fault for address: ffffc90000a00000",
     "BUG: unable to handle page fault in f"),
    ("BUG: KASAN: slab-use-after-free in g+0x1/0x2", "KASAN: slab-use-after-free in g"),
    ("BUG: sleeping function called from invalid context at kernel/locking/mutex.c:580",
     "BUG: sleeping function called from invalid context in f"),
    ("BUG: scheduling while atomic: swapper/0/0/0x00000002",
     "BUG: scheduling while atomic in f"),
    ("invalid opcode: 0000 [#1] PREEMPT SMP NOPTI", "invalid opcode in f"),
    ("divide error: 0000 [#1] PREEMPT SMP NOPTI", "divide error in f"),
    ("WARNING: CPU: 3 PID: 1 at net/core/dev.c:1234 h.isra.0+0x2a/0x40 [m]", "WARNING in h"),
    ("WARNING: CPU: 3 PID: 1 at _raw_spin_lock+0x2a/0x40", "WARNING in f"),
    ("INFO: task kworker/0:1:12 blocked for more than 120 seconds.", "INFO: task hung in f"),
    ("watchdog: BUG: soft lockup - CPU#3 stuck for 23s! [a:1]", "BUG: soft lockup in f"),
    ("Kernel panic - not syncing: Attempted to kill init! exitcode=0x0000000b",
     "Kernel panic - not syncing: Attempted to kill init! exitcode=ADDR"),
    ("Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)",
     "Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)"),
])
def test_titles(line: str, title: str):
    text = (f"[    1.000000] {line}\n"
            "[    1.000001] RIP: 0010:f+0x1/0x2\n"
            "[    1.000002] Call Trace:\n"
            "[    1.000003]  <TASK>\n"
            "[    1.000004]  ? __die+0x1/0x2\n"
            "[    1.000005]  _raw_spin_lock+0x1/0x2\n"
            "[    1.000006]  f2+0x1/0x2\n"
            "[    1.000007]  </TASK>\n")
    assert analyse(text).title == title


def test_culprit_skips_crash_machinery_and_noise():
    text = ("BUG: kernel NULL pointer dereference, address: 0000000000000000\n"
            "RIP: 0010:memcpy_orig+0x10/0x110\n"
            "Call Trace:\n <TASK>\n ? asm_exc_page_fault+0x22/0x30\n"
            " __memcpy+0x1/0x2\n copy_thing.constprop.0+0x1/0x2 [mod]\n"
            " caller.cold+0x1/0x2\n </TASK>\n")
    rep = analyse(text)
    assert rep.title == "BUG: kernel NULL pointer dereference in copy_thing"
    assert rep.signature_frames == ["copy_thing", "caller"]


def test_signature_ignores_offsets_and_unreliable_frames():
    base = fixture("gpf.txt")
    moved = base.replace("nto_crash_init+0xd1/0xff0", "nto_crash_init+0xd9/0xff8") \
                .replace("? die_addr+0x38/0x60", "? something_else+0x1/0x2")
    assert analyse(base).signature == analyse(moved).signature


def test_normalise():
    assert report.normalise("CPU#12 stuck at ffffffff81234567 in a.c:12 f+0x1/0x2") == \
        "CPU stuck at ADDR in a.c:LINE f"
    assert len(report.normalise("x" * 500)) == report.MAX_TITLE


def test_garbage_never_raises():
    for text in ("", "\0\0\0", "Call Trace:\n", "RIP: 0010:\n", "BUG: \n",
                 "Kernel panic - not syncing\n", "[ 1.0] \n" * 100,
                 "WARNING: CPU: x PID: y at\nCall Trace:\n <TASK>\n ? +0x/0x\n"):
        rep = analyse(text)
        assert rep.title and (rep.signature is None or len(rep.signature) == 40)


def test_no_crash_text_has_no_signature_and_a_headless_trace_has_one():
    """A log without crash text is never grouped; a partial dump whose header
    chunk was lost is titled and signed from the frames that did arrive."""
    assert analyse("hello\nworld\n").signature is None
    assert analyse("", soft=True).signature is None
    text = fixture("null_deref.txt")
    full = analyse(text)
    headless = analyse(text[text.index("RIP: 0010:") - 16:])
    assert headless.title == f"crash report without its first lines in {full.guilty}"
    assert headless.signature_frames == full.signature_frames
    assert headless.signature and headless.signature != full.signature
    other = analyse(fixture("gpf.txt")[fixture("gpf.txt").index("Call Trace:") - 16:])
    assert other.signature != headless.signature


def test_kasan_title_has_the_access_kind():
    text = ("[   9.1] BUG: KASAN: slab-use-after-free in nto_uaf+0x2a/0x40 [nto_crash]\n"
            "[   9.1] Read of size 8 at addr ffff888006b9c0c0 by task insmod/121\n"
            "[   9.1] CPU: 0 PID: 121 Comm: insmod Tainted: G    B      O  6.1.0 #1\n"
            "[   9.1] Call Trace:\n[   9.1]  <TASK>\n[   9.1]  dump_stack_lvl+0x5b/0x77\n"
            "[   9.1]  print_report+0x18b/0x52e\n[   9.1]  kasan_report+0xb9/0xf0\n"
            "[   9.1]  nto_uaf+0x2a/0x40 [nto_crash]\n[   9.1]  do_one_initcall+0xa9/0x3b0\n"
            "[   9.1]  </TASK>\n")
    rep = analyse(text)
    assert rep.title == "KASAN: slab-use-after-free Read in nto_uaf"
    assert rep.signature_frames == ["nto_uaf", "do_one_initcall"]
    assert rep.taint == "GBO"


def test_a_log_full_of_headers_stays_cheap(monkeypatch: pytest.MonkeyPatch):
    """Only the first few candidate lines per key are classified, however
    many the log holds (counted, not timed)."""
    calls = []
    real = report._classify
    monkeypatch.setattr(report, "_classify", lambda pos, line: calls.append(pos) or
                        real(pos, line))
    text = "BUG: x\n" * 200_000 + fixture("gpf.txt")
    rep = analyse(text)
    assert rep.title == "BUG: x"
    assert len(calls) <= report._MAX_CANDIDATES * len(report._HEADER_KEYS)
