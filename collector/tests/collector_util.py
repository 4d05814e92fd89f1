# SPDX-License-Identifier: GPL-2.0
"""Helpers shared by the collector tests (not a test module)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

COLLECTOR = Path(__file__).resolve().parents[1]
if str(COLLECTOR) not in sys.path:
    sys.path.insert(0, str(COLLECTOR))

from netoops_collector import gen, proto  # noqa: E402

FIXTURES = Path(__file__).resolve().parent / "fixtures"
PYTHON = "/usr/bin/python3"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def packets(log: bytes | str, copies: int = 1, **header: Any) -> list[bytes]:
    """The datagrams of one dump (``copies`` copies, kernel send order)."""
    raw = log.encode() if isinstance(log, str) else log
    header.setdefault("boot_id", 1)
    header.setdefault("dump_id", 7)
    return gen.dump_packets(raw, copies=copies, **header)


class Clock:
    """A monotonic clock that a test moves by hand (``clock.t += 5``)."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def rx_lib() -> Path:
    """The C receiver built from the work tree (once per source, cached)."""
    import hashlib
    import tempfile
    src = COLLECTOR / "netoops_collector" / "_rx.c"
    key = hashlib.sha1(src.read_bytes()).hexdigest()[:12]
    out = Path(tempfile.gettempdir()) / f"netoops-rx-{key}" / "_netoops_rx.so"
    if not out.exists():
        out.parent.mkdir(exist_ok=True)
        tmp = out.with_suffix(f".{os.getpid()}.tmp")
        subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
                        "-pthread", "-o", str(tmp), str(src)], check=True)
        tmp.rename(out)
    return out


def cli_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(COLLECTOR)
    env["NETOOPS_RX_LIB"] = str(rx_lib())
    env.update(extra)
    return env


def cli(*args: str | os.PathLike[str], env: dict[str, str] | None = None,
        timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """Run ``/usr/bin/python3 -m netoops_collector ARGS``."""
    return subprocess.run([PYTHON, "-m", "netoops_collector", *map(str, args)],
                          capture_output=True, text=True, env=env or cli_env(),
                          timeout=timeout)


def cli_json(*args: str | os.PathLike[str]) -> Any:
    res = cli(*args, "--json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def chunk_count(log: str | bytes) -> int:
    raw = log.encode() if isinstance(log, str) else log
    return len(proto.split_log(raw))


class Serve:
    """`netoops-collector serve` in a subprocess, with its stderr lines."""

    def __init__(self, db: os.PathLike[str] | str, *args: str,
                 listen: list[str] | None = ("127.0.0.1:0",),  # type: ignore[assignment]
                 timeout: float = 10, receiver: str = "c",
                 netconsole: str = "127.0.0.1:0") -> None:
        import queue
        import threading
        cmd = [PYTHON, "-m", "netoops_collector", "--db", str(db), "serve",
               "--receiver", receiver, *args]
        for spec in listen or []:
            cmd += ["--listen", spec]
        # never the default, every address's port 6666, on the host
        cmd += ["--netconsole-listen", netconsole]
        env = cli_env()
        self.state = ""
        if str(db).startswith("postgresql://"):     # its journal: not in $HOME
            import tempfile
            env["STATE_DIRECTORY"] = self.state = tempfile.mkdtemp(prefix="netoops-state-")
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env)
        self.lines: list[str] = []
        self._q: "queue.Queue[str | None]" = queue.Queue()
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()
        line = self.wait_for("listening on ", timeout)
        self.addr = line.split("listening on ", 1)[1].split()[0]
        self.port = int(self.addr.rsplit(":", 1)[1])
        self.nc_port = 0
        if netconsole != "off":
            line = self.wait_for("netconsole: listening on ", timeout)
            self.nc_port = int(line.split("listening on ", 1)[1].split()[0].rsplit(":", 1)[1])

    def _pump(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._q.put(line.rstrip("\n"))
        self._q.put(None)

    def wait_for(self, text: str, timeout: float = 10) -> str:
        """The first line (new or already seen) containing ``text``."""
        import queue
        import time
        for line in self.lines:
            if text in line:
                return line
        end = time.monotonic() + timeout
        while True:
            try:
                item = self._q.get(timeout=max(0.01, end - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {text!r} within {timeout}s; got {self.lines}")
            if item is None:
                raise AssertionError(f"serve exited before {text!r}; got {self.lines}")
            self.lines.append(item)
            if text in item:
                return item

    def stop(self, timeout: float = 10, sig: int = 15) -> int:
        """Send ``sig`` (SIGTERM) and wait for the exit status."""
        self.proc.send_signal(sig)
        rc = self.proc.wait(timeout)
        self._thread.join(timeout)
        while not self._q.empty():
            line = self._q.get()
            if line is not None:
                self.lines.append(line)
        self._clean()
        return rc

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._clean()

    def _clean(self) -> None:
        import shutil
        if self.state:
            shutil.rmtree(self.state, ignore_errors=True)


GUEST_FIXTURES = FIXTURES / "guest"
HOSTILE_KERNEL = "6.1.0-<script>alert(1)</script>"


def dashboard_db(db: os.PathLike[str] | str) -> dict[str, Any]:
    """A database filled by `serve` from dumps captured from real guests
    (fixtures/guest), sent from four loopback addresses with three kernel
    versions (one of them hostile markup), plus one partial dump.  Returns
    what was sent: {"dumps": n, "partial": (host, boot_id)}."""
    import socket
    import time
    logs = sorted(GUEST_FIXTURES.glob("*.txt"))
    kernels = ["6.1.0-28-amd64", "6.1.0-29-amd64", HOSTILE_KERNEL]
    srv = Serve(db, "--quiet-timeout", "1")
    sent = 0
    try:
        boot = 100
        for h in range(1, 5):
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.bind((f"127.0.0.{h}", 0))
                for k, log in enumerate(logs):
                    if (h + k) % 3 == 0:
                        continue        # not every host hits every crash
                    boot += 1
                    kernel = kernels[(h + k) % len(kernels)]
                    for p in packets(log.read_text(), boot_id=boot, kernel_version=kernel):
                        s.sendto(p, ("127.0.0.1", srv.port))
                    sent += 1
                    time.sleep(0.01)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind(("127.0.0.5", 0))
            pk = packets((GUEST_FIXTURES / "null_deref.txt").read_text(), boot_id=999,
                         kernel_version=kernels[0])
            for p in pk[:-2] if len(pk) > 2 else pk[:1]:
                s.sendto(p, ("127.0.0.1", srv.port))
            sent += 1
        srv.wait_for(f"dump {sent} from", timeout=30)
    finally:
        assert srv.stop() == 0
    return {"dumps": sent, "partial": ("127.0.0.5", 999)}
