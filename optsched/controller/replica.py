"""One replica of the controller: client, metrics, Lease, webhook and loop, started and stopped in order.

``optsched run`` parses its flags into a :class:`~optsched.controller.options.Replica`
and hands it to :func:`run_replica`; nothing here reads flags or the environment. Start-up
order: connect (a bad kubeconfig fails here, before anything listens),
metrics, the Lease (tried once before the first cycle, so a second replica
does not act at start), the webhook, then the loop. Shutdown undoes it:
watches stop, the Lease is released so the other replica takes over at once,
the webhook stops.
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
from optsched.controller.leader import LeaderElector
from optsched.controller.loop import Controller, default_planner
from optsched.controller.metrics import Metrics
from optsched.controller.options import Replica, WebhookOptions
from optsched.controller.queue_verdicts import QueueVerdicts
from optsched.controller.serving_certs import ServingCertificates
from optsched.controller.webhook_server import WebhookServer
from optsched.kube.client import Client

log = logging.getLogger("optsched.run")


async def run_replica(kubeconfig: str | None, replica: Replica) -> int:
    """Run until SIGINT/SIGTERM (or one cycle); the process exit code."""
    client = await Client.connect(kubeconfig)
    metrics = Metrics()
    if replica.metrics_port and not replica.once:
        metrics.serve(replica.metrics_port)
    elector = None
    if replica.lease is not None and not replica.options.dry_run:
        elector = LeaderElector(client, replica.lease, replica.identity)
    controller = Controller(
        client,
        replica.options,
        planner=default_planner(replica.settings),
        metrics=metrics,
        is_leader=_leadership(elector, metrics),
    )
    stop = _stop_on_signals()
    webhook = None
    if replica.webhook.port:
        webhook = await _start_webhook(replica.webhook, client, replica, stop)
    tasks = await _follow_leadership(elector, controller, stop)
    try:
        return await controller.run(stop, once=replica.once)
    finally:
        stop.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if elector is not None:
            await elector.release()
        if webhook is not None:
            await webhook.stop()


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
    webhook: WebhookOptions, client: Client, replica: Replica, stop: asyncio.Event
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
    server = WebhookServer("0.0.0.0", webhook.port, ReloadingContext(cert, key), verdicts.current)
    server.start()
    log.info("webhook serving on :%d", server.port)
    return _Webhook(server, tasks)
