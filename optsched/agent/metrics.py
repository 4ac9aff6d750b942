"""The agent's Prometheus metrics and its ``/healthz``, served on one port.

Names follow ``optsched_agent_*``; per-GPU series carry ``node``, ``gpu`` and
``uuid`` labels as DCGM's exporter does, so dashboards can join them.
``/healthz`` fails once no pass has completed for three intervals: a wedged
agent is restarted by its liveness probe.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

DISCOVERY_BUCKETS = (0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5)
PASS_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60)


class AgentMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = r = registry or CollectorRegistry()
        self.gpu_healthy = Gauge(
            "optsched_agent_gpu_healthy",
            "1 while the GPU is healthy, 0 once a critical XID marked it",
            ["node", "gpu", "uuid"],
            registry=r,
        )
        self.unhealthy = Gauge(
            "optsched_agent_unhealthy_gpus", "Unhealthy GPUs on the node", ["node"], registry=r
        )
        self.xids = Counter(
            "optsched_agent_xid_events",
            "NVML XID events seen",
            ["node", "gpu", "xid", "critical"],
            registry=r,
        )
        self.drift = Gauge(
            "optsched_agent_drift_pods", "Pods holding other GPUs than optsched planned", ["node"], registry=r
        )
        self.drift_found = Counter(
            "optsched_agent_drift_detected",
            "Times a pod was found on other GPUs than planned",
            ["node"],
            registry=r,
        )
        self.mig_state = Gauge(
            "optsched_agent_mig_layout_state",
            "1 for the node's current MIG layout state",
            ["node", "state"],
            registry=r,
        )
        self.discovery = Histogram(
            "optsched_agent_discovery_seconds",
            "Time of one discovery pass on one node",
            buckets=DISCOVERY_BUCKETS,
            registry=r,
        )
        self.pass_seconds = Histogram(
            "optsched_agent_pass_seconds",
            "Time of one pass over every node the agent serves",
            buckets=PASS_BUCKETS,
            registry=r,
        )
        self.errors = Counter(
            "optsched_agent_errors", "Failed node passes or writes", ["node", "stage"], registry=r
        )
        self.last_pass = Gauge(
            "optsched_agent_last_pass_timestamp_seconds", "When the last pass finished", registry=r
        )
        self.interval_s = 30.0
        self._last_ok = time.monotonic()

    def passed(self, seconds: float) -> None:
        self.pass_seconds.observe(seconds)
        self.last_pass.set_to_current_time()
        self._last_ok = time.monotonic()

    def healthy(self) -> bool:
        return time.monotonic() - self._last_ok < max(3 * self.interval_s, 30.0)

    def serve(self, port: int, addr: str = "0.0.0.0") -> ThreadingHTTPServer:
        """``/metrics`` and ``/healthz`` in a daemon thread; port 0 picks a free one."""
        metrics = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.startswith("/healthz"):
                    ok = metrics.healthy()
                    self._send(
                        200 if ok else 503, b"ok\n" if ok else b"no pass completed recently\n", "text/plain"
                    )
                elif self.path.startswith("/metrics"):
                    self._send(200, generate_latest(metrics.registry), CONTENT_TYPE_LATEST)
                else:
                    self._send(404, b"not found\n", "text/plain")

            def _send(self, code: int, body: bytes, content_type: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return

        server = ThreadingHTTPServer((addr, port), Handler)
        threading.Thread(target=server.serve_forever, daemon=True, name="agent-metrics").start()
        return server
