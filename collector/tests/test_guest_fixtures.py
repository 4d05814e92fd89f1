# SPDX-License-Identifier: GPL-2.0
"""Titles and signatures of crash logs captured from real guest runs.

The fixtures in fixtures/guest/ are the last lines of netoops dumps that the
debug guest sent when it crashed in each way
(tests/tools/capture_fixtures.py writes them).  On the debug kernel KASAN
reports the bad access first, and, as in syzkaller, its report sets the title.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from netoops_collector.report import analyse, kind_of

GUEST = Path(__file__).resolve().parent / "fixtures" / "guest"

# fixture: (title, kind, culprit, first signature frames)
EXPECTED = {
    "null_deref.txt": ("KASAN: null-ptr-deref Write in nto_crash_null_deref",
                       "oops", "nto_crash_null_deref",
                       ["nto_crash_null_deref", "nto_crash_init"]),
    "timer_null_deref.txt": ("KASAN: null-ptr-deref Write in nto_crash_null_deref",
                             "panic", "nto_crash_null_deref",
                             ["nto_crash_null_deref", "call_timer_fn"]),
    "gpf.txt": ("KASAN: wild-memory-access Write in nto_crash_gpf", "oops",
                "nto_crash_gpf", ["nto_crash_gpf", "nto_crash_init"]),
    "bug_on.txt": ("kernel BUG in nto_crash_bug", "oops", "nto_crash_bug",
                   ["nto_crash_bug", "nto_crash_init"]),
    "warn.txt": ("WARNING in nto_crash_init", "oops", "nto_crash_init",
                 ["nto_crash_init", "do_one_initcall"]),
    "soft_lockup.txt": ("BUG: soft lockup in nto_crash_lockup", "panic",
                        "nto_crash_lockup", ["nto_crash_lockup", "nto_crash_init"]),
    "sysrq_panic.txt": ("Kernel panic - not syncing: sysrq triggered crash",
                        "panic", "sysrq_handle_crash",
                        ["sysrq_handle_crash", "__handle_sysrq",
                         "write_sysrq_trigger"]),
}


def test_every_guest_fixture_has_an_expectation():
    assert {p.name for p in GUEST.glob("*.txt")} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_guest_fixture(name: str):
    title, kind, culprit, frames = EXPECTED[name]
    text = (GUEST / name).read_text()
    rep = analyse(text)
    assert rep.title == title
    assert kind_of(1, text) == kind
    assert rep.guilty == culprit
    assert rep.signature_frames[:len(frames)] == frames
    assert rep.taint == "GO"            # out-of-tree test module
    assert rep.release == "6.1.192-netoops"


def test_same_bug_in_process_and_softirq_context_differs_by_stack():
    a = analyse((GUEST / "null_deref.txt").read_text())
    b = analyse((GUEST / "timer_null_deref.txt").read_text())
    assert a.title == b.title
    assert a.signature != b.signature   # different call paths
