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
    """A fresh EC P-256 CA and a serving certificate it signs for ``dns_names`` and ``ip_addresses``."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "optsched-webhook-ca")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
    cert = (
        x509.CertificateBuilder()
        .subject_name(
            x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns_names[0] if dns_names else "optsched")])
        )
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    return TlsMaterial(
        ca_pem=ca.public_bytes(pem),
        cert_pem=cert.public_bytes(pem),
        key_pem=key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
    )


def ca_bundle_patch(config: dict[str, Any], ca_pem: bytes) -> list[dict[str, Any]]:
    """JSON patch setting ``caBundle`` on every webhook of a (Mutating)WebhookConfiguration."""
    bundle = base64.b64encode(ca_pem).decode()
    ops = []
    for number, webhook in enumerate(config.get("webhooks") or []):
        if isinstance(webhook, dict) and (webhook.get("clientConfig") or {}).get("caBundle") != bundle:
            ops.append({"op": "add", "path": f"/webhooks/{number}/clientConfig/caBundle", "value": bundle})
    return ops
