"""One replica of the controller: client, metrics, Lease, webhook and loop, started and stopped in order.

``optsched run`` parses its flags into a :class:`~optsched.controller.options.Replica`
and hands it to :func:`run_replica`; nothing here reads flags or the environment. Start-up
order: connect (a bad kubeconfig fails here, before anything listens),
metrics and liveness, the Lease (tried once before the first cycle, so a
second replica does not act at start), the webhook, then the loop. Shutdown
undoes it: informers stop, the Lease is released so the other replica takes
over at once; if none does, this was the last replica and our
AdmissionChecks are set inactive (best effort); the webhook and the metrics
endpoint stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass

from optsched.controller.cert_reload import ReloadingContext
from optsched.controller.dra_index import LiveFacts
from optsched.controller.health import Heartbeat, liveness_bound
from optsched.controller.leader import LeaderElector
from optsched.controller.loop import Controller, default_planner
from optsched.controller.metrics import Metrics
from optsched.controller.metrics_server import MetricsServer, on_loop, serving_tls
from optsched.controller.options import MetricsOptions, Replica, WebhookOptions
from optsched.controller.queue_verdicts import QueueVerdicts
from optsched.controller.scrape_auth import ScrapeAuth
from optsched.controller.serving_certs import ServingCertificates
from optsched.controller.webhook_server import WebhookServer
from optsched.errors import InputError
from optsched.kube.client import Client, Unreachable

log = logging.getLogger("optsched.run")

CONNECT_PATIENCE_S = 120.0
"""How long a starting replica waits for an API server that does not answer before it gives up."""
WITHDRAW_TIMEOUT_S = 10.0
"""At most this long (after waiting for a handover) is spent on shutdown setting our checks inactive."""


async def run_replica(kubeconfig: str | None, replica: Replica) -> int:
    """Run until SIGINT/SIGTERM (or one cycle); the process exit code."""
    client = await _connect(kubeconfig, replica)
    metrics = Metrics()
    heartbeat = Heartbeat(liveness_bound(replica.options, replica.settings, replica.request_timeout))
    endpoint = None
    if replica.metrics.port and not replica.once:
        endpoint = _serve_metrics(replica.metrics, client, metrics, heartbeat)
    elector = None
    if replica.lease is not None and not replica.options.dry_run:
        elector = LeaderElector(client, replica.lease, replica.identity)
    controller = Controller(
        client,
        replica.options,
        planner=default_planner(replica.settings),
        metrics=metrics,
        is_leader=_leadership(elector, metrics),
        heartbeat=heartbeat,
    )
    stop = _stop_on_signals()
    webhook = None
    if replica.webhook.port:
        loop = asyncio.get_running_loop()
        dra = LiveFacts(controller.dra_index, client, loop, claims=replica.options.dra_claims)
        webhook = await _start_webhook(replica.webhook, client, replica, stop, dra)
    tasks = await _follow_leadership(elector, controller, stop)
    try:
        return await controller.run(stop, once=replica.once)
    finally:
        stop.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        led = elector.is_leader if elector is not None else True
        if elector is not None:
            await elector.release()
        if led and not replica.once and not replica.options.dry_run:
            await _withdraw_if_last(controller, elector)
        if webhook is not None:
            await webhook.stop()
        if endpoint is not None:
            endpoint.stop()


def _serve_metrics(
    options: MetricsOptions, client: Client, metrics: Metrics, heartbeat: Heartbeat
) -> MetricsServer:
    """``/metrics`` and ``/healthz``: over HTTPS with each scrape reviewed by the API server, or plain."""
    tls = serving_tls(options.cert_dir) if options.secure else None
    authorize = on_loop(ScrapeAuth(client), asyncio.get_running_loop()) if options.secure else None
    try:
        endpoint = MetricsServer(
            metrics.registry,
            heartbeat.health,
            host=options.host,
            port=options.port,
            tls=tls,
            authorize=authorize,
        )
    except OSError as exc:
        raise InputError(
            f"cannot serve metrics on {options.host}:{options.port}: {exc.strerror or exc}"
        ) from exc
    endpoint.start()
    mode = "HTTPS, scrapes authenticated and authorized" if options.secure else "plain HTTP"
    log.info("metrics and /healthz on %s:%d (%s)", options.host, endpoint.port, mode)
    return endpoint


async def _withdraw_if_last(controller: Controller, elector: LeaderElector | None) -> None:
    """Set our AdmissionChecks inactive unless another replica takes the Lease over (best effort)."""
    handover_s = elector.lease.renew_every_s + 1 if elector is not None else 0.0
    try:
        async with asyncio.timeout(handover_s + WITHDRAW_TIMEOUT_S):
            if elector is not None and await elector.taken_over(handover_s):
                return
            await controller.checks.withdraw()
    except TimeoutError:
        log.warning("shutdown: our AdmissionChecks could not be set inactive in time")


async def _connect(kubeconfig: str | None, replica: Replica) -> Client:
    """Connect, waiting out an API server that does not answer yet (a restart) for up to
    :data:`CONNECT_PATIENCE_S`; a kubeconfig that cannot be used fails at once."""
    deadline = asyncio.get_running_loop().time() + CONNECT_PATIENCE_S
    backoff = 1.0
    while True:
        try:
            return await Client.connect(kubeconfig, request_timeout=replica.request_timeout)
        except Unreachable as exc:
            if asyncio.get_running_loop().time() + backoff > deadline:
                raise
            log.warning("%s; trying again in %.0fs", exc, backoff)
        await asyncio.sleep(backoff)
        backoff = min(backoff * 2, 15.0)


def _leadership(elector: LeaderElector | None, metrics: Metrics) -> Callable[[], bool]:
    def is_leader() -> bool:
        leading = elector.is_leader if elector is not None else True
        metrics.leader.set(1 if leading else 0)
        return leading

    return is_leader


def _stop_on_signals() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    return stop


async def _follow_leadership(
    elector: LeaderElector | None, controller: Controller, stop: asyncio.Event
) -> list[asyncio.Task[None]]:
    """Try for the Lease before the first cycle, keep renewing it, and wake the controller on a change."""
    if elector is None:
        return []
    await elector.try_once()

    async def wake_on_change() -> None:
        while not stop.is_set():
            await elector.changed.wait()
            elector.changed.clear()
            controller.wake()

    return [asyncio.create_task(elector.run(stop)), asyncio.create_task(wake_on_change())]


@dataclass
class _Webhook:
    """The webhook of this replica: its server and the background tasks that keep its answers current."""

    server: WebhookServer
    tasks: list[asyncio.Task[None]]

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        self.server.stop()


async def _start_webhook(
    webhook: WebhookOptions, client: Client, replica: Replica, stop: asyncio.Event, dra: LiveFacts
) -> _Webhook:
    """Serve the webhook: certificates from ``--webhook-cert-dir`` or our Secret, verdicts refreshed."""
    tasks: list[asyncio.Task[None]] = []
    if webhook.cert_dir:
        cert = os.path.join(webhook.cert_dir, "tls.crt")
        key = os.path.join(webhook.cert_dir, "tls.key")
    else:
        certificates = ServingCertificates(webhook, client, dry_run=replica.options.dry_run)
        await certificates.start()
        cert, key = certificates.cert_file, certificates.key_file
        tasks.append(asyncio.create_task(certificates.run(stop)))
    verdicts = QueueVerdicts(client, replica.options.check_names)
    tasks.append(asyncio.create_task(verdicts.run(stop)))
    context = ReloadingContext(cert, key)
    server = WebhookServer("0.0.0.0", webhook.port, context, verdicts.current, dra=dra.facts)
    server.start()
    log.info("webhook serving on :%d", server.port)
    return _Webhook(server, tasks)
