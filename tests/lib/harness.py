# SPDX-License-Identifier: GPL-2.0
"""QEMU guests in a private network namespace, for the netoops tests.

A test creates a :class:`Netns` (a uniquely named namespace holding a bridge
``ntobr0`` with 192.0.2.1/24 and 2001:db8::1/64), starts listeners in it with
:meth:`Netns.udp_listener`, and boots one or more :class:`Guest` s attached to
taps on that bridge.  Guest i gets 192.0.2.(2+i) and 2001:db8::(2+i).

The guest's /init runs ``/tests/<script>.sh`` (from tests/guest/) and reports
on a second serial port, separate from the console: ``NTO-BOOTED``, the lines
the script writes with ``result``, and ``NTO-EXIT <rc>``.  A run therefore ends
in one of: ``pass`` (exit 0), ``fail`` (exit != 0), ``crash`` (the kernel died:
no NTO-EXIT, QEMU exited), ``hang`` (the outer timeout fired).

Every console is scanned for splats (lockdep, KASAN, BUG:, WARNING:, oops,
panic); a splat line that the test did not allow fails the run, and the
failure message carries the console excerpt.

Everything the run creates (namespace, bridge, taps, processes) is removed on
exit by name or PID, also after a failure or a timeout.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

TOP = Path(__file__).resolve().parents[2]
PYTHON = os.environ.get("PYTHON", "/usr/bin/python3")
HOST_IP = "192.0.2.1"
HOST_IP6 = "2001:db8::1"
HOST_MAC = "02:6e:74:6f:00:01"
BRIDGE = "ntobr0"
# The guest's NIC (eth0), by the name the tests use: virtio-net frees sent
# skbs in its transmit routine; e1000 and e1000e (as most real NICs) only in
# their NAPI poll.
NICS = {"virtio": "virtio-net-pci", "e1000": "e1000", "e1000e": "e1000e"}
# Multi-queue NICs, for the busy-machine tests: virtio-net with two queue
# pairs (one per CPU), and VMware's vmxnet3 (one queue per CPU, transmit
# completions in NAPI).
MQ_NICS = {"virtio-mq": "virtio-net-pci,mq=on,vectors=6", "vmxnet3": "vmxnet3"}
_ALL_NICS = {**NICS, **MQ_NICS}
# what the tap backend of a NIC needs
_NETDEV_OPTS = {"virtio-mq": ",queues=2"}


@dataclass
class Disk:
    """A guest disk: a raw image on a SCSI disk, CD-ROM or NVMe controller.

    ``errors`` names a QEMU blkdebug config file that injects I/O errors
    between the device and the image; a CD-ROM without ``path`` is empty.
    """

    path: Path | None
    kind: str = "scsi-hd"           # scsi-hd, scsi-cd or nvme
    serial: str = ""
    errors: Path | None = None

    def argv(self, i: int) -> list[str]:
        drive = [f"if=none,id=d{i}"]
        if self.path is not None:
            image = f"blkdebug:{self.errors}:{self.path}" if self.errors \
                else str(self.path)
            drive.append(f"format=raw,file={image}")
        if self.kind == "scsi-cd":
            drive.append("media=cdrom")
        dev = {"scsi-hd": f"scsi-hd,drive=d{i},bus=scsi0.0",
               "scsi-cd": f"scsi-cd,drive=d{i},bus=scsi0.0",
               "nvme": f"nvme,drive=d{i}"}[self.kind]
        if self.serial:
            dev += f",serial={self.serial}"
        elif self.kind == "nvme":
            dev += f",serial=nto-nvme-{i}"
        return ["-drive", ",".join(drive), "-device", dev]

_counter = itertools.count()


def cache_dir() -> Path:
    """The build cache, as the Makefile computes it."""
    env = os.environ.get("CACHE")
    if env:
        return Path(env).resolve()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(
        os.path.expanduser("~"), ".cache")
    return (Path(base) / "netoops").resolve()


def flavour() -> str:
    return os.environ.get("FLAVOUR", "debug")


def _run(argv: Sequence[str], check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), check=check, capture_output=True, text=True)


# Console lines that mean something went wrong in the kernel.
SPLAT = re.compile(
    r"BUG:|WARNING:|Oops|general protection fault|Kernel panic|kernel BUG at"
    r"|KASAN|UBSAN|possible circular locking|possible recursive locking"
    r"|inconsistent lock state|INFO: possible|suspicious RCU usage"
    r"|sleeping function called from invalid context"
    r"|Call Trace:|INFO: task .* blocked|soft lockup|hard LOCKUP"
    r"|stack segment|invalid opcode|Unable to handle")

# Lines a sysrq-c panic prints that a crash test allows.
ALLOW_SYSRQ_PANIC = [
    r"Kernel panic - not syncing: sysrq triggered crash",
    r"Call Trace:", r"---\[ end Kernel panic",
]


@dataclass
class GuestResult:
    name: str
    status: str                      # pass, fail, crash, hang
    exit_code: int | None
    console: str
    results: list[str]
    splats: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    duration: float = 0.0

    def values(self, key: str) -> list[str]:
        """Values of the result lines ``key value`` the script wrote."""
        out = []
        for line in self.results:
            k, _, v = line.partition(" ")
            if k == key:
                out.append(v)
        return out

    def value(self, key: str) -> str:
        vals = self.values(key)
        if len(vals) != 1:
            raise AssertionError(f"{self.name}: expected one '{key}' result, "
                                 f"got {vals!r}\n{self.excerpt()}")
        return vals[0]

    def excerpt(self, lines: int = 60) -> str:
        con = self.console.splitlines()
        first = None
        for i, line in enumerate(con):
            if line in self.splats or (self.splats and self.splats[0] in line):
                first = i
                break
        if first is not None:
            chunk = con[max(0, first - 10):first + lines]
        else:
            chunk = con[-lines:]
        return (f"--- {self.name}: status={self.status} exit={self.exit_code} "
                f"results={self.results[-10:]!r}\n--- console excerpt:\n"
                + "\n".join(chunk))

    def ok(self) -> bool:
        return self.status == "pass" and not self.splats and not self.missing

    def assert_ok(self) -> None:
        if not self.ok():
            why = []
            if self.status != "pass":
                why.append(f"status {self.status}")
            if self.splats:
                why.append(f"unexpected splat: {self.splats[0]!r}")
            if self.missing:
                why.append(f"missing on console: {self.missing!r}")
            raise AssertionError(f"guest {self.name} failed ({'; '.join(why)})\n"
                                 + self.excerpt())

    def assert_crashed(self) -> None:
        """The kernel died as the test intended, with no other splat."""
        if self.status != "crash" or self.splats or self.missing:
            raise AssertionError(
                f"guest {self.name}: expected a clean intended crash, got status "
                f"{self.status}, splats {self.splats[:3]!r}, missing "
                f"{self.missing!r}\n" + self.excerpt())


def scan_console(console: str, allow: Iterable[str] = (),
                 require: Iterable[str] = ()) -> tuple[list[str], list[str]]:
    """Return (unexpected splat lines, required patterns not seen)."""
    allow_re = [re.compile(a) for a in allow]
    splats = []
    for line in console.splitlines():
        if SPLAT.search(line) and not any(a.search(line) for a in allow_re):
            splats.append(line)
    missing = [r for r in require if not re.search(r, console)]
    return splats, missing


class Listener:
    """A UDP sink inside the namespace; datagrams are recorded to a file."""

    def __init__(self, ns: "Netns", port: int, family: str, path: Path,
                 vlan: int | None = None):
        self.port = port
        self.path = path
        argv = ["ip", "netns", "exec", ns.name, PYTHON,
                str(TOP / "tests" / "lib" / "udp_sink.py"),
                "--port", str(port), "--family", family, "--out", str(path)]
        if vlan is not None:     # IPv4 frames of that VLAN off the bridge
            argv += ["--vlan", str(vlan), "--ifname", BRIDGE]
        self.proc = ns.spawn(argv, stdout=subprocess.PIPE)
        line = self.proc.stdout.readline().decode()
        if not line.startswith("ready"):
            raise RuntimeError(f"udp sink on {port} did not start: {line!r}")

    def packets(self) -> list[tuple[str, bytes]]:
        out = []
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return out
        for line in text.splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue        # a line being written right now
            out.append((rec["src"], bytes.fromhex(rec["data"])))
        return out

    def payloads(self) -> list[bytes]:
        return [p for _, p in self.packets()]

    def wait(self, count: int, timeout: float) -> list[tuple[str, bytes]]:
        """Poll until at least ``count`` datagrams arrived or time runs out."""
        deadline = time.monotonic() + timeout
        while True:
            pkts = self.packets()
            if len(pkts) >= count or time.monotonic() > deadline:
                return pkts
            time.sleep(0.1)


class Netns:
    """A network namespace owned by one test run, with a bridge for guests."""

    def __init__(self, prefix: str = "nto"):
        self.name = f"{prefix}{os.getpid()}x{next(_counter)}"
        self.tmp = Path(tempfile.mkdtemp(prefix=self.name + "-"))
        self.procs: list[subprocess.Popen] = []
        self.taps: list[str] = []
        self._created = False

    def __enter__(self) -> "Netns":
        try:
            _run(["ip", "netns", "add", self.name])
            self._created = True
            self.ip("link", "set", "lo", "up")
            self.ip("link", "add", BRIDGE, "type", "bridge")
            self.ip("link", "set", BRIDGE, "address", HOST_MAC)
            self.ip("addr", "add", f"{HOST_IP}/24", "dev", BRIDGE)
            self.ip("-6", "addr", "add", f"{HOST_IP6}/64", "dev", BRIDGE, "nodad")
            self.ip("link", "set", BRIDGE, "up")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def ip(self, *args: str) -> str:
        return _run(["ip", "-n", self.name, *args]).stdout

    def add_tap(self, multi_queue: bool = False) -> str:
        tap = f"ntotap{len(self.taps)}"
        self.ip("tuntap", "add", "dev", tap, "mode", "tap",
                *(["multi_queue"] if multi_queue else []))
        self.taps.append(tap)
        self.ip("link", "set", tap, "master", BRIDGE)
        self.ip("link", "set", tap, "up")
        return tap

    def spawn(self, argv: Sequence[str], **kw) -> subprocess.Popen:
        """Start a process (in its own process group) that close() will end."""
        proc = subprocess.Popen(list(argv), start_new_session=True, **kw)
        self.procs.append(proc)
        return proc

    def udp_listener(self, port: int, family: str = "inet",
                     vlan: int | None = None) -> Listener:
        return Listener(self, port, family,
                        self.tmp / f"udp-{family}-{port}-{len(self.procs)}.jsonl",
                        vlan=vlan)

    def kill(self, proc: subprocess.Popen) -> None:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
        for stream in (proc.stdout, proc.stderr, proc.stdin):
            if stream:
                stream.close()

    def close(self) -> None:
        for proc in self.procs:
            self.kill(proc)
        self.procs.clear()
        if self._created:
            for tap in self.taps:
                _run(["ip", "-n", self.name, "link", "del", tap], check=False)
            _run(["ip", "-n", self.name, "link", "del", BRIDGE], check=False)
            _run(["ip", "netns", "del", self.name], check=False)
            self._created = False
        if os.environ.get("NTO_KEEP_TMP") is None:
            shutil.rmtree(self.tmp, ignore_errors=True)


class Guest:
    """One QEMU guest booting the patched kernel and running a guest script."""

    def __init__(self, ns: Netns | None, script: str, *, index: int = 0,
                 args: dict[str, str] | None = None, timeout: float = 180,
                 allow: Iterable[str] = (), require: Iterable[str] = (),
                 kernel_flavour: str | None = None, smp: int = 2,
                 memory: str = "1G", cmdline: str = "",
                 disks: Sequence[Path | Disk] = (), monitor: bool = False,
                 nic: str = "virtio", nic2: str = "", initrd: str = "",
                 console_input: bool = False):
        for n in (nic, nic2 or nic):
            if n not in _ALL_NICS:
                raise ValueError(f"unknown NIC {n!r}: one of {sorted(_ALL_NICS)}")
        self.ns = ns
        self.nic = nic
        # a second NIC (eth1) on the same bridge, at self.ip2, if given
        self.nic2 = nic2
        # "kdump": the initramfs with kexec and a capture kernel (mkinitramfs.sh)
        self.initrd = initrd
        self.script = script
        self.index = index
        self.args = dict(args or {})
        self.timeout = timeout
        self.allow = list(allow)
        self.require = list(require)
        self.flavour = kernel_flavour or flavour()
        self.smp = smp
        self.memory = memory
        self.cmdline = cmdline
        self.disks = [d if isinstance(d, Disk) else Disk(d) for d in disks]
        for d in self.disks:
            if d.kind not in ("scsi-hd", "scsi-cd", "nvme"):
                raise ValueError(f"unknown disk kind {d.kind!r}")
        self.name = f"{script}#{index}"
        self.ip = f"192.0.2.{2 + index}"
        self.ip6 = f"2001:db8::{2 + index}"
        self.mac = f"52:54:00:6e:74:{2 + index:02x}"
        self.ip2 = f"192.0.2.{130 + index}"
        self.mac2 = f"52:54:00:6e:74:{130 + index:02x}"
        self.proc: subprocess.Popen | None = None
        base = ns.tmp if ns else Path(tempfile.mkdtemp(prefix="nto-guest-"))
        # A guest without a namespace owns its directory: removed once it is
        # done (the result holds the console), unless NTO_KEEP_TMP is set.
        self._own_tmp = None if ns else base
        self.monitor_path = base / f"{script}-{index}.monitor" if monitor else None
        self.console_path = base / f"{script}-{index}.console"
        # console_input: the console (ttyS0) is also a telnet socket, so that
        # serial_break() can send a break, QEMU logging its output as before
        self.console_sock = (base / f"{script}-{index}.console.sock"
                             if console_input else None)
        self.result_path = base / f"{script}-{index}.result"
        self.started = 0.0
        self.retried = False

    def argv(self) -> list[str]:
        cache = cache_dir()
        if self.flavour == "stock":     # Debian's own kernel: qemu/stock.sh
            kernel = cache / "stock" / "kernel"
        else:
            kernel = cache / "out" / self.flavour / "arch/x86/boot/bzImage"
        initrd = cache / (f"initramfs-{self.flavour}-{self.initrd}.cpio" if self.initrd
                          else f"initramfs-{self.flavour}.cpio")
        for f in (kernel, initrd):
            if not f.exists():
                raise FileNotFoundError(f"{f} missing: run `make initramfs "
                                        f"FLAVOUR={self.flavour}` (or `make "
                                        f"stock`) first")
        # idle=halt: TCG's "max" CPU is an AMD family 0xf part, for which
        # the kernel picks the erratum-400 (C1E) idle routine; under TCG it
        # stalled early boot now and then.
        params = ["console=ttyS0", "panic=1", "loglevel=7", "idle=halt",
                  "net.ifnames=0", f"nto.test={self.script}"]
        if self.ns:
            params.append(f"nto.ip={self.ip}")
            if self.nic2:
                params.append(f"nto.ip2={self.ip2}")
        params += [f"nto.{k}={v}" for k, v in self.args.items()]
        if self.cmdline:
            params.append(self.cmdline)
        argv = self.qemu_argv(kernel, initrd, params)
        if any(d.kind.startswith("scsi-") for d in self.disks):
            argv += ["-device", "virtio-scsi-pci,id=scsi0"]
        for i, disk in enumerate(self.disks):
            argv += disk.argv(i)
        return argv

    def qemu_argv(self, kernel: Path, initrd: Path, params: Sequence[str],
                  nic_addr: str = "") -> list[str]:
        """QEMU booting ``kernel``: console and result ports, the monitor if
        asked for, the NIC on a tap of the namespace (at PCI slot
        ``nic_addr`` if given)."""
        argv = ["qemu-system-x86_64", "-machine", "q35", "-accel", "tcg",
                "-cpu", "max", "-smp", str(self.smp), "-m", self.memory,
                "-nodefaults", "-nographic", "-no-reboot",
                "-kernel", str(kernel), "-initrd", str(initrd),
                "-append", " ".join(params),
                *self._console_argv(),
                "-serial", f"file:{self.result_path}"]
        if self.monitor_path:
            argv += ["-monitor", f"unix:{self.monitor_path},server=on,wait=off"]
        if self.ns:
            tap = self.ns.add_tap(multi_queue=self.nic in _NETDEV_OPTS)
            addr = f",addr={nic_addr}" if nic_addr else ""
            argv += ["-netdev", f"tap,id=n0,ifname={tap},script=no,downscript=no"
                     f"{_NETDEV_OPTS.get(self.nic, '')}",
                     "-device", f"{_ALL_NICS[self.nic]},netdev=n0,mac={self.mac}{addr}"]
            if self.nic2:
                tap = self.ns.add_tap(multi_queue=self.nic2 in _NETDEV_OPTS)
                argv += ["-netdev", f"tap,id=n1,ifname={tap},script=no,downscript=no"
                         f"{_NETDEV_OPTS.get(self.nic2, '')}",
                         "-device", f"{_ALL_NICS[self.nic2]},netdev=n1,mac={self.mac2}"]
        return argv

    def _console_argv(self) -> list[str]:
        if not self.console_sock:
            return ["-serial", f"file:{self.console_path}"]
        return ["-chardev", f"socket,id=con0,path={self.console_sock},server=on,"
                f"wait=off,telnet=on,logfile={self.console_path},logappend=on",
                "-serial", "chardev:con0"]

    def serial_break(self, then: bytes) -> None:
        """A break on the console's serial line (telnet's IAC BRK, which
        QEMU turns into one), then the bytes ``then``: with the kernel's
        MAGIC_SYSRQ_SERIAL, b"y" after a break is sysrq y, handled in the
        UART's interrupt handler."""
        if not self.console_sock:
            raise RuntimeError(f"{self.name} was started without console_input=True")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(10)
            sock.connect(str(self.console_sock))
            sock.sendall(b"\xff\xf3")
            time.sleep(0.2)
            sock.sendall(then)
            time.sleep(0.2)

    def start(self) -> "Guest":
        self.console_path.parent.mkdir(parents=True, exist_ok=True)
        argv = self.argv()
        if self.ns:
            argv = ["ip", "netns", "exec", self.ns.name] + argv
        self.started = time.monotonic()
        spawn = self.ns.spawn if self.ns else (
            lambda a, **kw: subprocess.Popen(a, start_new_session=True, **kw))
        self.proc = spawn(argv, stdin=subprocess.DEVNULL,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        return self

    def results_so_far(self) -> list[str]:
        try:
            raw = self.result_path.read_bytes().decode(errors="replace")
        except FileNotFoundError:
            return []
        return [l.rstrip("\r") for l in raw.split("\n") if l.strip()]

    def wait_for_result(self, key: str, timeout: float) -> str | None:
        """Poll the result port for a line ``key ...`` while the guest runs."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.results_so_far():
                if line == key or line.startswith(key + " "):
                    return line
            if self.proc and self.proc.poll() is not None:
                return None
            time.sleep(0.1)
        return None

    def hmp(self, command: str, timeout: float = 10) -> str:
        """Run a QEMU human-monitor command (``nmi``, ...); its output."""
        if not self.monitor_path:
            raise RuntimeError(f"{self.name} was started without monitor=True")
        out = b""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(str(self.monitor_path))
            out += sock.recv(4096)                 # the banner and prompt
            sock.sendall(command.encode() + b"\n")
            deadline = time.monotonic() + timeout
            while out.count(b"(qemu)") < 2 and time.monotonic() < deadline:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                out += chunk
        return out.decode(errors="replace")

    def wait(self) -> GuestResult:
        assert self.proc is not None, "guest not started"
        remaining = self.timeout - (time.monotonic() - self.started)
        timed_out = False
        try:
            self.proc.wait(timeout=max(remaining, 0))
        except subprocess.TimeoutExpired:
            timed_out = True
            if self.ns:
                self.ns.kill(self.proc)
            else:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        stderr = self.proc.stderr.read().decode(errors="replace") \
            if self.proc.stderr and not self.proc.stderr.closed else ""
        try:
            console = self.console_path.read_bytes().decode(errors="replace")
        except FileNotFoundError:
            console = ""
        console = console.replace("\r", "")
        if stderr.strip():
            console += "\n--- qemu stderr:\n" + stderr
        results = self.results_so_far()
        exit_code = None
        body = []
        for line in results:
            if line.startswith("NTO-EXIT "):
                exit_code = int(line.split()[1])
            elif line != "NTO-BOOTED":
                body.append(line)
        if timed_out:
            status = "hang"
        elif exit_code is None:
            status = "crash"
        elif exit_code == 0:
            status = "pass"
        else:
            status = "fail"
        splats, missing = scan_console(console, self.allow, self.require)
        booted = "NTO-BOOTED" in results
        if not booted and status in ("crash", "hang") and not self.retried:
            # Died or stalled before /init ran: under TCG the kernel's early
            # boot (IO-APIC set-up, timer calibration) fails now and then on
            # a loaded host, with nothing of the test involved yet.  Boot it
            # once more, and say so.
            self.retried = True
            first = console.splitlines()[-3:]
            sys.stderr.write(f"harness: {self.name} {status} before /init; booting it "
                             f"once more (last console lines: {first!r})\n")
            return self.start().wait()
        if self._own_tmp is not None and os.environ.get("NTO_KEEP_TMP") is None:
            shutil.rmtree(self._own_tmp, ignore_errors=True)
        return GuestResult(self.name, status, exit_code, console, body,
                           splats, missing, time.monotonic() - self.started)

    def run(self) -> GuestResult:
        return self.start().wait()


def run_guest(script: str, ns: Netns | None = None, **kw) -> GuestResult:
    return Guest(ns, script, **kw).run()


def run_guests(guests: Sequence[Guest]) -> list[GuestResult]:
    """Boot several guests at once and wait for all of them."""
    for g in guests:
        g.start()
    return [g.wait() for g in guests]


def leftovers(prefix: str = "nto") -> dict[str, list[str]]:
    """Namespaces and host links with our prefixes that still exist."""
    ns = [l.split()[0] for l in _run(["ip", "netns", "list"]).stdout.splitlines()
          if l.startswith(prefix)]
    links = [l for l in _run(["ip", "-o", "link"]).stdout.splitlines()
             if re.search(r": nto(br|tap)", l)]
    return {"netns": ns, "links": links}


if __name__ == "__main__":  # pragma: no cover - manual use
    print(json.dumps(leftovers(), indent=2))
    sys.exit(0)
