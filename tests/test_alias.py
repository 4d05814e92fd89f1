# SPDX-License-Identifier: GPL-2.0
"""Issue 6: /sys/block/<disk>/alias_name, in SCSI messages and uevents.

The guests get one virtio-scsi disk (scsi-hd, so sd drives it) with an MBR
holding two partitions.  alias_basic.sh walks through setting, replacing,
rejecting and clearing aliases; alias_race.sh changes the alias while other
loops provoke messages and read it back.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest

from harness import Disk, Guest

DISK_MB = 64
SECTOR = 512
# (first LBA, number of sectors); the rest of the disk stays unpartitioned.
PARTITIONS = [(2048, 32768), (34816, 65536)]
MAX = "m" * 255


def make_disk(path: Path) -> Path:
    """A sparse disk image with an MBR holding two Linux partitions."""
    with open(path, "wb") as f:
        f.truncate(DISK_MB << 20)
        mbr = bytearray(SECTOR)
        struct.pack_into("<I", mbr, 440, 0x6e746f06)       # disk identifier
        for i, (start, count) in enumerate(PARTITIONS):
            # status, CHS first (unused: LBA addressing), type 0x83 (Linux),
            # CHS last, LBA first, sector count.
            entry = struct.pack("<B3sB3sII", 0, b"\xfe\xff\xff", 0x83,
                                b"\xfe\xff\xff", start, count)
            mbr[446 + 16 * i:446 + 16 * (i + 1)] = entry
        mbr[510:512] = b"\x55\xaa"
        f.seek(0)
        f.write(mbr)
    return path


def run(script: str, tmp: Path, **kw):
    disk = make_disk(tmp / "disk.img")
    return Guest(None, script, disks=[disk], **kw).run()


def run_basic(tmp: Path):
    """alias_basic, growing its disk by 16 MiB when the guest asks."""
    guest = Guest(None, "alias_basic", disks=[make_disk(tmp / "disk.img")],
                  timeout=300, monitor=True).start()
    if guest.wait_for_result("resize_ready", 240):
        guest.hmp(f"block_resize d0 {DISK_MB + 16}M")
    return guest.wait()


def steps(console: str) -> dict[str, str]:
    """The console split at the "alias-test: <step>" lines the guest logs."""
    out: dict[str, str] = {}
    name = "boot"
    buf: list[str] = []
    for line in console.splitlines():
        m = re.search(r"alias-test: (\S+)$", line)
        if m:
            out[name] = "\n".join(buf)
            name, buf = m.group(1), []
        else:
            buf.append(line)
    out[name] = "\n".join(buf)
    return out


def sd_prefixes(text: str) -> set[str]:
    return set(re.findall(r"\bsd \d+:\d+:\d+:\d+: \[([^\]]*)\]", text))


@pytest.fixture(scope="module")
def basic(tmp_path_factory):
    res = run_basic(tmp_path_factory.mktemp("alias_basic"))
    res.assert_ok()
    assert res.values("done") == [""], res.excerpt()
    return res


def events(res) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for v in res.values("ev"):
        phase, _, line = v.partition(" ")
        out.setdefault(phase, [])
        if line != "none":
            out[phase].append(line)
    return out


def test_alias_read_write(basic):
    assert basic.value("disk") == "sda"
    assert basic.value("mode") == "644"
    assert basic.value("owner") == "0:0"
    assert basic.value("initial_bytes") == "0"        # empty read: no alias
    assert basic.value("partition_attr") == "none"    # only on the disk
    assert basic.value("read") == "foo"
    assert basic.value("read_bytes") == "4"           # "foo\n"
    assert basic.value("max_len") == "256"            # 255 + newline
    assert basic.value("read_bar") == "bar"           # written without \n
    assert basic.value("cleared_bytes") == "0"


def test_change_is_logged(basic):
    con = basic.console
    assert len(re.findall(r"\] alias_name: assigned foo to sda$", con,
                          re.M)) == 1, "foo logged once (repeat is no change)"
    assert re.search(r"\] alias_name: assigned %s to sda "
                     r"\(previous alias_name was foo\)$" % MAX, con, re.M)
    assert re.search(r"\] alias_name: assigned bar to sda "
                     r"\(previous alias_name was %s\)$" % MAX, con, re.M)
    assert re.search(r"\] alias_name: cleared from sda "
                     r"\(previous alias_name was bar\)$", con, re.M)
    assert len(re.findall(r"alias_name: cleared", con)) == 1, \
        "clearing an unset alias logs nothing"
    assert re.search(r"\] alias_name: assigned baz to sda$", con, re.M)


def test_uevents_carry_alias(basic):
    ev = events(basic)

    def three(alias: str) -> list[str]:
        return sorted(f"change {d} {alias}" for d in ("sda", "sda1", "sda2"))

    assert sorted(ev["set"]) == three("ALIAS=foo"), ev["set"]
    assert ev["same"] == [], "rewriting the same alias sends no uevent"
    # The capacity change (set_capacity_and_notify) carries it as well.
    assert set(ev["resize"]) == {"change sda ALIAS=foo"}, ev["resize"]
    assert ev["invalid"] == [], "rejected writes send no uevent"
    assert sorted(ev["max"]) == three("ALIAS=" + MAX), ev["max"]
    assert sorted(ev["replace"]) == three("ALIAS=bar"), ev["replace"]
    # Any later uevent of a partition carries the disk's alias too.
    assert ev["synthetic"] == ["change sda1 ALIAS=bar"], ev["synthetic"]
    # Clearing: a change uevent with an empty ALIAS=, once.
    assert sorted(ev["clear"]) == three("ALIAS="), ev["clear"]
    assert ev["clear2"] == []
    assert sorted(ev["baz"]) == three("ALIAS=baz"), ev["baz"]
    # Partitions re-added by BLKRRPART: their add events carry the alias.
    adds = sorted(e for e in ev["rereadpt"] if e.startswith("add "))
    assert adds == ["add sda1 ALIAS=baz", "add sda2 ALIAS=baz"], \
        ev["rereadpt"]
    assert all(e.endswith(" ALIAS=baz") for e in ev["rereadpt"]), \
        ev["rereadpt"]


def test_invalid_names_rejected(basic):
    # expect_errno in the guest required EINVAL for: space, '/', 256
    # characters, non-ASCII, a lone "\n\n", two newlines after a name, NUL,
    # tab; the run passing means each failed that way.
    assert basic.value("after_invalid") == "foo"
    # The non-ASCII write really was one raw Latin-1 byte, not UTF-8.
    assert basic.value("latin1_bytes").split() == ["63", "61", "66", "e9",
                                                   "0a"]


def test_names_of_kernel_form_refused_others_accepted(basic):
    # The guest required EINVAL for sda, sdb, nvme0n1, dm-0, ... (the run
    # passing means each was refused); names that only resemble them work.
    accepted = [v.split() for v in basic.values("accepted")]
    assert accepted and all(a == b for a, b in accepted), accepted
    assert [a for a, _ in accepted] == ["Sdb", "sdb_data", "hdd01", "db01",
                                        "md-data", "nvme-slot1", "disk-sdb",
                                        "loop", "ramdisk"]
    st = steps(basic.console)
    for name in ("invalid", "nonroot"):
        assert "alias_name:" not in st[name], st[name]
    assert "Permission denied" in basic.value("nonroot")
    assert basic.value("nonroot").startswith("65534 ")
    assert basic.value("after_nonroot") == "foo"


def test_sd_messages_show_alias(basic):
    st = steps(basic.console)
    cache = st["cache"]
    assert re.search(r"sd \S+: \[foo\] Write cache: disabled", cache), cache
    assert re.search(r"sd \S+: \[foo\] Write cache: enabled", cache), cache
    # sd_print_sense_hdr() and the SCSI logging of the failed MODE SELECT
    sense = st["sense"]
    assert re.search(r"sd \S+: \[foo\] Sense Key : Illegal Request", sense), \
        sense
    assert re.search(r"sd \S+: \[foo\] Add\. Sense: Invalid field in "
                     r"parameter list", sense), sense
    assert re.search(r"sd \S+: \[foo\] tag#\d+ Done: ", sense), sense
    assert re.search(r"sd \S+: \[foo\] tag#\d+ CDB: Mode Select", sense), sense
    assert re.search(r"sd \S+: \[foo\] tag#\d+ Sense Key : Illegal Request",
                     sense), sense
    # scmd_printk() from sd_done(), in completion context
    scmd = st["scmd"]
    assert re.search(r"sd \S+: \[foo\] tag#\d+ sd_done: completed 4096 of "
                     r"4096 bytes", scmd), scmd
    for name in ("cache", "rescan", "sense", "scmd"):
        assert sd_prefixes(st[name]) == {"foo"}, (name, st[name])
    # The rescan after the host grew the disk: sd reported the new size.
    assert int(basic.value("resized")) == \
        int(basic.value("resize_ready")) + (16 << 11), basic.results
    assert re.search(r"sd \S+: \[foo\] %d 512-byte logical blocks"
                     % int(basic.value("resized")), st["rescan"]), st["rescan"]
    assert basic.value("cache_type") == basic.value("cache_type_after")


def test_longest_alias_keeps_message_text(basic):
    st = steps(basic.console)["max-sd"]
    assert re.search(r"sd \S+: \[%s\] Write cache: disabled, read cache: "
                     r"enabled" % MAX, st), st[-2000:]
    assert re.search(r"sd \S+: \[%s\] tag#\d+ sd_done: completed 4096 of "
                     r"4096 bytes" % MAX, st), st[-2000:]


def test_cleared_alias_prints_kernel_name(basic):
    st = steps(basic.console)["cleared-sd"]
    assert re.search(r"sd \S+: \[sda\] Write cache: disabled", st), st
    assert sd_prefixes(st) == {"sda"}, st


def test_kernel_names_unchanged(basic):
    assert basic.value("proc_partitions").split() == ["sda", "sda1", "sda2"]
    assert basic.value("dev_nodes").split() == ["sda", "sda1", "sda2"]
    assert basic.value("sys_block").split() == ["sda"]
    assert basic.value("sys_class_block").split() == ["sda", "sda1", "sda2"]
    assert basic.value("uevent_file").split() == ["DEVNAME=sda2",
                                                  "ALIAS=baz"]


def test_alias_changes_race_with_messages(tmp_path):
    res = run("alias_race", tmp_path, timeout=600, args={"secs": "25"},
              cmdline="log_buf_len=16M")
    res.assert_ok()
    assert res.value("done") == ""
    assert res.value("errors") == "", res.value("errors")
    writes, reads = int(res.value("writes")), int(res.value("reads"))
    assert writes >= 40 and reads >= 40, (writes, reads)
    assert res.value("bad_reads") == "0"
    assert res.value("torn") == "", "names in messages that were never written"
    seen = {}
    for v in res.values("seen"):
        i, n = v.split()
        seen[int(i)] = int(n)
    # names: a bb_bb ccc-ccc-ccc L*100 dddd M*255 e-e, then sda (cleared)
    assert sum(seen.values()) == int(res.value("sd_msgs"))
    assert int(res.value("sd_msgs")) >= 200, res.value("sd_msgs")
    assert sum(1 for n in seen.values() if n) >= 4, seen
    assert res.value("log_lost") == "0"
    # Messages with the 255-character alias keep their full text: sd_done's
    # scmd_printk, scsi_print_result and scsi_print_command at completion,
    # sd_printk and sd_print_sense_hdr in process context.
    assert int(res.value("max_sd_done")) > 0, res.results
    assert res.value("max_no_text") == "0", res.results
    for key in ("max_sd_done_text", "max_result_text", "max_cdb_text",
                "max_sd_printk", "max_sense"):
        assert int(res.value(key)) > 0, (key, res.results)


BAD_SECTOR = 4096
BLKDEBUG = f"""[inject-error]
event = "read_aio"
errno = "5"
sector = "{BAD_SECTOR}"
once = "off"
"""


@pytest.fixture(scope="module")
def disks(tmp_path_factory):
    """alias_disks: two SCSI disks and an NVMe disk, two of them failing."""
    tmp = tmp_path_factory.mktemp("alias_disks")
    errors = tmp / "blkdebug.conf"
    errors.write_text(BLKDEBUG)
    images = {}
    for name, mb in (("a", 16), ("b", 24), ("nvme", 16)):
        images[name] = tmp / f"{name}.img"
        with open(images[name], "wb") as f:
            f.truncate(mb << 20)
    res = Guest(None, "alias_disks", timeout=600, cmdline="log_buf_len=16M",
                disks=[Disk(images["a"], serial="NTO-A"),
                       Disk(images["b"], serial="NTO-B", errors=errors),
                       Disk(images["nvme"], kind="nvme", errors=errors)]).run()
    res.assert_ok()
    assert res.value("done") == "", res.excerpt()
    return res


def test_two_disks_two_writers(disks):
    assert disks.value("errors") == "", disks.value("errors")
    assert disks.value("crossed") == "", "a disk read back the other's alias"
    assert disks.value("two_a") == "left_last"
    assert disks.value("two_b") == "right_last"
    # Two writers on one disk: the alias is the last value of one of them,
    # and the other disk's alias is untouched.
    assert disks.value("same_disk") in ("up_last", "down_last")
    assert disks.value("same_disk_b") == "right_last"


def test_io_errors_name_the_alias(disks):
    st = steps(disks.console)
    err, plain = st["ioerr"], st["ioerr-plain"]
    _, b, nv = disks.value("disks").split()
    # blk_print_req_error() for both disks, nvme_log_error() for the NVMe.
    assert re.search(r"error, dev bad_scsi, sector %d op 0x0:\(READ\)"
                     % BAD_SECTOR, err), err
    assert re.search(r"error, dev bad_nvme, sector %d op 0x0:\(READ\)"
                     % BAD_SECTOR, err), err
    # (the opcode's name needs CONFIG_NVME_VERBOSE_ERRORS: "I/O Cmd" without)
    assert re.search(r"bad_nvme: [^:]*\(0x2\) @ LBA %d, \d+ blocks"
                     % BAD_SECTOR, err), err
    assert sd_prefixes(err) == {"bad_scsi"}, err
    # Without the alias, the same lines name the kernel name.
    assert re.search(r"error, dev %s, sector %d " % (b, BAD_SECTOR), plain), \
        plain
    assert re.search(r"error, dev %s, sector %d " % (nv, BAD_SECTOR),
                     plain), plain
    assert re.search(r"%s: [^:]*\(0x2\) @ LBA %d" % (nv, BAD_SECTOR),
                     plain), plain
    assert "bad_" not in plain, plain


def test_disk_removal_during_logged_traffic(disks):
    rounds = [v.split() for v in disks.values("round")]
    assert [int(r[0]) for r in rounds] == list(range(1, 21)), rounds
    for i, old, new, alias_bytes, logged, synced in rounds:
        assert alias_bytes == "0", f"round {i}: {new} came back with an alias"
        assert int(logged) > 0, f"round {i}: no command logged as gone_{i}"
        assert int(synced) == 1, f"round {i}: no cache sync as gone_{i}"
    assert disks.value("other_alias") == "stays_b"


def test_udev_rule_with_real_udevd(tmp_path):
    """udev/61-disk-alias.rules under Debian's systemd-udevd (alias_udev)."""
    plain = tmp_path / "plain.img"
    with open(plain, "wb") as f:
        f.truncate(16 << 20)
    res = Guest(None, "alias_udev", initrd="udev", timeout=300,
                disks=[Disk(make_disk(tmp_path / "disk.img"),
                            serial="NTO-UDEV-0"),
                       Disk(plain, serial="NTO-UDEV-1")]).run()
    res.assert_ok()
    assert res.value("done") == "", res.excerpt()
    assert res.value("serial").endswith("NTO-UDEV-0"), res.value("serial")
    d0, d1 = res.value("disks").split()

    def links(name: str) -> list[str]:
        return [f"{name}>{d0}", f"{name}-part1>{d0}1", f"{name}-part2>{d0}2"]

    def got(key: str) -> list[str]:
        """The "alias>target" links the guest listed under key, sorted."""
        return sorted(res.value(key).split())

    # add: the alias from ID_SERIAL, links for the disk and its partitions
    assert res.value("coldplug_alias") == "db_data0"
    assert res.value("coldplug_other") == "0", "the rule named no other disk"
    assert got("coldplug_links") == sorted(links("db_data0"))
    # by hand on a disk no rule names: the links follow a rename and a clear
    assert got("hand_set") == sorted(links('db_data0') + [f"spare_1>{d1}"])
    assert got("hand_rename") == sorted(links('db_data0') + [f"spare_2>{d1}"])
    assert got("hand_clear") == sorted(links("db_data0"))
    # by hand on the named disk: the rule puts its alias back, once
    assert res.value("revert_alias") == "db_data0"
    assert got("revert_links") == sorted(links("db_data0"))
    st = steps(res.console)["revert"]
    assert re.findall(r"alias_name: .*", st) == [
        f"alias_name: assigned handset to {d0} (previous alias_name was "
        "db_data0)",
        f"alias_name: assigned db_data0 to {d0} (previous alias_name was "
        "handset)"], st
    # an edited rule, reloaded and triggered, renames the disk
    assert res.value("edited_alias") == "edited_0"
    assert got("edited_links") == sorted(links("edited_0"))
