"""Self-signed PKI for the local control plane.

One CA signs everything: the apiserver's serving cert, the admin client cert
(group ``system:masters``, so tests need no RBAC setup), and Kueue's webhook
serving cert.  The apiserver then trusts the webhook via the same CA bundle,
which keeps the number of moving parts small.  Keys are EC P-256: generating
RSA keys costs seconds on a slow machine, EC keys milliseconds.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

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


def _write_key(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _write_cert(cert: x509.Certificate, path: Path) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _name(cn: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


def _make_ca(directory: Path) -> tuple[CertPair, ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    name = _name("optsched-e2e-ca")
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
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
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    pair = CertPair(directory / "ca.crt", directory / "ca.key")
    _write_cert(cert, pair.cert)
    _write_key(key, pair.key)
    return pair, key, cert


def _issue(
    directory: Path,
    stem: str,
    ca_key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    cn: str,
    *,
    org: str | None = None,
    dns: tuple[str, ...] = (),
    ips: tuple[str, ...] = (),
    server: bool = False,
    client: bool = False,
) -> CertPair:
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + (
        [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
    )
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(cn, org))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
    )
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
    sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    pair = CertPair(directory / f"{stem}.crt", directory / f"{stem}.key")
    _write_cert(cert, pair.cert)
    _write_key(key, pair.key)
    return pair


def generate_pki(directory: Path, service_ip: str = "10.0.0.1") -> PKI:
    """Create a fresh CA and every leaf certificate under ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    ca, ca_key, ca_cert = _make_ca(directory)
    local_dns = ("localhost",)
    local_ips = ("127.0.0.1",)
    apiserver = _issue(
        directory,
        "apiserver",
        ca_key,
        ca_cert,
        "kube-apiserver",
        dns=(*local_dns, *KUBERNETES_SERVICE_NAMES),
        ips=(*local_ips, service_ip),
        server=True,
    )
    admin = _issue(
        directory, "admin", ca_key, ca_cert, "optsched-e2e-admin", org="system:masters", client=True
    )
    webhook = _issue(
        directory, "webhook", ca_key, ca_cert, "kueue-webhook", dns=local_dns, ips=local_ips, server=True
    )
    # Service-account tokens are signed with RSA: every client library verifies RS256.
    sa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    sa_key, sa_pub = directory / "sa.key", directory / "sa.pub"
    _write_key(sa, sa_key)
    sa_pub.write_bytes(
        sa.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return PKI(ca=ca, apiserver=apiserver, admin=admin, webhook=webhook, sa_key=sa_key, sa_pub=sa_pub)
