"""The mutating admission webhook that gates pods of optsched-admitted workloads at creation.

``mutate`` is pure (AdmissionReview dict in, AdmissionReview dict out); the
server around it is a small threaded HTTPS server from the standard library,
so the webhook has no dependency beyond the controller itself and runs on
every replica (it needs no leadership: the answer depends only on the pod).

Only pods labelled ``optsched.io/plan-id`` are touched. That label reaches a
pod solely through the podSetUpdates of our Ready admission check, so pods of
workloads optsched does not manage are never gated. The
MutatingWebhookConfiguration's ``objectSelector`` applies the same filter on
the API server's side, and the code checks it again.
"""

from __future__ import annotations

import base64
import json
import logging
import ssl
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from optsched.model.names import PLAN_ID_LABEL, SCHEDULING_GATE

log = logging.getLogger("optsched.webhook")

MUTATE_PATH = "/mutate-pods"


def _allowed(
    uid: str, patch: list[dict[str, Any]] | None = None, warning: str | None = None
) -> dict[str, Any]:
    response: dict[str, Any] = {"uid": uid, "allowed": True}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    if warning:
        response["warnings"] = [warning]
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


def gate_patch(pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    """JSON patch adding our scheduling gate; empty when not ours or already gated."""
    metadata = pod.get("metadata") if isinstance(pod.get("metadata"), dict) else {}
    labels = (metadata or {}).get("labels") or {}
    if not isinstance(labels, dict) or not labels.get(PLAN_ID_LABEL):
        return []
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    if (spec or {}).get("nodeName"):
        return []
    gates = (spec or {}).get("schedulingGates")
    gate = {"name": SCHEDULING_GATE}
    if not isinstance(gates, list) or not gates:
        return [{"op": "add", "path": "/spec/schedulingGates", "value": [gate]}]
    if any(isinstance(g, dict) and g.get("name") == SCHEDULING_GATE for g in gates):
        return []
    return [{"op": "add", "path": "/spec/schedulingGates/-", "value": gate}]


def mutate(review: Mapping[str, Any]) -> dict[str, Any]:
    """Answer one AdmissionReview: always allowed; gated when the pod is one of ours.

    A malformed review is allowed unchanged with a warning: refusing it would
    block pod creation for a reason the user cannot fix.
    """
    request = review.get("request") if isinstance(review.get("request"), dict) else None
    if request is None:
        return _allowed("", warning="optsched: AdmissionReview without request")
    uid = str(request.get("uid", ""))
    kind = request.get("kind") or {}
    if request.get("operation") != "CREATE" or not isinstance(kind, dict) or kind.get("kind") != "Pod":
        return _allowed(uid)
    pod = request.get("object")
    if not isinstance(pod, dict):
        return _allowed(uid, warning="optsched: pod object missing from the admission request")
    return _allowed(uid, gate_patch(pod))


class _Handler(BaseHTTPRequestHandler):
    server_version = "optsched-webhook"

    def do_POST(self) -> None:
        if self.path.split("?")[0] != MUTATE_PATH:
            self.send_error(404)
            return
        length = int(self.headers.get("Content-Length") or 0)
        try:
            review = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            review = {}
        body = json.dumps(mutate(review if isinstance(review, dict) else {})).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path in ("/healthz", "/readyz"):
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")
            return
        self.send_error(404)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("webhook: " + format, *args)


class WebhookServer:
    """HTTPS server for the webhook in a daemon thread."""

    def __init__(self, host: str, port: int, cert_file: str, key_file: str) -> None:
        self.httpd = ThreadingHTTPServer((host, port), _Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(cert_file, key_file)
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="optsched-webhook", daemon=True)

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
