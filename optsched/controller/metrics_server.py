"""The controller's metrics endpoint: ``/metrics`` for Prometheus, ``/healthz`` for the kubelet.

Two modes, as controller-runtime has them:

* **secure** (the shipped default): HTTPS with the given certificate (e.g. the
  webhook's serving certificate, or one made at start), and every scrape of
  ``/metrics`` authenticated and authorized by the API server
  (:mod:`optsched.controller.scrape_auth`): 401 without an accepted token,
  403 for a user not allowed ``get`` on ``/metrics``;
* **plain**: HTTP and no checks, for a listener bound to 127.0.0.1 behind a
  sidecar proxy, or a cluster that protects the port otherwise.

``/healthz`` needs no token in either mode (the kubelet probes it): it
answers 200 while the control loop makes progress and 500 once its
heartbeat has been silent too long (:mod:`optsched.controller.health`).

Requests are served in threads. In secure mode the TLS handshake happens in
the request's own thread with a timeout, never in ``accept``, so an idle or
slow connection cannot stall the probes of others.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import ssl
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from optsched.controller.certs import generate
from optsched.controller.health import Health
from optsched.controller.scrape_auth import ScrapeAuth, Verdict, bearer_token
from optsched.errors import InputError

log = logging.getLogger("optsched.metrics")

IO_TIMEOUT_S = 10.0
"""A connection that does not finish its handshake or its request within this is closed."""
AUTH_TIMEOUT_S = 10.0
"""How long a scrape waits for the API server's reviews before it is answered 503."""

Authorize = Callable[[str | None], Verdict]


@dataclass(frozen=True)
class Tls:
    """Certificate and key files to serve HTTPS with."""

    cert: str
    key: str

    def context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.cert, self.key)
        return context


def serving_tls(cert_dir: str | None) -> Tls:
    """The files in ``cert_dir`` (``tls.crt``, ``tls.key``), else a certificate made now for this process."""
    if cert_dir:
        tls = Tls(os.path.join(cert_dir, "tls.crt"), os.path.join(cert_dir, "tls.key"))
        for path in (tls.cert, tls.key):
            if not os.path.isfile(path):
                raise InputError("no such file (--metrics-cert-dir needs tls.crt and tls.key)", source=path)
        return tls
    names = [socket.gethostname(), "localhost"]
    cert, key = generate(names).write(tempfile.mkdtemp(prefix="optsched-metrics-"))
    return Tls(cert, key)


def on_loop(
    auth: ScrapeAuth, loop: asyncio.AbstractEventLoop, timeout_s: float = AUTH_TIMEOUT_S
) -> Authorize:
    """:meth:`ScrapeAuth.verdict` run on the controller's event loop, for the server's threads."""

    def authorize(token: str | None) -> Verdict:
        future = asyncio.run_coroutine_threadsafe(auth.verdict(token), loop)
        try:
            return future.result(timeout_s)
        except FutureTimeout:
            future.cancel()
            return Verdict(503, f"the token could not be checked within {timeout_s:g}s")

    return authorize


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = IO_TIMEOUT_S

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/healthz":
            health = self.server.health()
            self._answer(200 if health.healthy else 500, health.message.encode() + b"\n", "text/plain")
        elif path == "/metrics":
            verdict = self.server.verdict(self.headers.get("Authorization"))
            if verdict.allowed:
                self._answer(200, generate_latest(self.server.registry), CONTENT_TYPE_LATEST)
            else:
                self._answer(verdict.status, verdict.reason.encode() + b"\n", "text/plain")
        else:
            self._answer(404, b"not found\n", "text/plain")

    def _answer(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if status == 401:
            self.send_header("WWW-Authenticate", 'Bearer realm="optsched metrics"')
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        *,
        registry: CollectorRegistry,
        health: Callable[[], Health],
        authorize: Authorize | None,
        tls: ssl.SSLContext | None,
    ) -> None:
        self.registry = registry
        self.health = health
        self.authorize = authorize
        self.tls = tls
        super().__init__(address, _Handler)

    def verdict(self, header: str | None) -> Verdict:
        return Verdict(200) if self.authorize is None else self.authorize(bearer_token(header))

    def finish_request(self, request: Any, client_address: Any) -> None:
        """Handle one connection in its own thread; the TLS handshake too, with a timeout."""
        if self.tls is None:
            super().finish_request(request, client_address)
            return
        request.settimeout(IO_TIMEOUT_S)
        try:
            wrapped = self.tls.wrap_socket(request, server_side=True)
        except (OSError, ValueError) as exc:
            log.debug("metrics: TLS handshake with %s failed: %s", client_address, exc)
            return
        try:
            _Handler(wrapped, client_address, self)
        finally:
            wrapped.close()


class _Server6(_Server):
    address_family = socket.AF_INET6


class MetricsServer:
    """``/metrics`` and ``/healthz`` on one port, served from a thread of its own."""

    def __init__(
        self,
        registry: CollectorRegistry,
        health: Callable[[], Health],
        *,
        host: str = "0.0.0.0",
        port: int = 9464,
        tls: Tls | None = None,
        authorize: Authorize | None = None,
    ) -> None:
        kind = _Server6 if ":" in host else _Server
        self._server = kind(
            (host, port),
            registry=registry,
            health=health,
            authorize=authorize,
            tls=tls.context() if tls is not None else None,
        )
        self.secure = tls is not None
        self._thread = threading.Thread(target=self._server.serve_forever, name="metrics", daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
