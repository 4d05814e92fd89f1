# SPDX-License-Identifier: GPL-2.0
"""The Python field table against the C header, compiled for real.

A small host program includes modules/netoops_wire.h through a shim (empty
<linux/types.h>, the userspace <asm/ptrace.h>, whose x86_64 struct pt_regs
has the kernel's 21 x u64 layout) and prints offsetof/sizeof of every field
in the table.
"""

from __future__ import annotations

import platform
import shutil
import subprocess
from pathlib import Path

import pytest

from collector_util import COLLECTOR
from netoops_collector import proto

HEADER = COLLECTOR.parent / "modules" / "netoops_wire.h"

pytestmark = [
    pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed"),
    pytest.mark.skipif(platform.machine() != "x86_64", reason="x86_64 layout"),
]

PRELUDE = """\
#include <stddef.h>
#include <stdio.h>
typedef unsigned short __le16;
typedef unsigned int __le32;
typedef unsigned char u8;
#define __packed __attribute__((packed))
#include "netoops_wire.h"
#define SZ(m) sizeof(((struct netoops_msg *)0)->m)
#define F(name, m) printf("%s %zu %zu\\n", name, offsetof(struct netoops_msg, m), SZ(m))
int main(void)
{
"""


def _program() -> str:
    lines = [PRELUDE]
    for f in proto.FIELDS:
        lines.append(f'\tF("{f.name}", {f.c_member});\n')
    for name in ("netoops_msg", "netoops_msg_header", "netoops_arch_data", "pt_regs"):
        lines.append(f'\tprintf("sizeof.{name} 0 %zu\\n", sizeof(struct {name}));\n')
    for const in ("NETOOPS_VERSION", "NETOOPS_PORT", "NETOOPS_TYPE_PRINTK_BUFFER",
                  "NETOOPS_TYPE_PRINTK_BUFFER_SOFT", "NETOOPS_ARCH_X86",
                  "NETOOPS_RETRANSMIT_COUNT", "NETOOPS_DATA_BYTES", "NETOOPS_KVER_BYTES",
                  "NETOOPS_BLOB_BYTES"):
        lines.append(f'\tprintf("const.{const} 0 %zu\\n", (size_t)({const}));\n')
    lines.append("\treturn 0;\n}\n")
    return "".join(lines)


@pytest.fixture(scope="module")
def c_layout(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, int]]:
    tmp: Path = tmp_path_factory.mktemp("layout")
    (tmp / "linux").mkdir()
    (tmp / "asm").mkdir()
    (tmp / "linux" / "types.h").write_text("/* shim: the program typedefs what it needs */\n")
    (tmp / "asm" / "ptrace.h").write_text("#include_next <asm/ptrace.h>\n")
    src = tmp / "layout.c"
    src.write_text(_program())
    exe = tmp / "layout"
    res = subprocess.run(["gcc", "-std=gnu11", "-Wall", "-Wextra", "-Werror",
                          "-I", str(tmp), "-I", str(HEADER.parent), "-o", str(exe), str(src)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    layout = {}
    for line in out.splitlines():
        name, offset, size = line.split()
        layout[name] = (int(offset), int(size))
    return layout


def test_every_field_offset_and_size_matches_c(c_layout: dict[str, tuple[int, int]]):
    python = {f.name: (f.offset, f.size) for f in proto.FIELDS}
    c = {k: v for k, v in c_layout.items() if "." not in k}
    assert python == c


def test_struct_sizes_match_c(c_layout: dict[str, tuple[int, int]]):
    assert c_layout["sizeof.netoops_msg"][1] == proto.PACKET_SIZE == proto.MSG.size
    assert c_layout["sizeof.netoops_msg_header"][1] == proto.HEADER_SIZE
    assert c_layout["sizeof.netoops_arch_data"][1] == proto.ARCH_SIZE
    assert c_layout["sizeof.pt_regs"][1] == 8 * len(proto.REG_NAMES)


def test_constants_match_c(c_layout: dict[str, tuple[int, int]]):
    const = {k.split(".", 1)[1]: v[1] for k, v in c_layout.items() if k.startswith("const.")}
    assert const == {
        "NETOOPS_VERSION": proto.VERSION, "NETOOPS_PORT": proto.PORT,
        "NETOOPS_TYPE_PRINTK_BUFFER": proto.TYPE_OOPS,
        "NETOOPS_TYPE_PRINTK_BUFFER_SOFT": proto.TYPE_SOFT,
        "NETOOPS_ARCH_X86": proto.ARCH_X86,
        "NETOOPS_RETRANSMIT_COUNT": proto.RETRANSMIT_COUNT,
        "NETOOPS_DATA_BYTES": proto.DATA_BYTES, "NETOOPS_KVER_BYTES": proto.KVER_BYTES,
        "NETOOPS_BLOB_BYTES": proto.BLOB_BYTES,
    }
