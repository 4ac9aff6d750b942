"""The webhook certificate kept in a Secret, shared by every replica and renewed before it expires.

Used when no ``--webhook-cert-dir`` is given. At start a replica loads the
Secret, or creates it (the loser of a creation race gets 409 and loads the
winner's). Every ``check_every_s`` it reads the Secret again:

- a leaf within :data:`~optsched.controller.certs.RENEW_BEFORE` of expiry is
  renewed by whichever replica sees it first (an update guarded by the
  Secret's resourceVersion, so two replicas never both renew: the loser reads
  the winner's);
- a Secret whose certificate differs from the one served (renewed here or by
  another replica) is adopted: first the ``caBundle`` of the
  MutatingWebhookConfiguration is made to trust its CA *and* the previous
  one, then the files the server reads are rewritten, and the server's
  :class:`~optsched.controller.cert_reload.ReloadingContext` picks them up.

A replica never serves a certificate the ``caBundle`` may not trust yet: when
the bundle cannot be written, it keeps serving the old one and tries again.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import logging
import tempfile
from dataclasses import dataclass
from typing import Any

from optsched.controller.certs import (
    RENEW_BEFORE,
    VALIDITY,
    TlsMaterial,
    ca_bundle_patch,
    generate,
    needs_renewal,
    renewed,
    service_dns_names,
)
from optsched.controller.clock import Clock, system_clock
from optsched.controller.options import WebhookOptions
from optsched.kube.client import JSON_PATCH, ApiError, Client

log = logging.getLogger("optsched.webhook")

WEBHOOK_API = "admissionregistration.k8s.io/v1"


@dataclass(frozen=True)
class Rotation:
    """How often the Secret is checked and how long certificates live."""

    check_every_s: float = 300.0
    renew_before: dt.timedelta = RENEW_BEFORE
    validity: dt.timedelta = VALIDITY


class ServingCertificates:
    """The Secret-backed serving certificate of one replica, and the files its server reads."""

    def __init__(
        self,
        webhook: WebhookOptions,
        client: Client,
        *,
        dry_run: bool = False,
        rotation: Rotation = Rotation(),
        clock: Clock = system_clock,
        directory: str | None = None,
    ) -> None:
        self.webhook, self.client, self.dry_run = webhook, client, dry_run
        self.rotation, self.clock = rotation, clock
        self.directory = directory or tempfile.mkdtemp(prefix="optsched-webhook-")
        self.served: TlsMaterial | None = None
        self.cert_file, self.key_file = f"{self.directory}/tls.crt", f"{self.directory}/tls.key"

    @property
    def dns_names(self) -> list[str]:
        return service_dns_names(self.webhook.service, self.webhook.namespace)

    async def start(self) -> None:
        """Load (or create) the Secret, renew it if due, and write the files: ready to serve."""
        await self.sync()
        if self.served is None:  # the bundle could not be written: serve what is stored anyway
            material, _ = await self._stored_or_created()
            material.write(self.directory)
            self.served = material

    async def sync(self) -> None:
        """One check: renew the stored certificate if due, and adopt it if it is not the one served."""
        material, version = await self._stored_or_created()
        if needs_renewal(material, self.clock(), self.rotation.renew_before) and not self.dry_run:
            material = await self._renew(material, version)
        if material == self.served:
            return
        if not self.dry_run and not await self._trust(material):
            return
        material.write(self.directory)
        self.served = material
        log.info("webhook serving the certificate from Secret %s", self.webhook.secret)

    async def run(self, stop: asyncio.Event) -> None:
        """Check every ``check_every_s`` until ``stop`` is set; a failed check is retried next time."""
        while not stop.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.rotation.check_every_s)
            if stop.is_set():
                return
            try:
                await self.sync()
            except (ApiError, ValueError) as exc:
                log.warning("webhook certificate check failed, trying again later: %s", exc)

    async def _stored(self) -> tuple[TlsMaterial, str]:
        secret = await self.client.get("v1", "secrets", self.webhook.secret, namespace=self.webhook.namespace)
        version = str((secret.get("metadata") or {}).get("resourceVersion", ""))
        return TlsMaterial.from_secret(secret), version

    async def _stored_or_created(self) -> tuple[TlsMaterial, str]:
        try:
            return await self._stored()
        except ApiError as exc:
            if not exc.not_found:
                raise
        # A Secret deleted under running replicas: keep trusting the CA they still serve.
        previous = self.served.ca_pem if self.served is not None else await self._trusted_ca()
        material = generate(
            self.dns_names, validity=self.rotation.validity, now=self.clock(), previous_ca_pem=previous
        )
        try:
            created = await self.client.create(
                "v1", "secrets", self._secret(material), namespace=self.webhook.namespace
            )
        except ApiError as exc:
            if not exc.conflict:
                raise
            return await self._stored()  # another replica stored its certificate first: serve that one
        return material, str((created.get("metadata") or {}).get("resourceVersion", ""))

    async def _renew(self, material: TlsMaterial, version: str) -> TlsMaterial:
        fresh = renewed(material, self.dns_names, validity=self.rotation.validity, now=self.clock())
        body = self._secret(fresh)
        body["metadata"]["resourceVersion"] = version
        try:
            await self.client.replace(
                "v1", "secrets", self.webhook.secret, body, namespace=self.webhook.namespace
            )
        except ApiError as exc:
            if not exc.conflict:
                raise
            return (await self._stored())[0]  # another replica renewed first: adopt its certificate
        log.info("webhook certificate in Secret %s renewed", self.webhook.secret)
        return fresh

    async def _trust(self, material: TlsMaterial) -> bool:
        """Make the webhook configuration trust ``material``'s CA bundle; False when that failed."""
        try:
            config = await self.client.get(WEBHOOK_API, "mutatingwebhookconfigurations", self.webhook.config)
            ops = ca_bundle_patch(config, material.ca_bundle)
            if ops:
                await self.client.patch(
                    WEBHOOK_API,
                    "mutatingwebhookconfigurations",
                    self.webhook.config,
                    ops,
                    content_type=JSON_PATCH,
                )
        except ApiError as exc:
            log.warning(
                "cannot set caBundle on MutatingWebhookConfiguration %s: %s", self.webhook.config, exc
            )
            return False
        return True

    async def _trusted_ca(self) -> bytes:
        """The first CA the webhook configuration trusts now (empty when none or unreadable)."""
        try:
            config = await self.client.get(WEBHOOK_API, "mutatingwebhookconfigurations", self.webhook.config)
        except ApiError:
            return b""
        for webhook in config.get("webhooks") or []:
            client_config = webhook.get("clientConfig") if isinstance(webhook, dict) else None
            bundle = client_config.get("caBundle") if isinstance(client_config, dict) else None
            if isinstance(bundle, str) and bundle:
                return first_certificate(bundle)
        return b""

    def _secret(self, material: TlsMaterial) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/tls",
            "metadata": {"name": self.webhook.secret, "namespace": self.webhook.namespace},
            "data": material.secret_data(),
        }


def first_certificate(bundle_b64: str) -> bytes:
    """The first PEM certificate of a base64 ``caBundle`` (empty when it holds none)."""
    try:
        pem = base64.b64decode(bundle_b64)
    except ValueError:
        return b""
    end = b"-----END CERTIFICATE-----"
    head, found, _ = pem.partition(end)
    return head + found + b"\n" if found and b"-----BEGIN CERTIFICATE-----" in head else b""
