# SPDX-License-Identifier: GPL-2.0
"""Alerts: a command and a webhook told of each new crash signature.

When a stored dump's signature is one the database has not seen (and, with
``every_dump``, for every dump stored), the report, the keys of
`show --json` with ``"event"`` added, goes as JSON to:

- the hook command (split like a shell would, run without one) on its
  standard input, with NETOOPS_EVENT set to the event;
- the webhook URL, as an HTTP POST (Content-Type: application/json).

A thread of its own runs them, one at a time, each bounded by ``timeout``:
the storing thread only queues (at most ``QUEUE`` reports; beyond, they are
counted as dropped).  A failure is counted and logged, never retried.
"""

from __future__ import annotations

import json
import os
import queue
import shlex
import subprocess
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from . import __version__
from .symbolize import SymbolError, Symbols, annotate

QUEUE = 256


@dataclass(frozen=True)
class AlertConfig:
    hook: str | None = None
    webhook: str | None = None
    every_dump: bool = False
    timeout: float = 10.0
    symbols: Path | None = None     # reports name source lines (symbolize.py)

    @property
    def enabled(self) -> bool:
        return bool(self.hook or self.webhook)


class Alerts:
    """``count(name)`` adds one to a server counter; ``log(line)`` logs."""

    def __init__(self, cfg: AlertConfig, known: set[str], count: Callable[[str], None],
                 log: Callable[[str], None]) -> None:
        self.cfg = cfg
        self.known = known          # signatures seen: in the database, or alerted
        self.count = count
        self.log = log
        self._q: "queue.Queue[tuple[str, dict[str, Any]] | None]" = queue.Queue(QUEUE)
        self._thread: threading.Thread | None = None
        # SymbolError here, for a missing directory: serve refuses to start.
        self._symbols = Symbols(cfg.symbols) if cfg.symbols is not None else None
        if cfg.enabled:
            self._thread = threading.Thread(target=self._run, name="netoops-alerts",
                                            daemon=True)
            self._thread.start()

    def stored(self, signature: str | None, report: Callable[[], dict[str, Any] | None]
               ) -> None:
        """A dump was stored; ``report()`` gives its `show --json` dict."""
        new = signature is not None and signature not in self.known
        if signature is not None:
            self.known.add(signature)
        if not self.cfg.enabled or not (new or self.cfg.every_dump):
            return
        d = report()
        if d is None:
            return
        event = "new_signature" if new else "dump"
        try:
            self._q.put_nowait((event, {"event": event, **d}))
        except queue.Full:
            self.count("alerts_dropped")

    def stop(self, timeout: float = 5.0) -> None:
        """Send what is queued, for ``timeout`` at most; the rest is dropped."""
        if self._thread is None:
            return
        try:
            self._q.put(None, timeout=timeout)
        except queue.Full:
            pass
        self._thread.join(timeout)
        while True:
            try:
                item = self._q.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                self.count("alerts_dropped")
        self._thread = None

    def _run(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                return
            event, d = item
            if self._symbols is not None:
                try:
                    d = annotate(d, self._symbols)
                except SymbolError as err:
                    self.log(f"symbols failed: {err}; the report goes without lines")
            body = json.dumps(d).encode()
            if self.cfg.hook:
                self._hook(event, body)
            if self.cfg.webhook:
                self._post(body)

    def _hook(self, event: str, body: bytes) -> None:
        self.count("hook_runs")
        why = None
        try:
            res = subprocess.run(shlex.split(self.cfg.hook or ""), input=body,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 timeout=self.cfg.timeout, check=False,
                                 env=dict(os.environ, NETOOPS_EVENT=event))
            if res.returncode:
                err = res.stderr.decode(errors="replace").strip().splitlines()
                why = f"exit status {res.returncode}" + (f": {err[-1][:200]}" if err else "")
        except subprocess.TimeoutExpired:
            why = f"no exit within {self.cfg.timeout:g}s (killed)"
        except (OSError, ValueError) as err:
            why = str(err)
        if why:
            self.count("hook_failures")
            self.log(f"hook failed: {why}")

    def _post(self, body: bytes) -> None:
        self.count("webhook_posts")
        req = urllib.request.Request(
            self.cfg.webhook or "", data=body, method="POST",
            headers={"Content-Type": "application/json",
                     "User-Agent": f"netoops-collector/{__version__}"})
        why = None
        try:
            with urllib.request.urlopen(req, timeout=self.cfg.timeout) as resp:
                if not 200 <= resp.status < 300:
                    why = f"HTTP {resp.status}"
        except urllib.error.HTTPError as err:
            why = f"HTTP {err.code}"
        except (urllib.error.URLError, OSError, ValueError) as err:
            why = str(getattr(err, "reason", err))
        if why:
            self.count("webhook_failures")
            self.log(f"webhook failed: {why}")
