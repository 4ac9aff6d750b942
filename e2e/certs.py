"""Self-signed PKI for the local control plane.

One CA signs everything: the apiserver's serving cert, the admin client cert
(group ``system:masters``, so tests need no RBAC setup), and Kueue's webhook
serving cert.  The apiserver then trusts the webhook via the same CA bundle,
which keeps the number of moving parts small.  The CA and leaves come from the
same builders as the controller's webhook certificate (``optsched.controller.pki``).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from optsched.controller import pki

VALIDITY = dt.timedelta(days=30)
KUBERNETES_SERVICE_NAMES = (
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)


@dataclass(frozen=True)
class CertPair:
    cert: Path
    key: Path


@dataclass(frozen=True)
class PKI:
    """Paths of every credential the cluster uses."""

    ca: CertPair
    apiserver: CertPair
    admin: CertPair
    webhook: CertPair
    sa_key: Path
    sa_pub: Path


def _write_pair(
    directory: Path, stem: str, key: ec.EllipticCurvePrivateKey, cert: x509.Certificate
) -> CertPair:
    pair = CertPair(directory / f"{stem}.crt", directory / f"{stem}.key")
    pair.cert.write_bytes(pki.cert_pem(cert))
    pair.key.write_bytes(pki.key_pem(key))
    pair.key.chmod(0o600)
    return pair


def generate_pki(directory: Path, service_ip: str = "10.0.0.1") -> PKI:
    """Create a fresh CA and every leaf certificate under ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = pki.build_ca("optsched-e2e-ca", VALIDITY)
    ca = _write_pair(directory, "ca", ca_key, ca_cert)
    local_dns = ("localhost",)
    local_ips = ("127.0.0.1",)

    def leaf(stem: str, common_name: str, **kw: Any) -> CertPair:
        return _write_pair(directory, stem, *pki.issue(ca_key, ca_cert, common_name, VALIDITY, **kw))

    apiserver = leaf(
        "apiserver",
        "kube-apiserver",
        dns_names=(*local_dns, *KUBERNETES_SERVICE_NAMES),
        ip_addresses=(*local_ips, service_ip),
        server=True,
    )
    admin = leaf("admin", "optsched-e2e-admin", organization="system:masters", client=True)
    webhook = leaf("webhook", "kueue-webhook", dns_names=local_dns, ip_addresses=local_ips, server=True)
    # Service-account tokens are signed with RSA: every client library verifies RS256.
    sa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    sa_key, sa_pub = directory / "sa.key", directory / "sa.pub"
    sa_key.write_bytes(pki.key_pem(sa))
    sa_key.chmod(0o600)
    sa_pub.write_bytes(
        sa.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return PKI(ca=ca, apiserver=apiserver, admin=admin, webhook=webhook, sa_key=sa_key, sa_pub=sa_pub)
