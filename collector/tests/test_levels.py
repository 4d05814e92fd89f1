# SPDX-License-Identifier: GPL-2.0
"""netoops sends the log with syslog <N> prefixes and zero registers when a
dump has no fault: the collector reads both log forms alike and says so."""

from __future__ import annotations

import re
from pathlib import Path

from collector_util import fixture, packets
from netoops_collector import proto, store, views
from netoops_collector.reassembly import Reassembler
from netoops_collector.report import analyse, strip_levels


def with_levels(text: str) -> str:
    """The log as netoops sends it: <0> on panic lines, <6> elsewhere."""
    out = []
    for line in text.splitlines(True):
        level = 0 if "Kernel panic" in line else 6
        out.append(f"<{level}>{line}")
    return "".join(out)


def dump_of(log: str, regs: list[int] | None):
    r = Reassembler()
    got = []
    for p in packets(log, regs=regs):
        got += r.feed(p, "192.0.2.2", 2004)
    got += r.flush()
    assert len(got) == 1
    return got[0]


def test_strip_levels_keeps_the_timestamps():
    assert strip_levels("<0>[    1.000000] a\n<14>[    2.000000] b\nc <1>\n") == \
        "[    1.000000] a\n[    2.000000] b\nc <1>\n"


def test_both_forms_give_the_same_report():
    for name in ("sysrq_panic.txt", "null_deref_panic.txt", "soft_lockup.txt"):
        plain = fixture(name)
        a, b = analyse(plain), analyse(with_levels(plain))
        assert (a.title, a.signature, [f.func for f in a.frames]) == \
            (b.title, b.signature, [f.func for f in b.frames]), name


def test_show_says_no_registers_and_prints_the_text_without_levels(tmp_path: Path):
    db = tmp_path / "c.sqlite3"
    st = store.Store(db)
    zero = dump_of(with_levels(fixture("sysrq_panic.txt")), [0] * len(proto.REG_NAMES))
    regs = dump_of(with_levels(fixture("null_deref_panic.txt")),
                   list(range(1, len(proto.REG_NAMES) + 1)))
    ids = st.save([(d, analyse(d.log), None) for d in (zero, regs)])
    st.close()
    conn = store.open_readonly(db)
    plain, faulted = (store.get_dump(conn, n) for n in ids)
    assert plain["fault_registers"] is False and faulted["fault_registers"] is True
    # The stored log is what came over the wire, prefixes and all ...
    assert plain["log"].startswith("<6>[    0.000000] Linux version")
    out = views.show_text(plain)
    assert "registers: none (no fault" in out
    assert "rip " not in out
    # ... and show prints the text without them.
    log = out[out.index("\nlog:\n"):]
    assert not re.search(r"(?m)^<\d+>", log)
    assert "Kernel panic - not syncing: sysrq triggered crash" in log
    assert "registers (from the packet header):" in views.show_text(faulted)
