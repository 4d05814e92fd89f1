# SPDX-License-Identifier: GPL-2.0
"""The wire format: field table, encoder and decoder."""

from __future__ import annotations

import pytest

from collector_util import packets
from netoops_collector import proto

REGS = {name: (i + 1) * 0x1111111111111111 & 0xffffffffffffffff
        for i, name in enumerate(proto.REG_NAMES)}


def test_layout_numbers_match_the_wire_format():
    f = proto.FIELD
    expect = {"version": 0, "dump_id": 2, "data_offset": 4, "arch": 6, "arch_offset": 8,
              "type": 10, "packet_count": 12, "packet_no": 16, "boot_id": 20,
              "kernel_version": 24, "user_blob": 88, "x86_vendor": 216, "x86_family": 217,
              "x86_model": 218, "x86_stepping": 219, "r15": 220, "rip": 220 + 16 * 8,
              "ss": 220 + 20 * 8, "data": 388}
    assert {k: f[k].offset for k in expect} == expect
    assert proto.PACKET_SIZE == 1412
    assert proto.HEADER_SIZE == proto.ARCH_OFFSET == 216
    assert proto.DATA_OFFSET == 388
    assert proto.ARCH_SIZE == 4 + 21 * 8
    assert len(proto.REG_NAMES) == 21
    assert proto.MSG.format.startswith("<")


def test_round_trip_every_field():
    buf = proto.encode(data=b"hello\n", dump_id=0xbeef, packet_count=9, packet_no=4,
                       boot_id=0xdeadbeef, type=proto.TYPE_SOFT,
                       kernel_version="6.1.0-18-amd64", user_blob=b"rack 12\0x",
                       cpu=(2, 25, 1, 1), regs=REGS)
    assert len(buf) == proto.PACKET_SIZE
    p = proto.decode(buf)
    assert (p.version, p.dump_id, p.data_offset, p.arch, p.arch_offset, p.type) == \
        (3, 0xbeef, 388, 2, 216, 3)
    assert (p.packet_count, p.packet_no, p.boot_id) == (9, 4, 0xdeadbeef)
    assert proto.cstring(p.kernel_version) == "6.1.0-18-amd64"
    assert proto.cstring(p.user_blob) == "rack 12"
    assert (p.x86_vendor, p.x86_family, p.x86_model, p.x86_stepping) == (2, 25, 1, 1)
    assert p.registers == REGS
    assert p.data.rstrip(b"\0") == b"hello\n" and len(p.data) == 1024
    # the bytes sit where the C struct puts them
    assert buf[20:24] == (0xdeadbeef).to_bytes(4, "little")
    assert buf[220:228] == REGS["r15"].to_bytes(8, "little")
    assert buf[388:394] == b"hello\n"


def test_kernel_version_without_nul_terminator():
    kver = "6" * 64   # strncpy of a 64-byte release leaves no NUL
    p = proto.decode(proto.encode(kernel_version=kver))
    assert proto.cstring(p.kernel_version) == kver


def _bad(**kw: object) -> bytes:
    return proto.encode(**kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("buf, reason", [
    (b"", "truncated"),
    (b"\x03\x00" * 50, "truncated"),
    (_bad()[:1000], "truncated"),
    (_bad()[:proto.PACKET_SIZE - 1], "truncated"),
    (_bad() + b"\0", "oversize"),
    (_bad(version=2), "version"),
    (_bad(version=0x0300), "version"),
    (_bad(arch=3), "arch"),
    (_bad(type=2), "type"),
    (_bad(type=0), "type"),
    (_bad(arch_offset=100), "offsets"),
    (_bad(arch_offset=300), "offsets"),
    (_bad(data_offset=5000), "offsets"),
    (_bad(data_offset=400), "offsets"),
    (_bad(packet_count=0, packet_no=0), "packet_count"),
    (_bad(packet_count=proto.MAX_PACKET_COUNT + 1), "packet_count"),
    (_bad(packet_count=0xffffffff), "packet_count"),
    (_bad(packet_count=4, packet_no=4), "packet_no"),
    (_bad(packet_count=4, packet_no=0xffffffff), "packet_no"),
])
def test_bad_packets_are_rejected_with_a_reason(buf: bytes, reason: str):
    with pytest.raises(proto.DecodeError) as err:
        proto.decode(buf)
    assert err.value.reason == reason
    assert reason in proto.REASONS


def test_largest_valid_dump_is_accepted():
    p = proto.decode(_bad(packet_count=proto.MAX_PACKET_COUNT,
                          packet_no=proto.MAX_PACKET_COUNT - 1))
    assert p.packet_count == proto.MAX_PACKET_COUNT == 16384


def test_split_log_newest_chunk_is_packet_0_and_short():
    log = bytes(range(256)) * 10          # 2560 bytes: 1024 + 1024 + 512
    chunks = proto.split_log(log)
    assert [len(c) for c in chunks] == [512, 1024, 1024]
    assert b"".join(reversed(chunks)) == log
    assert proto.split_log(b"") == [b""]
    assert [len(c) for c in proto.split_log(b"x" * 2048)] == [1024, 1024]


def test_encode_dump_send_order_and_numbering():
    pkts = packets("a" * 3000, kernel_version="k")
    decoded = [proto.decode(p) for p in pkts]
    assert [d.packet_no for d in decoded] == [0, 1, 2]
    assert {d.packet_count for d in decoded} == {3}
    assert decoded[0].data.rstrip(b"\0") == b"a" * (3000 - 2048)


def test_vendor_codes():
    assert proto.VENDORS[0] == "Intel" and proto.VENDORS[2] == "AMD"
    assert proto.VENDORS[9] == "Hygon" and proto.VENDORS[0xff] == "unknown"
