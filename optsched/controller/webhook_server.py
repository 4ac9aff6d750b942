"""The webhook's HTTPS server: no client can stall it, and it serves rotated certificates.

The listening socket is plain TCP. The accept thread only accepts; each
connection gets a worker thread that does the TLS handshake (bounded by
``handshake_timeout_s``), then serves requests with a read timeout per
receive, so an idle connection or one that never finishes its handshake
holds one worker for a few seconds and delays nobody else. Workers are
bounded: past ``max_connections`` a new connection is closed at once instead
of growing threads without end. A request body over ``max_body_bytes`` is
answered 413, its bytes dropped as they arrive, never kept (an AdmissionReview
of the largest pod the API server accepts is under 3 MiB; the default limit
is 4 MiB). Each connection is
wrapped with the context :class:`~optsched.controller.cert_reload.ReloadingContext`
holds at that moment, so renewed certificate files take effect for new
connections without a restart.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from optsched.controller.cert_reload import ReloadingContext
from optsched.controller.webhook import MUTATE_PATH, DraFacts, mutate
from optsched.kueue.managed_queues import ManagedQueues

log = logging.getLogger("optsched.webhook")

MiB = 1024 * 1024
DISCARD_FACTOR = 4
"""A body up to this many times the limit is read and dropped before the 413; a larger one is not."""


@dataclass(frozen=True)
class ServerLimits:
    """What one client may cost the webhook server."""

    handshake_timeout_s: float = 5.0
    """A TLS handshake not finished by then closes the connection (the API server's own timeout)."""
    read_timeout_s: float = 10.0
    """Longest wait for the next bytes of a request, and for the next request on a kept-alive connection."""
    max_body_bytes: int = 4 * MiB
    """Larger request bodies are answered 413 without being read."""
    max_connections: int = 64
    """Connections served at once; more are closed at accept."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        contexts: ReloadingContext,
        queues: Callable[[], ManagedQueues],
        limits: ServerLimits,
        dra: Callable[[], DraFacts] | None = None,
    ) -> None:
        super().__init__(address, _Handler)
        self.contexts = contexts
        self.queues = queues
        self.dra = dra or DraFacts
        self.limits = limits
        self.slots = threading.BoundedSemaphore(limits.max_connections)
        self.refused = 0
        """Connections closed at accept because every worker was busy."""

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            self.refused += 1
            busy = self.limits.max_connections
            log.warning("webhook: %d connections open, closing one from %s", busy, client_address)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()

    def finish_request(self, request: Any, client_address: Any) -> None:
        """In the worker thread: the TLS handshake with a deadline, then HTTP on the wrapped socket."""
        raw: socket.socket = request
        raw.settimeout(self.limits.handshake_timeout_s)
        tls = self.contexts.current().wrap_socket(raw, server_side=True, do_handshake_on_connect=False)
        try:
            tls.do_handshake()
            tls.settimeout(self.limits.read_timeout_s)
            _Handler(tls, client_address, self)
        finally:
            tls.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that timed out, spoke no TLS or hung up: its own problem, logged quietly."""
        log.debug("webhook: connection from %s ended with an error", client_address, exc_info=True)


class _Handler(BaseHTTPRequestHandler):
    server_version = "optsched-webhook"
    protocol_version = "HTTP/1.1"
    server: _Server

    def do_POST(self) -> None:
        if self.path.split("?")[0] != MUTATE_PATH:
            self._reply(404, {"error": f"no such path {self.path}"})
            return
        length = self._content_length()
        if length is None:
            return
        try:
            review = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            review = {}
        review = review if isinstance(review, dict) else {}
        try:
            answer = mutate(review, self.server.queues(), self.server.dra())
        except Exception:  # a defect in one answer must not kill the server: the API server's policy decides
            log.exception("webhook: answering an AdmissionReview failed")
            self._reply(500, {"error": "optsched could not answer this admission request; see its log"})
            return
        self._reply(200, answer)

    def _content_length(self) -> int | None:
        """The body's announced length, or None after answering why it cannot be read."""
        raw = self.headers.get("Content-Length")
        try:
            length = int(raw) if raw is not None else -1
        except ValueError:
            length = -1
        if length < 0:
            self.close_connection = True
            self._reply(411, {"error": "a request body needs a valid Content-Length"})
            return None
        limit = self.server.limits.max_body_bytes
        if length > limit:
            self.close_connection = True
            self._discard(min(length, DISCARD_FACTOR * limit))
            self._reply(413, {"error": f"request body of {length} bytes is over the limit of {limit}"})
            return None
        return length

    def _discard(self, length: int) -> None:
        """Read and drop ``length`` bytes, so the answer is not lost to a reset of the connection."""
        while length > 0:
            chunk = self.rfile.read(min(length, 64 * 1024))
            if not chunk:
                return
            length -= len(chunk)

    def do_GET(self) -> None:
        if self.path in ("/healthz", "/readyz"):
            self._reply(200, None)
            return
        self._reply(404, {"error": f"no such path {self.path}"})

    def _reply(self, status: int, body: dict[str, Any] | None) -> None:
        data = json.dumps(body).encode() if body is not None else b"ok"
        self.send_response(status)
        self.send_header("Content-Type", "application/json" if body is not None else "text/plain")
        self.send_header("Content-Length", str(len(data)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("webhook: " + format, *args)


class WebhookServer:
    """The webhook over HTTPS in a daemon thread, answering with the verdicts ``queues`` returns and the
    records and templates ``dra`` reads."""

    def __init__(
        self,
        host: str,
        port: int,
        contexts: ReloadingContext,
        queues: Callable[[], ManagedQueues],
        limits: ServerLimits = ServerLimits(),
        dra: Callable[[], DraFacts] | None = None,
    ) -> None:
        self.httpd = _Server((host, port), contexts, queues, limits, dra)
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="optsched-webhook", daemon=True)

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
