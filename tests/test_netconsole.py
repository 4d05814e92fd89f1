# SPDX-License-Identifier: GPL-2.0
"""Our netconsole (modules/netconsole.c on modules/netpoll_targets.c).

Three guests, each booted once by a module-scoped fixture, several tests
reading their results:

* nc_parity: the in-tree 6.1 netconsole.ko, then ours, get the same configfs
  session, the same messages and the same dmesg scenario.  UDP payloads must
  match byte for byte once timestamps and sequence numbers are normalised;
  dmesg lines and configfs contents must match.
* nc_config: parameter targets (extended, basic, IPv6), the configfs life
  cycle, input checking, -EBUSY while enabled, unloading rules.
* nc_events: interface down/rename/delete/re-add under traffic on a veth
  pair, a parameter target whose interface is deleted, and a bounded
  torture run on the debug kernel.
"""

from __future__ import annotations

import os
import re
import subprocess
import time

import pytest

from harness import HOST_MAC, SPLAT, TOP, Netns, flavour, run_guest

# Ports of the parity run: 66<x><y>, x=0 in-tree / 1 ours, y=1 basic / 2 ext
PARITY_PORTS = {("ref", "basic"): 6601, ("ref", "ext"): 6602,
                ("ours", "basic"): 6611, ("ours", "ext"): 6612}
# Ports of the configuration run (see tests/guest/nc_config.sh)
CONFIG_PORTS = {6701: "inet", 6702: "inet", 6703: "inet6", 6704: "inet",
                6705: "inet", 6706: "inet6", 6707: "inet", 6708: "inet",
                6710: "inet"}

# 6.1's veth_xmit() calls __netif_rx() from netpoll's process context with
# interrupts off, and lockdep_assert_once() in __netif_rx() warns once per
# boot.  The in-tree netconsole triggers it just the same; it is the only
# splat the events run tolerates, and only as a whole warning block.
VETH_WARNING = re.compile(
    r"WARNING: CPU: \d+ PID: \d+ at net/core/dev\.c:\d+ __netif_rx")
VETH_ALLOW = [VETH_WARNING.pattern, r"RIP: 0010:__netif_rx", r"RIP: 0033:",
              r"Call Trace:"]


@pytest.fixture(scope="module", autouse=True)
def initramfs():
    """Build the modules and the initramfs the guests boot (a no-op when
    they are up to date)."""
    res = subprocess.run(["make", "-s", "initramfs"], cwd=TOP,
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]


def settle(listeners, done, timeout: float = 10.0) -> None:
    """Wait until every listener saw its last expected datagram."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(any(mark in p for p in l.payloads())
               for l, mark in zip(listeners, done)):
            return
        time.sleep(0.2)


def window(payloads: list[bytes], tag: str) -> list[bytes]:
    """The datagrams from the run's begin marker to its end marker."""
    begin = f"nc-parity {tag} begin".encode()
    end = f"nc-parity {tag} end".encode()
    first = next(i for i, p in enumerate(payloads) if begin in p)
    last = next(i for i, p in enumerate(payloads) if end in p)
    return payloads[first:last + 1]


BASIC_TS = re.compile(rb"(^|\n)\[ *\d+\.\d{6}\] ")
EXT_HDR = re.compile(rb"^(\d+),(\d+),(\d+),")


def normalise_basic(payloads: list[bytes], tag: str) -> list[bytes]:
    out = []
    for p in payloads:
        p = BASIC_TS.sub(rb"\1[TIME] ", p)
        out.append(p.replace(f"nc-parity {tag} ".encode(), b"nc-parity TAG "))
    return out


def normalise_ext(payloads: list[bytes], tag: str) -> list[bytes]:
    """Sequence numbers become relative to the begin marker, timestamps go."""
    base = None
    out = []
    for p in payloads:
        m = EXT_HDR.match(p)
        assert m, p[:80]
        seq = int(m.group(2))
        if base is None:
            base = seq
        p = b"%s,+%d,TIME," % (m.group(1), seq - base) + p[m.end():]
        out.append(p.replace(f"nc-parity {tag} ".encode(), b"nc-parity TAG "))
    return out


def reassemble(payloads: list[bytes]) -> dict[int, bytes]:
    """Extended records by sequence number, ncfrag pieces put together."""
    records: dict[int, bytearray] = {}
    for p in payloads:
        hdr, _, body = p.partition(b";")
        fields = hdr.split(b",")
        seq = int(fields[1])
        frag = [f for f in fields if f.startswith(b"ncfrag=")]
        if not frag:
            records[seq] = bytearray(body)
            continue
        off, total = (int(x) for x in frag[0][7:].split(b"/"))
        rec = records.setdefault(seq, bytearray(total))
        rec[off:off + len(body)] = body
    return {k: bytes(v) for k, v in records.items()}


def escaped(text: bytes) -> bytes:
    """The extended console's escaping of a record's text."""
    return b"".join(bytes([c]) if 32 <= c < 127 and c != 0x5c
                    else b"\\x%02x" % c for c in text)


# --- parity ---------------------------------------------------------------

# On the patched debug kernel the reference is the in-tree netconsole.ko
# built from the same tree; on Debian's stock kernel it is Debian's own
# netconsole.ko from the same linux-image package, which ours replaces.
@pytest.fixture(scope="module", params=[None, "stock"], ids=["patched", "stock"])
def parity(request):
    with Netns() as ns:
        listeners = {k: ns.udp_listener(port)
                     for k, port in PARITY_PORTS.items()}
        res = run_guest("nc_parity", ns, timeout=300, kernel_flavour=request.param,
                        args={"hostmac": HOST_MAC})
        keys = list(listeners)
        settle([listeners[k] for k in keys],
               [f"nc-parity {k[0]} end".encode() for k in keys])
        packets = {k: l.payloads() for k, l in listeners.items()}
    return res, packets


def test_parity_guest_runs_clean(parity):
    res, _ = parity
    res.assert_ok()
    assert res.values("done") == [""]


def test_parity_basic_payloads_match(parity):
    _, packets = parity
    raw = window(packets["ours", "basic"], "ours")
    ref = normalise_basic(window(packets["ref", "basic"], "ref"), "ref")
    ours = normalise_basic(raw, "ours")
    assert ours == ref
    # the content is what was written: raw bytes, multi-line records with a
    # timestamp per line, the 1004-byte line split at 1000 bytes
    assert b"[TIME] nc-parity np \x01\x02\x1b[1m\x7f\x80\xff tab\tend" \
        b" back\\slash\n" in ours
    assert b"[TIME] nc-parity multi first\n[TIME] second line\n[TIME] \n" \
        b"[TIME] fourth\n" in ours
    long = [i for i, p in enumerate(raw) if b"nc-parity long " in p]
    assert len(long) == 1
    assert len(raw[long[0]]) == 1000
    assert raw[long[0] + 1] == b"___\n"
    assert any(p.startswith(b"[TIME] sysrq: HELP : ") for p in ours)
    assert all(len(p) <= 1000 for p in raw)


def test_parity_extended_payloads_match(parity):
    _, packets = parity
    raw = window(packets["ours", "ext"], "ours")
    ref = normalise_ext(window(packets["ref", "ext"], "ref"), "ref")
    ours = normalise_ext(raw, "ours")
    assert ours == ref
    # the long record and the big one go out in pieces; every piece but
    # the last of a record fills the 1000 bytes
    pieces: dict[bytes, list[bytes]] = {}
    for p in raw:
        hdr = p.partition(b";")[0]
        if b",ncfrag=" in hdr:
            pieces.setdefault(hdr.split(b",")[1], []).append(p)
    assert [len(v) for v in pieces.values()] == [2, 4]
    for frags in pieces.values():
        assert all(len(p) == 1000 for p in frags[:-1])
    assert all(len(p) <= 1000 for p in raw)


def test_parity_extended_fragments_reassemble(parity):
    _, packets = parity
    records = reassemble(window(packets["ours", "ext"], "ours"))
    big = [r for r in records.values() if r.startswith(b"nc-parity bin ")]
    assert len(big) == 1
    unit = bytes(list(range(1, 10)) + list(range(11, 32))
                 + [0x7f, 0x80, 0x81, 0xfe, 0xff, 0x5c, 0x3b])
    assert big[0] == escaped(b"nc-parity bin " + unit * 20) + b"\n"
    assert len(big[0]) > 2900
    multi = [r for r in records.values() if r.startswith(b"nc-parity multi")]
    assert multi == [b"nc-parity multi first\\x0asecond line\\x0a\\x0afourth\n"]


def test_parity_dmesg_lines_match(parity):
    res, _ = parity
    ref, ours = res.values("dmesg_ref"), res.values("dmesg_ours")
    assert ref, "no netconsole lines in the in-tree run"
    assert ours == ref
    for line in ("netconsole: network logging started",
                 "netconsole: network logging has already started",
                 "netconsole: target (d) is enabled, disable to update parameters",
                 "netconsole: invalid IPv6 address at: < >",
                 "netpoll: netconsole: nosuch0 doesn't exist, aborting",
                 "printk: console [netcon_ext0] enabled",
                 "netconsole: network logging stopped on interface eth0 as it"
                 " unregistered"):
        assert line in ours


def test_parity_configfs_matches(parity):
    res, _ = parity
    for phase in ("new", "on", "off"):
        ref = res.values(f"cfg_{phase}_ref")
        assert len(ref) == 9, ref
        # and upstream's later attributes, and resume, off
        ours = res.values(f"cfg_{phase}_ours")
        later = ("release=0", "userdata=", "resume=0")
        assert all(v in ours for v in later), ours
        assert [v for v in ours if v not in later] == ref
    ref = dict(v.split(" ", 1) for v in res.values("rc_ref"))
    ours = dict(v.split(" ", 1) for v in res.values("rc_ours"))
    # 6.1 says -EINVAL for a change while enabled; the series says -EBUSY
    assert ref.pop("port_enabled") == "Invalid argument"
    assert ours.pop("port_enabled") == "Device or resource busy"
    assert ours == ref
    assert ours["enable_again"] == "Invalid argument"
    assert ours["enable_nodev"] == "No such device"
    assert ours["rmmod_busy"] == "Resource temporarily unavailable"


# --- configuration ------------------------------------------------------

@pytest.fixture(scope="module", params=[None, "stock"], ids=["patched", "stock"])
def config(request):
    with Netns() as ns:
        listeners = {port: ns.udp_listener(port, fam)
                     for port, fam in CONFIG_PORTS.items()}
        res = run_guest("nc_config", ns, timeout=300, kernel_flavour=request.param,
                        args={"hostmac": HOST_MAC})
        settle([listeners[p] for p in (6701, 6702, 6703)],
               [b"nc-cfg after rmdir"] * 3)
        packets = {p: l.payloads() for p, l in listeners.items()}
    return res, packets


def texts(payloads: list[bytes]) -> list[bytes]:
    """The message part: after '] ' (basic) or ';' (extended)."""
    out = []
    for p in payloads:
        if p.startswith(b"["):
            out.append(p.partition(b"] ")[2].rstrip(b"\n"))
        else:
            out.append(p.partition(b";")[2].rstrip(b"\n"))
    return out


def test_config_guest_passes(config):
    res, _ = config
    res.assert_ok()
    assert res.values("done") == [""]
    assert res.values("refused") == ["rmmod_netpoll_targets"]
    assert res.values("busy_ok") == ["all"]
    checked = set(res.values("bad_ok"))
    assert checked == {f"v/{a}" for a in (
        "local_port", "remote_port", "local_ip", "remote_ip", "remote_mac",
        "enabled", "extended", "dev_name")} | {"r/release", "u/userdata/cpu_nr"}
    assert res.value("sysdata_defaults").split() == [
        "cpu_nr=0", "taskname_enabled=0", "release_enabled=0", "msgid_enabled=0"]
    assert res.value("defaults").split() == [
        "enabled=0", "extended=0", "release=0", "dev_name=eth0", "local_port=6665",
        "remote_port=6666", "local_ip=0.0.0.0", "remote_ip=0.0.0.0",
        "local_mac=ff:ff:ff:ff:ff:ff", "remote_mac=ff:ff:ff:ff:ff:ff"]


def test_config_parameter_targets(config):
    _, packets = config
    ext, basic, ipv6 = packets[6701], packets[6702], packets[6703]
    # the log so far is replayed (CON_PRINTBUFFER), then new messages
    assert any(b"Linux version" in p for p in basic)
    assert any(b"Linux version" in p for p in ext)
    assert b"nc-cfg param hello" in texts(basic)
    assert b"nc-cfg param hello" in texts(ipv6)
    hello = [p for p in ext if p.endswith(b";nc-cfg param hello\n")]
    assert len(hello) == 1 and re.match(rb"^12,\d+,\d+,-;", hello[0])


def test_config_lifecycle_packets(config):
    _, packets = config
    before, after, v6 = (texts(packets[p]) for p in (6704, 6705, 6706))
    assert b"nc-cfg t one" in before
    assert b"nc-cfg t two" not in before
    assert b"nc-cfg t two" in after and b"nc-cfg t6 hello" in after
    for port in (6704, 6705, 6706):
        got = texts(packets[port])
        assert b"nc-cfg t off" not in got
        assert b"nc-cfg after rmdir" not in got
        assert b"nc-cfg param hello" not in got
    assert v6 == [b"nc-cfg t6 hello"]
    assert packets[6706][0].startswith(b"12,")


def test_config_unload(config):
    _, packets = config
    for port in (6701, 6702, 6703):
        got = texts(packets[port])
        assert b"nc-cfg after rmdir" in got
        assert b"nc-cfg unloaded" not in got


def test_config_oops_only(config):
    _, packets = config
    for port in CONFIG_PORTS:
        assert b"nc-cfg oops only" not in texts(packets[port])
    assert b"nc-cfg t6 hello" in texts(packets[6701])


def test_config_release_flag(config):
    """Upstream's release flag (6.6): "<release>," in front of each extended
    record, fragments included, from configfs and from the 'r' of a
    parameter target; off, the records are 6.1's."""
    res, packets = config
    rel = re.escape(res.value("release").encode())
    param, conf = packets[6708], packets[6707]
    assert param and conf
    assert all(re.match(rel + rb",\d+,\d+,\d+,", p) for p in param + conf), param + conf
    hello = [p for p in param if p.endswith(b";nc-cfg param hello\n")]
    assert len(hello) == 1 and re.match(rel + rb",12,\d+,\d+,-;", hello[0]), hello
    assert [p for p in conf if p.endswith(b";nc-cfg release hello\n")]
    # a long record: two pieces, each with the release, the header and
    # ncfrag, that reassemble
    frags = [re.match(rel + rb",12,(\d+),\d+,-,ncfrag=(\d+)/(\d+);(.*)", p, re.S)
             for p in conf if b"ncfrag=" in p]
    assert len(frags) == 2 and all(frags), conf
    assert frags[0].group(1) == frags[1].group(1) and frags[0].group(2) == b"0"
    body = frags[0].group(4) + frags[1].group(4)
    assert int(frags[1].group(2)) == len(frags[0].group(4))
    assert int(frags[0].group(3)) == len(body)
    assert body.rstrip(b"\n") == b"nc-cfg release long " + b"r" * 960
    assert all(len(p) <= 1000 for p in conf)
    # without the flag: no release (the extended parameter target)
    assert not any(re.match(rel + rb",", p) for p in packets[6701])


def test_config_userdata_and_sysdata(config):
    """Upstream's userdata (6.9) and sysdata (6.15, msgid 6.17): " key=value"
    lines after each extended record, editable while the target is enabled,
    in ncfrag pieces with a long record; its limits (a 53-byte key, 199
    bytes of value, 256 keys)."""
    res, packets = config
    rel = res.value("release")
    got = packets[6710]

    def record(text: bytes) -> bytes:
        """What follows the header of the one record with this text."""
        found = [p.partition(b";")[2] for p in got if b";" + text + b"\n" in p]
        assert len(found) == 1, (text, got)
        return found[0]

    ud = b" rack=7\n role=web server\n"
    assert record(b"nc-cfg ud none") == b"nc-cfg ud none\n"
    assert record(b"nc-cfg ud two") == b"nc-cfg ud two\n" + ud
    sysdata = re.compile(rb" cpu=(\d+)\n taskname=(.+)\n release=(.+)\n msgid=(\d+)\n")
    one = sysdata.fullmatch(record(b"nc-cfg sysdata one"), len(b"nc-cfg sysdata one\n" + ud))
    two = sysdata.fullmatch(record(b"nc-cfg sysdata two"), len(b"nc-cfg sysdata two\n" + ud))
    assert one and two, got
    assert record(b"nc-cfg sysdata one").startswith(b"nc-cfg sysdata one\n" + ud)
    # The CPU and task that flush the console: the writer's (taskset 2:
    # CPU 1, sh) unless another CPU held the console lock, as upstream.
    for m in (one, two):
        assert m.group(1) in (b"0", b"1") and m.group(2) and m.group(3) == rel.encode()
    assert int(two.group(4)) == int(one.group(4)) + 1
    # the long record: header, ncfrag, and a body that is text + userdata + sysdata
    frags = [re.match(rb"12,(\d+),\d+,-,ncfrag=(\d+)/(\d+);(.*)", p, re.S)
             for p in got if b"ncfrag=" in p]
    assert len(frags) == 2 and all(frags), got
    body = frags[0].group(4) + frags[1].group(4)
    assert int(frags[0].group(3)) == len(body) and int(frags[1].group(2)) == len(frags[0].group(4))
    text = b"nc-cfg ud long " + b"u" * 900 + b"\n"
    assert body.startswith(text + ud), body[-200:]
    assert sysdata.fullmatch(body, len(text + ud))
    assert all(len(p) <= 1000 for p in got)
    k53, v199 = b"k" * 53, b"v" * 199
    assert record(b"nc-cfg ud limits") == \
        b"nc-cfg ud limits\n" + ud + b" " + k53 + b"=" + v199 + b"\n release=" + rel.encode() + b"\n"
    assert record(b"nc-cfg ud after rmdir") == \
        b"nc-cfg ud after rmdir\n rack=7\n release=" + rel.encode() + b"\n"
    assert record(b"nc-cfg ud off") == b"nc-cfg ud off\n"
    # the other extended targets carry none of it
    assert not any(b" rack=7\n" in p for p in packets[6701] + packets[6707])


# --- interface events and torture ------------------------------------------

def foreign_splats(console: str) -> list[str]:
    """Splat lines outside the tolerated veth warning blocks."""
    out = []
    in_block = False
    for line in console.splitlines():
        if VETH_WARNING.search(line):
            in_block = True
            continue
        if in_block:
            if "---[ end trace" in line:
                in_block = False
            continue
        if SPLAT.search(line):
            out.append(line)
    return out


@pytest.fixture(scope="module")
def events():
    args = {"hostmac": HOST_MAC}
    for key in ("iters", "budget"):
        if os.environ.get(f"NC_TORTURE_{key.upper()}"):
            args[key] = os.environ[f"NC_TORTURE_{key.upper()}"]
    with Netns() as ns:
        return run_guest("nc_events", ns, timeout=420, args=args,
                         allow=VETH_ALLOW)


def test_events_interface_changes(events):
    assert events.status == "pass", events.excerpt()
    assert events.values("flowing") == ["first", "renamed", "readded"]
    assert events.values("deleted") == ["ok"]
    assert events.values("param_deleted") == ["ok"]
    # the opt-in: targets with resume come back with their interface
    assert events.values("resumed") == ["ok"]
    assert events.values("param_resumed") == ["ok"]


def test_torture_is_clean(events):
    events.assert_ok()
    assert events.values("done") == [""]
    assert foreign_splats(events.console) == []
    counts = dict(kv.split("=") for kv in events.value("torture").split())
    print("torture iterations:", counts)
    if flavour() == "debug":
        # lockdep was still validating at the end
        assert events.values("lockdep") == ["1"]
    # bounded by iterations and by time; a loaded host gets fewer done
    assert int(counts["toggle"]) >= 20, counts
    assert int(counts["churn"]) >= 10, counts
    assert int(counts["flap"]) >= 10, counts
    assert int(counts["msgs"]) >= 100, counts
