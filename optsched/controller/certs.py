"""Serving certificates for the webhook when no cert-manager provides them.

Both replicas must serve the same certificate (the API server trusts one
``caBundle``), so the first replica to start generates a CA and a serving
certificate and stores them in a Secret; every replica, including later
ones, loads that Secret. Creation races are settled by the API server: the
loser of a create gets 409 and reads the winner's Secret. The CA is then
written into the MutatingWebhookConfiguration's ``caBundle``.
"""

from __future__ import annotations

import base64
import datetime as dt
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

VALIDITY = dt.timedelta(days=365)


@dataclass(frozen=True)
class TlsMaterial:
    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes

    def write(self, directory: str | None = None) -> tuple[str, str]:
        """Write cert and key files (for ``ssl``); returns their paths."""
        target = Path(directory or tempfile.mkdtemp(prefix="optsched-webhook-"))
        cert, key = target / "tls.crt", target / "tls.key"
        cert.write_bytes(self.cert_pem)
        key.write_bytes(self.key_pem)
        key.chmod(0o600)
        return str(cert), str(key)

    def secret_data(self) -> dict[str, str]:
        return {
            name: base64.b64encode(value).decode()
            for name, value in (
                ("ca.crt", self.ca_pem),
                ("tls.crt", self.cert_pem),
                ("tls.key", self.key_pem),
            )
        }

    @classmethod
    def from_secret(cls, secret: dict[str, Any]) -> TlsMaterial:
        data = secret.get("data") or {}
        try:
            return cls(*(base64.b64decode(data[name]) for name in ("ca.crt", "tls.crt", "tls.key")))
        except (KeyError, ValueError) as exc:
            raise ValueError(f"Secret lacks usable ca.crt/tls.crt/tls.key ({exc})") from None


def service_dns_names(service: str, namespace: str) -> list[str]:
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def generate(dns_names: list[str], ip_addresses: tuple[str, ...] = ("127.0.0.1",)) -> TlsMaterial:
    """A fresh CA and a serving certificate it signs for ``dns_names`` and ``ip_addresses``."""
    from optsched.controller import pki  # deferred: cryptography loads only where a certificate is made

    ca_key, ca = pki.build_ca("optsched-webhook-ca", VALIDITY)
    key, cert = pki.issue(
        ca_key,
        ca,
        dns_names[0] if dns_names else "optsched",
        VALIDITY,
        dns_names=dns_names,
        ip_addresses=ip_addresses,
        server=True,
    )
    return TlsMaterial(ca_pem=pki.cert_pem(ca), cert_pem=pki.cert_pem(cert), key_pem=pki.key_pem(key))


def ca_bundle_patch(config: dict[str, Any], ca_pem: bytes) -> list[dict[str, Any]]:
    """JSON patch setting ``caBundle`` on every webhook of a (Mutating)WebhookConfiguration."""
    bundle = base64.b64encode(ca_pem).decode()
    ops = []
    for number, webhook in enumerate(config.get("webhooks") or []):
        if isinstance(webhook, dict) and (webhook.get("clientConfig") or {}).get("caBundle") != bundle:
            ops.append({"op": "add", "path": f"/webhooks/{number}/clientConfig/caBundle", "value": bundle})
    return ops
