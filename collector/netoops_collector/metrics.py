# SPDX-License-Identifier: GPL-2.0
"""Prometheus metrics of `serve`: an HTTP endpoint and a textfile.

``--metrics HOST:PORT`` serves ``/metrics`` in the text exposition format;
``--metrics-textfile PATH`` writes the same text for node-exporter's
textfile collector (atomically: a temporary file renamed over it), every
two seconds and at exit.  Counters count since serve started.
"""

from __future__ import annotations

import http.server
import os
import socket
import threading
from pathlib import Path
from typing import Callable

_P = "netoops_collector_"

# (metric, help, server counter or None, labels) for the counters
_COUNTERS: list[tuple[str, str, str, dict[str, str]]] = [
    ("packets_total", "Datagrams received.", "packets", {}),
    ("duplicates_total", "Copies of a packet already received.", "duplicates", {}),
    ("late_total", "Packets of a dump already finalised.", "late", {}),
    ("kernel_drops_total", "Datagrams the kernel dropped (receive buffer full).",
     "kernel_drops", {}),
    ("dumps_total", "Dumps stored, by state.", "dumps_complete", {"state": "complete"}),
    ("dumps_total", "Dumps stored, by state.", "dumps_partial", {"state": "partial"}),
    ("dumps_repaired_total", "Partial dumps repaired by late chunks.", "dumps_repaired", {}),
    ("dumps_not_stored_total", "Dumps over a source's share, counted not stored.",
     "dumps_junk_dropped", {"reason": "junk"}),
    ("dumps_not_stored_total", "Dumps over a source's share, counted not stored.",
     "dumps_rate_dropped", {"reason": "rate"}),
    ("store_errors_total", "Database errors (the dumps are kept and retried).",
     "store_errors", {}),
    ("journal_errors_total", "Journal write or sync errors.", "journal_errors", {}),
    ("hook_failures_total", "Hook command runs that failed.", "hook_failures", {}),
    ("webhook_failures_total", "Webhook POSTs that failed.", "webhook_failures", {}),
    ("alerts_dropped_total", "Alerts not sent: the queue was full.", "alerts_dropped", {}),
    ("netconsole_datagrams_total", "Netconsole datagrams received.",
     "netconsole_datagrams", {}),
    ("netconsole_lines_total", "Netconsole lines stored.", "netconsole_lines", {}),
    ("netconsole_lost_total", "Netconsole records lost (extended sequence gaps).",
     "netconsole_lost", {}),
    ("netconsole_store_dropped_total", "Netconsole lines dropped: the database refused "
     "them too long.", "netconsole_store_dropped", {}),
]
# (metric, help, gauge name)
_GAUGES = [
    ("dumps_in_flight", "Dumps being reassembled.", "inflight_dumps"),
    ("held_bytes", "Bytes held for dumps in flight and remembered.", "held_bytes"),
    ("unsaved_dumps", "Finalised dumps not yet in the database.", "unsaved_dumps"),
    ("ring_bytes", "Bytes in the C receive threads' rings.", "ring_bytes"),
    ("journal_bytes", "Bytes in the journal.", "journal_bytes"),
    ("storage_lag_seconds", "Most time from a dump finalised to stored, this log interval.",
     "store_delay_max"),
    ("durable_lag_seconds", "Most time from a dump finalised to durable, this log interval.",
     "durable_delay_max"),
    ("netconsole_unsaved_lines", "Netconsole lines not yet in the database.",
     "netconsole_unsaved"),
]


def _labels(labels: dict[str, str]) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def render(stats: dict[str, int], gauges: dict[str, float]) -> str:
    """The text exposition format of ``stats`` (counters) and ``gauges``."""
    out: list[str] = []
    done: set[str] = set()

    def head(name: str, text: str, kind: str) -> None:
        if name not in done:
            done.add(name)
            out.append(f"# HELP {_P}{name} {text}")
            out.append(f"# TYPE {_P}{name} {kind}")

    for name, text, key, labels in _COUNTERS:
        head(name, text, "counter")
        out.append(f"{_P}{name}{_labels(labels)} {stats.get(key, 0)}")
    head("rejected_total", "Datagrams rejected, by reason.", "counter")
    for key in sorted(k for k in stats if k.startswith("rejected_")):
        out.append(f'{_P}rejected_total{{reason="{key[len("rejected_"):]}"}} {stats[key]}')
    for name, text, key in _GAUGES:
        head(name, text, "gauge")
        out.append(f"{_P}{name} {float(gauges.get(key, 0.0)):g}")
    return "\n".join(out) + "\n"


def write_textfile(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


class MetricsServer:
    """GET /metrics on ``addr`` in a thread of its own; ``text()`` renders."""

    def __init__(self, addr: tuple[str, int], text: Callable[[], str]) -> None:
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:                   # noqa: N802 (http.server's name)
                if self.path.split("?")[0] != "/metrics":
                    self.send_error(404)
                    return
                body = text().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        family = http.server.ThreadingHTTPServer
        if ":" in addr[0]:
            family = type("V6", (http.server.ThreadingHTTPServer,), {"address_family": socket.AF_INET6})
        self.httpd = family(addr, Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="netoops-metrics",
                                       daemon=True)
        self.thread.start()

    @property
    def address(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
