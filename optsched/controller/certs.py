"""Serving certificates for the webhook when no cert-manager provides them, and when to renew them.

Both replicas must serve a certificate the API server trusts through one
``caBundle``, so the first replica to start generates a CA and a serving
certificate and stores them in a Secret; every replica, including later
ones, loads that Secret (:mod:`optsched.controller.serving_certs` does the
I/O). Renewal makes a new CA and leaf ``RENEW_BEFORE`` ahead of the leaf's
expiry and keeps the CA it replaces as ``ca-previous.crt``: the ``caBundle``
holds both, so a replica still serving the old chain verifies until it has
loaded the new one. Everything here is a value or a pure function of one
(the clock is a parameter).
"""

from __future__ import annotations

import base64
import datetime as dt
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

VALIDITY = dt.timedelta(days=365)
RENEW_BEFORE = dt.timedelta(days=30)
"""A stored leaf expiring within this window is replaced (with a new CA) by the replica that sees it."""

_FILES = (("ca.crt", "ca_pem"), ("tls.crt", "cert_pem"), ("tls.key", "key_pem"))
PREVIOUS_CA = "ca-previous.crt"


@dataclass(frozen=True)
class TlsMaterial:
    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes
    previous_ca_pem: bytes = b""
    """The CA this one replaced, trusted alongside it during the overlap (empty: none)."""

    @property
    def ca_bundle(self) -> bytes:
        """What the API server must trust: this CA, then the one it replaced."""
        return self.ca_pem + self.previous_ca_pem

    def write(self, directory: str | None = None) -> tuple[str, str]:
        """Write cert and key files (for ``ssl``); returns their paths.

        The key is written first and the certificate last, each replaced by a
        rename, so a reader never sees a truncated file.
        """
        target = Path(directory or tempfile.mkdtemp(prefix="optsched-webhook-"))
        cert, key = target / "tls.crt", target / "tls.key"
        _replace(key, self.key_pem, mode=0o600)
        _replace(cert, self.cert_pem, mode=0o644)
        return str(cert), str(key)

    def secret_data(self) -> dict[str, str]:
        data = {name: base64.b64encode(getattr(self, field)).decode() for name, field in _FILES}
        if self.previous_ca_pem:
            data[PREVIOUS_CA] = base64.b64encode(self.previous_ca_pem).decode()
        return data

    @classmethod
    def from_secret(cls, secret: dict[str, Any]) -> TlsMaterial:
        data = secret.get("data") or {}
        try:
            values = [base64.b64decode(data[name]) for name, _ in _FILES]
            previous = base64.b64decode(data.get(PREVIOUS_CA) or "")
        except (KeyError, ValueError, TypeError) as exc:
            raise ValueError(f"Secret lacks usable ca.crt/tls.crt/tls.key ({exc})") from None
        ca, cert, key = values
        return cls(ca_pem=ca, cert_pem=cert, key_pem=key, previous_ca_pem=previous)


def _replace(path: Path, data: bytes, *, mode: int) -> None:
    partial = path.with_name(f".{path.name}.new")
    partial.write_bytes(data)
    partial.chmod(mode)
    partial.replace(path)


def service_dns_names(service: str, namespace: str) -> list[str]:
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def generate(
    dns_names: list[str],
    ip_addresses: tuple[str, ...] = ("127.0.0.1",),
    *,
    validity: dt.timedelta = VALIDITY,
    now: dt.datetime | None = None,
    previous_ca_pem: bytes = b"",
) -> TlsMaterial:
    """A fresh CA and a serving certificate it signs for ``dns_names`` and ``ip_addresses``."""
    from optsched.controller import pki  # deferred: cryptography loads only where a certificate is made

    ca_key, ca = pki.build_ca("optsched-webhook-ca", validity, now=now)
    key, cert = pki.issue(
        ca_key,
        ca,
        dns_names[0] if dns_names else "optsched",
        validity,
        dns_names=dns_names,
        ip_addresses=ip_addresses,
        server=True,
        now=now,
    )
    return TlsMaterial(
        ca_pem=pki.cert_pem(ca),
        cert_pem=pki.cert_pem(cert),
        key_pem=pki.key_pem(key),
        previous_ca_pem=previous_ca_pem,
    )


def expires(material: TlsMaterial) -> dt.datetime | None:
    """When the serving certificate expires; None when it does not parse."""
    from optsched.controller import pki  # deferred: cryptography loads only where a certificate is read

    try:
        return pki.not_after(material.cert_pem)
    except ValueError:
        return None


def needs_renewal(material: TlsMaterial, now: dt.datetime, renew_before: dt.timedelta = RENEW_BEFORE) -> bool:
    """Whether the stored leaf is unreadable or expires within ``renew_before`` of ``now``."""
    end = expires(material)
    return end is None or end - now <= renew_before


def renewed(
    material: TlsMaterial,
    dns_names: list[str],
    *,
    validity: dt.timedelta = VALIDITY,
    now: dt.datetime | None = None,
) -> TlsMaterial:
    """A new CA and leaf that keep ``material``'s CA as the previous one (trusted during the overlap)."""
    return generate(dns_names, validity=validity, now=now, previous_ca_pem=material.ca_pem)


def ca_bundle_patch(config: dict[str, Any], bundle_pem: bytes) -> list[dict[str, Any]]:
    """JSON patch setting ``caBundle`` on every webhook of a (Mutating)WebhookConfiguration."""
    bundle = base64.b64encode(bundle_pem).decode()
    ops = []
    for number, webhook in enumerate(config.get("webhooks") or []):
        if isinstance(webhook, dict) and (webhook.get("clientConfig") or {}).get("caBundle") != bundle:
            ops.append({"op": "add", "path": f"/webhooks/{number}/clientConfig/caBundle", "value": bundle})
    return ops
