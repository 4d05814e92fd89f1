# SPDX-License-Identifier: GPL-2.0
"""The netoops v3 wire format (x86_64): field table, decoder and encoder.

One UDP payload is one ``struct netoops_msg`` (modules/netoops_wire.h): a
216-byte header, the x86 block (CPU identity and ``struct pt_regs``) and 1024
bytes of the kernel log.  Every field is little-endian and the structures are
packed, so the payload is exactly 1412 bytes.

:data:`FIELDS` is the single declarative description of that layout.  The
offsets are computed from it, and a host test compiles the C header and
compares every offset and size with this table.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Mapping, Sequence

VERSION = 0x0003
PORT = 2004
TYPE_OOPS = 1           # NETOOPS_TYPE_PRINTK_BUFFER: an oops or a panic
TYPE_SOFT = 3           # NETOOPS_TYPE_PRINTK_BUFFER_SOFT: a live dump
TYPES = (TYPE_OOPS, TYPE_SOFT)
ARCH_X86 = 2
RETRANSMIT_COUNT = 3
DATA_BYTES = 1024
KVER_BYTES = 64
BLOB_BYTES = 128
# The most packets a dump may claim, by default: a 16 MiB log (netoops.ko's
# log_bytes has no upper limit; the collector's comes from its configuration).
MAX_PACKET_COUNT = 16384

# struct pt_regs on x86_64, in memory order (userspace <asm/ptrace.h> names).
REG_NAMES: tuple[str, ...] = (
    "r15", "r14", "r13", "r12", "rbp", "rbx", "r11", "r10", "r9", "r8",
    "rax", "rcx", "rdx", "rsi", "rdi", "orig_rax", "rip", "cs", "eflags",
    "rsp", "ss",
)

# X86_VENDOR_* in 6.1 arch/x86/include/asm/processor.h
VENDORS: dict[int, str] = {
    0: "Intel", 1: "Cyrix", 2: "AMD", 3: "UMC", 5: "Centaur", 7: "Transmeta",
    8: "NSC", 9: "Hygon", 10: "Zhaoxin", 11: "Vortex", 0xff: "unknown",
}


@dataclass(frozen=True)
class Field:
    """One field of ``struct netoops_msg``.

    ``name`` is the Python name, ``fmt`` the :mod:`struct` code (standard
    sizes, little-endian) and ``c_member`` the member designator in C, as
    used with ``offsetof(struct netoops_msg, ...)``.
    """

    name: str
    fmt: str
    c_member: str
    offset: int
    size: int


_SPEC: tuple[tuple[str, str, str], ...] = (
    # struct netoops_msg_header
    ("version", "H", "header.version"),
    ("dump_id", "H", "header.dump_id"),
    ("data_offset", "H", "header.data_offset"),
    ("arch", "H", "header.arch"),
    ("arch_offset", "H", "header.arch_offset"),
    ("type", "H", "header.type"),
    ("packet_count", "I", "header.packet_count"),
    ("packet_no", "I", "header.packet_no"),
    ("boot_id", "I", "header.boot_id"),
    ("kernel_version", f"{KVER_BYTES}s", "header.kernel_version"),
    ("user_blob", f"{BLOB_BYTES}s", "header.user_blob"),
    # struct netoops_arch_data
    ("x86_vendor", "B", "arch_data.x86_vendor"),
    ("x86_family", "B", "arch_data.x86_family"),
    ("x86_model", "B", "arch_data.x86_model"),
    ("x86_stepping", "B", "arch_data.x86_stepping"),
    *((reg, "Q", f"arch_data.regs.{reg}") for reg in REG_NAMES),
    # the log chunk
    ("data", f"{DATA_BYTES}s", "data"),
)


def _build(spec: Sequence[tuple[str, str, str]]) -> tuple[Field, ...]:
    fields = []
    offset = 0
    for name, fmt, c_member in spec:
        size = struct.calcsize("<" + fmt)
        fields.append(Field(name, fmt, c_member, offset, size))
        offset += size
    return tuple(fields)


FIELDS: tuple[Field, ...] = _build(_SPEC)
FIELD: dict[str, Field] = {f.name: f for f in FIELDS}

MSG = struct.Struct("<" + "".join(f.fmt for f in FIELDS))
PACKET_SIZE = MSG.size                                  # 1412
HEADER_SIZE = FIELD["x86_vendor"].offset                # 216
ARCH_OFFSET = HEADER_SIZE                               # 216
DATA_OFFSET = FIELD["data"].offset                      # 388
# The fixed-size numbers at the start of the header, for the fast path.
PREFIX = struct.Struct("<" + "".join(f.fmt for f in FIELDS[:9]))
# The x86 block, read at the header's arch_offset.
ARCH = struct.Struct("<" + "".join(f.fmt for f in FIELDS[11:-1]))
ARCH_SIZE = ARCH.size                                   # 172
_KVER = FIELD["kernel_version"]
_BLOB = FIELD["user_blob"]
# Bytes that identify one dump: everything but packet_no and the data.
IDENT_HEAD = FIELD["packet_no"].offset                  # [0, 16)
IDENT_TAIL = FIELD["boot_id"].offset                    # [20, data_offset)

# Why a datagram is not a usable netoops packet.
REASONS: tuple[str, ...] = (
    "truncated", "oversize", "version", "arch", "type", "offsets",
    "packet_count", "packet_no",
)


class DecodeError(ValueError):
    """A datagram that is not a valid netoops v3 packet; ``reason`` says why."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


def check(buf: bytes, max_count: int = MAX_PACKET_COUNT) -> tuple[int, ...]:
    """Validate ``buf`` and return the numbers at the start of the header.

    The tuple is (version, dump_id, data_offset, arch, arch_offset, type,
    packet_count, packet_no, boot_id).  Raises :class:`DecodeError`.
    """
    n = len(buf)
    if n < HEADER_SIZE:
        raise DecodeError("truncated", f"{n} bytes, the header is {HEADER_SIZE}")
    hdr = PREFIX.unpack_from(buf)
    version, _, data_offset, arch, arch_offset, type_, count, no, _ = hdr
    if version != VERSION:
        raise DecodeError("version", f"version {version}")
    if arch != ARCH_X86:
        raise DecodeError("arch", f"arch {arch}")
    if type_ not in TYPES:
        raise DecodeError("type", f"type {type_}")
    # Exactly the v3 layout: a self-consistent other layout is not v3, and
    # would let a forged datagram of another size pass.
    if arch_offset != ARCH_OFFSET or data_offset != DATA_OFFSET:
        raise DecodeError("offsets", f"arch_offset {arch_offset} data_offset {data_offset}")
    if n < PACKET_SIZE:
        raise DecodeError("truncated", f"{n} bytes, a packet is {PACKET_SIZE}")
    if n > PACKET_SIZE:
        raise DecodeError("oversize", f"{n} bytes, a packet is {PACKET_SIZE}")
    if count == 0 or count > max_count:
        raise DecodeError("packet_count", f"packet_count {count} (at most {max_count})")
    if no >= count:
        raise DecodeError("packet_no", f"packet_no {no} of {count}")
    return hdr


def cstring(raw: bytes) -> str:
    """A NUL-padded (not necessarily NUL-terminated) C string as text."""
    return raw.split(b"\0", 1)[0].decode("utf-8", "backslashreplace")


@dataclass(frozen=True)
class Packet:
    """One decoded netoops packet."""

    version: int
    dump_id: int
    data_offset: int
    arch: int
    arch_offset: int
    type: int
    packet_count: int
    packet_no: int
    boot_id: int
    kernel_version: bytes
    user_blob: bytes
    x86_vendor: int
    x86_family: int
    x86_model: int
    x86_stepping: int
    regs: tuple[int, ...]
    data: bytes

    @property
    def registers(self) -> dict[str, int]:
        return dict(zip(REG_NAMES, self.regs))


def decode(buf: bytes) -> Packet:
    """Decode one datagram; raises :class:`DecodeError` if it is not valid."""
    (version, dump_id, data_offset, arch_code, arch_offset, type_, packet_count,
     packet_no, boot_id) = check(buf)
    arch = ARCH.unpack_from(buf, arch_offset)
    return Packet(version=version, dump_id=dump_id, data_offset=data_offset,
                  arch=arch_code, arch_offset=arch_offset, type=type_,
                  packet_count=packet_count, packet_no=packet_no, boot_id=boot_id,
                  kernel_version=bytes(buf[_KVER.offset:_KVER.offset + _KVER.size]),
                  user_blob=bytes(buf[_BLOB.offset:_BLOB.offset + _BLOB.size]),
                  x86_vendor=arch[0], x86_family=arch[1], x86_model=arch[2],
                  x86_stepping=arch[3], regs=tuple(arch[4:]),
                  data=bytes(buf[data_offset:data_offset + DATA_BYTES]))


def _bytes(value: str | bytes, size: int) -> bytes:
    raw = value.encode() if isinstance(value, str) else bytes(value)
    return raw[:size]


def encode(*, data: bytes = b"", dump_id: int = 0, packet_count: int = 1,
           packet_no: int = 0, boot_id: int = 0, type: int = TYPE_OOPS,
           kernel_version: str | bytes = b"", user_blob: str | bytes = b"",
           cpu: Sequence[int] = (0, 6, 85, 7),
           regs: Sequence[int] | Mapping[str, int] | None = None,
           version: int = VERSION, arch: int = ARCH_X86,
           data_offset: int = DATA_OFFSET,
           arch_offset: int = ARCH_OFFSET) -> bytes:
    """Build one packet in the standard layout.

    The header values are written as given (so tests can craft bad
    packets); the x86 block and the data always go at their standard
    offsets.  ``data`` is NUL padded to 1024 bytes.
    """
    if regs is None:
        values = [0] * len(REG_NAMES)
    elif isinstance(regs, Mapping):
        values = [regs.get(name, 0) for name in REG_NAMES]
    else:
        values = list(regs)
    if len(data) > DATA_BYTES:
        raise ValueError(f"a chunk holds at most {DATA_BYTES} bytes")
    return MSG.pack(version, dump_id, data_offset, arch, arch_offset, type,
                    packet_count, packet_no, boot_id,
                    _bytes(kernel_version, KVER_BYTES),
                    _bytes(user_blob, BLOB_BYTES), *cpu, *values, data)


def split_log(log: bytes) -> list[bytes]:
    """Cut a log into chunks, indexed by packet_no (0 is the newest).

    Like the kernel, the chunks are aligned on the start of the log, so the
    newest chunk is the short one.
    """
    if not log:
        return [b""]
    chunks = [log[i:i + DATA_BYTES] for i in range(0, len(log), DATA_BYTES)]
    chunks.reverse()
    return chunks


def encode_dump(log: bytes, **header: object) -> list[bytes]:
    """One copy of a whole dump, in the kernel's send order (packet_no 0 first)."""
    chunks = split_log(log)
    return [encode(data=chunk, packet_count=len(chunks), packet_no=no,
                   **header)  # type: ignore[arg-type]
            for no, chunk in enumerate(chunks)]
