# SPDX-License-Identifier: GPL-2.0
"""`show --symbols` / `export --symbols`: frames to file:line with binutils.

The "kernel" here is built by the test with gcc -g: a module (a relocatable
object, as a .ko is) and a linked vmlinux.  The guest test
(tests/test_collector_e2e.py) does the same with the real debug kernel.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest

from collector_util import Serve, cli, cli_env, fixture, packets
from netoops_collector import proto, store
from test_serve import udp
from test_store import make_dump, report

MODULE_C = """\
static inline __attribute__((always_inline)) void poke(int *p)
{
	*(volatile int *)p = 0x6e746f;	/* POKE */
}

__attribute__((noinline)) void crash_here(int *p)
{
	poke(p);	/* CALL_POKE */
}

__attribute__((noinline)) int mod_caller(int *p)
{
	crash_here(p);	/* CALL_CRASH */
	__asm__ volatile("" ::: "memory");
	return 1;
}
"""

CORE_C = """\
extern int mod_caller(int *p);
int (*hook)(int *p);

__attribute__((noinline)) int core_call(int *p)
{
	int r = hook(p);	/* CALL_HOOK */

	__asm__ volatile("" ::: "memory");
	return r + 1;
}

void _start(void)
{
	core_call((int *)0);
}
"""

RELEASE = "6.1.0-netoops"


def _line(src: str, marker: str) -> int:
    return next(i for i, text in enumerate(src.splitlines(), 1) if f"/* {marker} */" in text)


def _symbol(obj: Path, name: str) -> tuple[int, int]:
    """(value, size) of a function symbol, from objdump -t."""
    out = subprocess.run(["objdump", "-t", str(obj)], capture_output=True, text=True,
                         check=True).stdout
    m = re.search(rf"^([0-9a-f]+) .{{7}} \S+\t([0-9a-f]+) {name}$", out, re.M)
    assert m, out
    return int(m.group(1), 16), int(m.group(2), 16)


def _span(obj: Path, name: str) -> int:
    """kallsyms' size of a symbol: up to the next symbol of its section."""
    out = subprocess.run(["objdump", "-t", str(obj)], capture_output=True, text=True,
                         check=True).stdout
    syms = [(int(m.group(1), 16), m.group(3), m.group(4)) for m in
            re.finditer(r"^([0-9a-f]+) (.{7}) (\S+)\t[0-9a-f]+ (\S+)$", out, re.M)
            if m.group(2)[5] != "d" and m.group(2)[6] != "f"]
    value, section = next((v, sec) for v, sec, n in syms if n == name)
    return min(v for v, sec, _ in syms if sec == section and v > value) - value


def _after_call(obj: Path, section: str, func: str) -> int:
    """The offset in ``func`` of the instruction after its first call."""
    out = subprocess.run(["objdump", "-d", "-j", section, str(obj)], capture_output=True,
                         text=True, check=True).stdout
    body = out.split(f"<{func}>:", 1)[1].split("\n\n", 1)[0]
    offs = [(int(m.group(1), 16), m.group(2)) for m in
            re.finditer(r"^\s*([0-9a-f]+):\s+(?:[0-9a-f]{2} )+\s*(\S+)", body, re.M)]
    start = offs[0][0]
    i = next(i for i, (_, op) in enumerate(offs) if op.startswith("call"))
    return offs[i + 1][0] - start


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Debug files in the flat layout: DIR/<release>/vmlinux, DIR/<release>/extra/*.ko."""
    tmp = tmp_path_factory.mktemp("sym")
    (tmp / "fake_mod.c").write_text(MODULE_C)
    (tmp / "core.c").write_text(CORE_C)
    top = tmp / "debug" / RELEASE
    (top / "extra").mkdir(parents=True)
    ko = top / "extra" / "fake-mod.ko"      # a '-' in the file name, '_' in traces
    vmlinux = top / "vmlinux"
    subprocess.run(["gcc", "-O2", "-g", "-ffunction-sections", "-c", "-o", str(ko),
                    str(tmp / "fake_mod.c")], check=True)
    subprocess.run(["gcc", "-O2", "-g", "-nostdlib", "-static", "-fno-pie", "-no-pie",
                    "-o", str(vmlinux), str(tmp / "core.c")], check=True)
    crash = _symbol(ko, "crash_here")
    caller = _symbol(ko, "mod_caller")
    core = _symbol(vmlinux, "core_call")
    text = fixture("null_deref.txt")
    text = text.replace("nto_crash_null_deref+0x9/0x20 [nto_crash]",
                        f"crash_here+0x0/{crash[1]:#x} [fake_mod]")
    # The last symbol of its section: kallsyms prints the size up to the
    # end of the area the section was laid in (a module's init text: a page).
    assert caller[1] < 0x1000
    text = text.replace("nto_crash_init+0x6d/0xff0 [nto_crash]",
                        f"mod_caller+{_after_call(ko, '.text.mod_caller', 'mod_caller'):#x}/"
                        "0x1000 [fake_mod]")
    # vmlinux's frame prints kallsyms' size: with the padding after it.
    span = _span(vmlinux, "core_call")
    assert span > core[1], "core_call is not followed by padding"
    text = text.replace("do_one_initcall+0x59/0x220",
                        f"core_call+{_after_call(vmlinux, '.text', 'core_call'):#x}/"
                        f"{span:#x}")
    # A frame whose size does not match the debug file's: another build.
    text = text.replace("do_init_module+0x4a/0x1f0", "core_call+0x4/0x9999")
    db = tmp / "c.sqlite3"
    st = store.Store(db)
    count = len(proto.split_log(text.encode()))
    dumps = [make_dump("null_deref.txt", log=text, packet_count=count, packets_received=count),
             make_dump("null_deref.txt", log=text, packet_count=count, packets_received=count,
                       kernel_version="6.1.0-elsewhere")]
    ids = st.save([(d, report(d), None) for d in dumps], {})
    st.close()
    return {"db": db, "dir": tmp / "debug", "ids": ids, "ko": ko, "vmlinux": vmlinux,
            "text": text}


def _show(kernel: dict[str, object], dump_id: int, *extra: str) -> dict[str, object]:
    res = cli("show", str(dump_id), "--db", kernel["db"], "--json", *extra)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def _where(sources: list[dict[str, object]]) -> list[tuple[object, object, object]]:
    return [(s["func"], Path(str(s["file"])).name, s["line"]) for s in sources]


def test_rip_and_frames_name_their_lines(kernel: dict[str, object]):
    d = _show(kernel, kernel["ids"][0], "--symbols", str(kernel["dir"]))
    # The RIP: the store in poke(), inlined into crash_here().
    assert _where(d["rip_source"]) == [("poke", "fake_mod.c", _line(MODULE_C, "POKE")),
                                       ("crash_here", "fake_mod.c",
                                        _line(MODULE_C, "CALL_POKE"))]
    assert [s["inlined"] for s in d["rip_source"]] == [True, False]
    by_func = {f["func"]: f for f in d["frames"] if f["reliable"]}
    # Return addresses name the line of their call, in a module and in vmlinux.
    assert _where(by_func["mod_caller"]["source"]) == [
        ("mod_caller", "fake_mod.c", _line(MODULE_C, "CALL_CRASH"))]
    core = [f for f in d["frames"] if f["func"] == "core_call"]
    assert _where(core[0]["source"]) == [("core_call", "core.c", _line(CORE_C, "CALL_HOOK"))]
    # Another build's frame (size 0x9999) and a bare address stay unnamed.
    assert core[1]["size"] == 0x9999 and core[1]["source"] == []
    assert all(f["source"] == [] for f in d["frames"] if f["func"] is None)
    assert d["symbols"] == {"dir": str(kernel["dir"]), "found": True, "frames": 4}


def test_text_shows_inlined_lines_as_syzbot_does(kernel: dict[str, object]):
    res = cli("show", str(kernel["ids"][0]), "--db", kernel["db"],
              "--symbols", str(kernel["dir"]))
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    i = lines.index(f"  RIP poke {kernel['dir'].parent}/fake_mod.c:{_line(MODULE_C, 'POKE')} "
                    "[inline]")
    assert re.fullmatch(rf"  RIP crash_here\+0x0/0x[0-9a-f]+ \[fake_mod\] \S+/fake_mod\.c:"
                        rf"{_line(MODULE_C, 'CALL_POKE')}", lines[i + 1])
    assert any(re.fullmatch(rf"  <task> mod_caller\+0x[0-9a-f]+/0x[0-9a-f]+ \[fake_mod\] "
                            rf"\S+/fake_mod\.c:{_line(MODULE_C, 'CALL_CRASH')}", ln)
               for ln in lines), lines
    assert "  (4 frame(s) named from the debug files in " in res.stdout


def test_the_dashboard_names_the_lines(kernel: dict[str, object]):
    from netoops_collector.symbolize import Symbols
    from netoops_collector.web import App
    from test_web import get, get_json
    app = App(kernel["db"], symbols=Symbols(kernel["dir"]))
    status, _, body = get(app, f"/dump/{kernel['ids'][0]}")
    assert status == 200
    assert re.search(rf"mod_caller\+0x[0-9a-f]+/0x[0-9a-f]+ \[fake_mod\] \S+/fake_mod\.c:"
                     rf"{_line(MODULE_C, 'CALL_CRASH')}", body.decode())
    d = get_json(app, f"/dump/{kernel['ids'][0]}.json")["dump"]
    assert _where(d["rip_source"])[0] == ("poke", "fake_mod.c", _line(MODULE_C, "POKE"))
    plain = get_json(App(kernel["db"]), f"/dump/{kernel['ids'][0]}.json")["dump"]
    assert "rip_source" not in plain
    res = cli("--db", kernel["db"], "web", "--symbols", "/nonexistent")
    assert res.returncode == 2 and "/nonexistent" in res.stderr


def test_without_symbols_nothing_changes(kernel: dict[str, object]):
    d = _show(kernel, kernel["ids"][0])
    assert "symbols" not in d and "rip_source" not in d
    assert all("source" not in f for f in d["frames"])


def test_another_kernel_is_shown_without_lines(kernel: dict[str, object]):
    d = _show(kernel, kernel["ids"][1], "--symbols", str(kernel["dir"]))
    assert d["symbols"]["found"] is False and d["rip_source"] == []
    res = cli("show", str(kernel["ids"][1]), "--db", kernel["db"],
              "--symbols", str(kernel["dir"]))
    assert "(no debug files for kernel 6.1.0-elsewhere in " in res.stdout


def test_debian_dbg_layout_and_the_environment(kernel: dict[str, object], tmp_path: Path):
    root = tmp_path / "usr-lib-debug"
    (root / "boot").mkdir(parents=True)
    mods = root / "lib" / "modules" / RELEASE / "kernel" / "drivers"
    mods.mkdir(parents=True)
    (root / "boot" / f"vmlinux-{RELEASE}").symlink_to(kernel["vmlinux"])
    (mods / "fake_mod.ko").symlink_to(kernel["ko"])
    res = cli("export", "--db", kernel["db"], env=cli_env(NETOOPS_SYMBOLS=str(root)))
    assert res.returncode == 0, res.stderr
    first = json.loads(res.stdout.splitlines()[0])
    assert first["symbols"]["frames"] == 4
    assert _where(first["rip_source"])[-1][:2] == ("crash_here", "fake_mod.c")


def test_a_missing_directory_is_a_usage_error(kernel: dict[str, object], tmp_path: Path):
    res = cli("show", str(kernel["ids"][0]), "--db", kernel["db"],
              "--symbols", str(tmp_path / "nope"))
    assert res.returncode == 2
    assert res.stdout == ""
    assert f"{tmp_path / 'nope'}: no such symbol directory" in res.stderr


def test_an_unreadable_debug_file_is_a_usage_error(kernel: dict[str, object],
                                                   tmp_path: Path):
    bad = tmp_path / RELEASE
    bad.mkdir()
    (bad / "vmlinux").write_text("not an ELF file\n")
    res = cli("show", str(kernel["ids"][0]), "--db", kernel["db"], "--symbols", str(tmp_path))
    assert res.returncode == 2 and res.stdout == ""
    assert "vmlinux: objdump -t failed" in res.stderr


def _json_file(path: Path, timeout: float = 20) -> dict[str, object]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            time.sleep(0.05)
    raise AssertionError(f"{path}: no JSON within {timeout} s")


def test_alert_reports_carry_the_lines(kernel: dict[str, object], tmp_path: Path):
    out = tmp_path / "hook.json"
    db = tmp_path / "serve.sqlite3"
    srv = Serve(db, "--hook", f"sh -c 'cat >{out}'", "--symbols", str(kernel["dir"]))
    try:
        udp(srv.port, packets(kernel["text"], boot_id=5))
        srv.wait_for("dump 1 from")
        d = _json_file(out)
    finally:
        assert srv.stop() == 0
    assert d["event"] == "new_signature"
    assert _where(d["rip_source"])[-1] == ("crash_here", "fake_mod.c",
                                            _line(MODULE_C, "CALL_POKE"))
    assert d["symbols"]["frames"] == 4


def test_serve_refuses_a_missing_directory_before_opening_anything(tmp_path: Path):
    db = tmp_path / "serve.sqlite3"
    res = cli("--db", db, "serve", "--listen", "127.0.0.1:0", "--netconsole-listen", "off",
              "--symbols", str(tmp_path / "no"))
    assert res.returncode == 2
    assert f"{tmp_path / 'no'}: no such symbol directory" in res.stderr
    assert list(tmp_path.iterdir()) == []
