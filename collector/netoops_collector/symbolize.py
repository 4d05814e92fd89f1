# SPDX-License-Identifier: GPL-2.0
"""Frames to source lines, from a kernel's ``vmlinux`` and modules with debug info.

A symbol directory holds the debug files of each kernel by its release
(``uname -r``, the dump's ``kernel_version``), in either layout:

* ``DIR/<release>/vmlinux`` and the module ``.ko`` files anywhere below
  ``DIR/<release>/`` (what a kernel build's output directory has);
* ``DIR/boot/vmlinux-<release>`` and ``DIR/lib/modules/<release>/``, the
  layout of Debian's ``linux-image-*-dbg`` under ``/usr/lib/debug``.

A frame ``func+0xoff/0xsize [mod]`` is found as the symbol ``func`` of that
size in the module's file (or ``vmlinux``), and ``addr2line -i`` (binutils)
names its line and the functions inlined there, innermost first, as syzbot
prints them.  A call-trace frame is a return address, so its line is looked
up one byte before it: the call.  A frame whose symbol is not in the file,
or has another size (debug files of another build), stays unsymbolized.
The size a trace prints is kallsyms': up to the next symbol, so the padding
after a function counts; the ELF size or that span must match (for the last
symbol of a section, any size beyond its own).
"""

from __future__ import annotations

import bisect
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .report import Frame, parse_frame

ADDR2LINE = "addr2line"
OBJDUMP = "objdump"
_TIMEOUT = 120

# objdump -t: "value flags section<TAB>size name"; flags are 7 characters.
_SYMBOL_RE = re.compile(r"^([0-9a-f]+) (.{7}) (\S+)\t([0-9a-f]+) (.+)$")
_ADDRESS_RE = re.compile(r"^0x[0-9a-f]+$")
_LINE_RE = re.compile(r"^(.*):(\d+|\?)(?: \(discriminator \d+\))?$")
# The top directories of a kernel tree: a path is shown from the first.
_TREE_RE = re.compile(r"/((?:arch|block|certs|crypto|drivers|fs|include|init|io_uring|ipc|"
                      r"kernel|lib|mm|net|rust|samples|security|sound|virt)/.*)$")


class SymbolError(Exception):
    """The symbol directory cannot be used (a clear message for the user)."""


@dataclass(frozen=True)
class Source:
    """One line of a frame: a function (inlined or the frame's own) and where."""

    func: str
    file: str | None
    line: int | None
    inlined: bool

    def short_file(self) -> str | None:
        if self.file is None:
            return None
        m = _TREE_RE.search(self.file)
        return m.group(1) if m else self.file

    def where(self) -> str:
        name = self.short_file()
        if name is None:
            return "?"
        return f"{name}:{self.line}" if self.line is not None else name

    def as_dict(self) -> dict[str, Any]:
        return {"func": self.func, "file": self.file, "line": self.line,
                "inlined": self.inlined, "where": self.where()}


@dataclass(frozen=True)
class _Symbol:
    section: str
    value: int
    size: int       # the ELF size
    # To the next symbol of its section: the size kallsyms prints.  None for
    # the last one, which kallsyms bounds by the end of the area the kernel
    # laid the section in (a module's init text: a page).
    span: int | None


class _ObjectFile:
    """One ELF file's function symbols (by name) and its addr2line lookups."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.relocatable = path.suffix == ".ko"
        self.symbols: dict[str, list[_Symbol]] = {}
        try:
            out = subprocess.run([OBJDUMP, "-t", str(path)], capture_output=True, text=True,
                                 timeout=_TIMEOUT, check=False)
        except OSError as err:
            raise SymbolError(f"cannot run {OBJDUMP} (binutils): {err.strerror}") from None
        if out.returncode != 0:
            raise SymbolError(f"{path}: {OBJDUMP} -t failed: {out.stderr.strip()[:200]}")
        found: list[tuple[str, str, int, int]] = []
        starts: dict[str, set[int]] = {}
        for line in out.stdout.splitlines():
            m = _SYMBOL_RE.match(line)
            if (not m or "text" not in m.group(3) or m.group(2)[5] in "dD"
                    or m.group(2)[6] == "f"):
                continue
            value = int(m.group(1), 16)
            found.append((m.group(5), m.group(3), value, int(m.group(4), 16)))
            starts.setdefault(m.group(3), set()).add(value)
        ordered = {sec: sorted(v) for sec, v in starts.items()}
        for name, sec, value, size in found:
            addrs = ordered[sec]
            i = bisect.bisect_right(addrs, value)
            span = addrs[i] - value if i < len(addrs) else None
            self.symbols.setdefault(name, []).append(_Symbol(sec, value, size, span))

    def find(self, func: str, size: int | None) -> _Symbol | None:
        """The symbol a frame names: kallsyms prints the distance to the
        next symbol as the size, which alignment padding makes bigger than
        the ELF size; either must match."""
        cands = self.symbols.get(func, [])
        if size is not None:
            cands = [s for s in cands
                     if size in (s.size, s.span) or (s.span is None and size > s.size)]
        if len({(s.section, s.value) for s in cands}) != 1:
            return None     # absent, of another size, or ambiguous
        return cands[0]

    def lines(self, section: str | None, addrs: list[int]) -> list[list[Source]]:
        """addr2line -i for each address (in ``section`` for a module)."""
        cmd = [ADDR2LINE, "-a", "-f", "-i", "-e", str(self.path)]
        if section is not None:
            cmd += ["-j", section]
        try:
            out = subprocess.run(cmd, input="".join(f"{a:#x}\n" for a in addrs),
                                 capture_output=True, text=True, timeout=_TIMEOUT, check=False)
        except OSError as err:
            raise SymbolError(f"cannot run {ADDR2LINE} (binutils): {err.strerror}") from None
        blocks: list[list[str]] = []
        for line in out.stdout.splitlines():
            if _ADDRESS_RE.match(line):
                blocks.append([])
            elif blocks:
                blocks[-1].append(line)
        result = [_sources(b) for b in blocks]
        return result if len(result) == len(addrs) else [[] for _ in addrs]


def _sources(block: list[str]) -> list[Source]:
    """addr2line -f -i output for one address: (function, file:line) pairs."""
    pairs = list(zip(block[0::2], block[1::2]))
    out: list[Source] = []
    for i, (func, where) in enumerate(pairs):
        m = _LINE_RE.match(where)
        file = m.group(1) if m else where
        line = int(m.group(2)) if m and m.group(2).isdigit() else None
        if file == "??":
            file, line = None, None
        if func == "??" and file is None:
            continue
        out.append(Source(func, file, line or None, inlined=i < len(pairs) - 1))
    return out


class Symbols:
    """The debug files under one symbol directory, looked up by kernel release."""

    def __init__(self, root: Path) -> None:
        if not root.is_dir():
            raise SymbolError(f"{root}: no such symbol directory")
        self.root = root
        self._files: dict[Path, _ObjectFile] = {}
        self._modules: dict[str, dict[str, Path]] = {}

    def _kernel_dirs(self, release: str) -> tuple[Path | None, Path | None]:
        """(vmlinux, the directory of its modules) for a release, None if absent."""
        if "/" in release or release in ("", ".", ".."):
            return None, None
        flat = self.root / release
        if flat.is_dir():
            vmlinux = flat / "vmlinux"
            return (vmlinux if vmlinux.is_file() else None), flat
        debian = self.root / "boot" / f"vmlinux-{release}"
        mods = self.root / "lib" / "modules" / release
        return ((debian if debian.is_file() else None), (mods if mods.is_dir() else None))

    def _module(self, release: str, mod_dir: Path | None, name: str) -> Path | None:
        if mod_dir is None:
            return None
        if release not in self._modules:
            found: dict[str, Path] = {}
            for dirpath, _dirs, files in os.walk(mod_dir):
                for f in sorted(files):
                    if f.endswith(".ko"):
                        found.setdefault(f[:-3].replace("-", "_"), Path(dirpath) / f)
            self._modules[release] = found
        return self._modules[release].get(name.replace("-", "_"))

    def _object(self, path: Path) -> _ObjectFile:
        if path not in self._files:
            self._files[path] = _ObjectFile(path)
        return self._files[path]

    def has(self, release: str) -> bool:
        vmlinux, mods = self._kernel_dirs(release)
        return vmlinux is not None or mods is not None

    def resolve(self, release: str, frames: list[tuple[Frame, bool]]) -> list[list[Source]]:
        """Source lines for each (frame, is_return_address); [] where unknown."""
        vmlinux, mod_dir = self._kernel_dirs(release)
        result: list[list[Source]] = [[] for _ in frames]
        wanted: dict[tuple[Path, str | None], list[tuple[int, int]]] = {}
        for i, (frame, is_return) in enumerate(frames):
            if frame.func is None or frame.offset is None:
                continue
            path = (self._module(release, mod_dir, frame.module) if frame.module
                    else vmlinux)
            if path is None:
                continue
            obj = self._object(path)
            sym = obj.find(frame.func, frame.size)
            if sym is None:
                continue
            addr = sym.value + frame.offset - (1 if is_return and frame.offset else 0)
            section = sym.section if obj.relocatable else None
            wanted.setdefault((path, section), []).append((i, addr))
        for (path, section), items in wanted.items():
            lines = self._object(path).lines(section, [a for _, a in items])
            for (i, _), src in zip(items, lines):
                result[i] = src
        return result


def annotate(dump: dict[str, Any], symbols: Symbols) -> dict[str, Any]:
    """The dump (as store.get_dump has it) with ``source`` lists on its frames.

    Each frame dict, and ``rip_source`` for the RIP, gets a list of
    Source.as_dict, innermost first; ``symbols`` says where they came from.
    """
    release = dump.get("kernel_version") or ""
    frames = [parse_frame(f["text"]) for f in dump["frames"]]
    rip = parse_frame(dump["rip_frame"]) if dump.get("rip_frame") else None
    todo: list[tuple[Frame, bool]] = []
    if rip is not None:
        todo.append((rip, False))
    todo += [(f, True) for f in frames if f is not None]
    found = symbols.resolve(release, todo) if symbols.has(release) else [[] for _ in todo]
    it = iter(found)
    out = dict(dump)
    out["rip_source"] = [s.as_dict() for s in next(it)] if rip is not None else []
    out["frames"] = [dict(f, source=[s.as_dict() for s in next(it)] if p is not None else [])
                     for f, p in zip(dump["frames"], frames)]
    named = sum(1 for f in out["frames"] if f["source"]) + bool(out["rip_source"])
    out["symbols"] = {"dir": str(symbols.root), "found": symbols.has(release),
                      "frames": named}
    return out
