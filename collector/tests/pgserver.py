# SPDX-License-Identifier: GPL-2.0
"""A real PostgreSQL server for the tests and benchmarks: Debian's
postgresql, `initdb` into a temporary directory, run as an unprivileged
user (nobody) on a Unix socket in that directory only (no TCP), stopped
and removed afterwards.  Each :meth:`Server.database` is a fresh one."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

BIN = Path("/usr/lib/postgresql/15/bin")
USER = "nobody"


def _as_user(*cmd: str | os.PathLike[str]) -> list[str]:
    """``cmd`` as ``USER`` (the server refuses to run as root)."""
    if os.geteuid() != 0:
        return [str(c) for c in cmd]
    return ["setpriv", f"--reuid={USER}", f"--regid={USER if USER != 'nobody' else 'nogroup'}",
            "--clear-groups", "--reset-env", *map(str, cmd)]


class Server:
    """``with Server() as pg: url = pg.database()``."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="netoops-pg-"))
        self.data = self.dir / "data"
        self._names = itertools.count(1)

    def __enter__(self) -> "Server":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        if os.geteuid() == 0:
            shutil.chown(self.dir, USER)
        subprocess.run(_as_user(BIN / "initdb", "-D", self.data, "-U", "netoops",
                                "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C.UTF-8"),
                       check=True, capture_output=True, cwd=self.dir)
        # No TCP at all; the socket lives in this directory.
        subprocess.run(_as_user(BIN / "pg_ctl", "-D", self.data, "-l", self.dir / "log", "-w",
                                "-o", f"-c listen_addresses='' -c unix_socket_directories="
                                      f"'{self.dir}' -c fsync=off -c max_connections=60",
                                "start"), check=True, capture_output=True, cwd=self.dir)

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://netoops@/{dbname}?host={self.dir}"

    def database(self) -> str:
        """A new, empty database's URL."""
        name = f"t{next(self._names)}"
        self.psql(f"CREATE DATABASE {name}")
        return self.url(name)

    def psql(self, sql: str, dbname: str = "postgres") -> str:
        return subprocess.run([BIN / "psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
                               "-h", str(self.dir), "-U", "netoops", "-d", dbname, "-c", sql],
                              check=True, capture_output=True, text=True).stdout

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            subprocess.run(_as_user(BIN / "pg_ctl", "-D", self.data, "-m", "immediate", "-w",
                                    "stop"), capture_output=True, cwd=self.dir)
        shutil.rmtree(self.dir, ignore_errors=True)
