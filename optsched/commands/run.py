"""``optsched run``: the in-cluster controller (AdmissionCheck, webhook, ungater, metrics).

Wired into the CLI with :func:`register_run`; :func:`run_command` is the verb.
Exit codes follow every other verb: 0 clean stop, 2 bad usage or kubeconfig,
1 an internal error.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import socket
import warnings
from typing import Any

from optsched.controller.decide import DeferPolicy
from optsched.model.names import DEFAULT_CHECK_NAME, DEFAULT_CONTROLLER_NAME

log = logging.getLogger("optsched.run")


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def register_run(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run the controller: admit planned workloads through a Kueue AdmissionCheck and pin their pods",
        description="Run optsched in the cluster. Every cycle plans all workloads that hold a Kueue quota "
        "reservation and wait on our admission check, admits what the plan admits (check Ready), "
        "keeps the rest waiting with the plan's reasons, and pins each pod of an admitted workload "
        "to its planned node and GPUs.",
    )
    parser.add_argument(
        "--kubeconfig", metavar="PATH", help="kubeconfig (default: in-cluster or ~/.kube/config)"
    )
    parser.add_argument(
        "--check-name",
        action="append",
        metavar="NAME",
        help=f"AdmissionCheck name(s) this controller serves (default: {DEFAULT_CHECK_NAME})",
    )
    parser.add_argument(
        "--controller-name",
        default=DEFAULT_CONTROLLER_NAME,
        metavar="NAME",
        help=f"spec.controllerName of our AdmissionChecks (default: {DEFAULT_CONTROLLER_NAME})",
    )
    parser.add_argument(
        "--interval",
        type=_positive,
        default=10.0,
        metavar="SECONDS",
        help="seconds between cycles when nothing happens (default: 10)",
    )
    parser.add_argument(
        "--debounce",
        type=_positive,
        default=1.0,
        metavar="SECONDS",
        help="wait this long after a watch event before the early cycle (default: 1)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="plan and log every write the loop would send; write nothing"
    )
    parser.add_argument("--once", action="store_true", help="run one cycle and exit")
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=9464,
        metavar="PORT",
        help="Prometheus metrics port (default: 9464; 0 disables)",
    )
    parser.add_argument(
        "--time-limit",
        type=_positive,
        default=10.0,
        metavar="SECONDS",
        help="solver budget per cycle (default: 10)",
    )
    parser.add_argument("--workers", type=int, default=0, metavar="N", help="CP-SAT workers (0: all cores)")
    parser.add_argument(
        "--hold-seconds",
        type=int,
        default=DeferPolicy.hold_seconds,
        metavar="SECONDS",
        help="a deferred workload keeps its quota reservation this long before it is sent "
        "back with Retry (default: %(default)s)",
    )
    parser.add_argument(
        "--retry-after",
        type=int,
        default=DeferPolicy.retry_after_seconds,
        metavar="SECONDS",
        help="requeueAfterSeconds of a Retry (default: %(default)s)",
    )
    parser.add_argument(
        "--leader-elect", action="store_true", help="hold a coordination.k8s.io Lease; only the holder writes"
    )
    parser.add_argument(
        "--lease-namespace",
        default=os.environ.get("POD_NAMESPACE", "optsched-system"),
        metavar="NS",
        help="namespace of the Lease (default: $POD_NAMESPACE or optsched-system)",
    )
    parser.add_argument("--lease-name", default="optsched-leader", metavar="NAME")
    parser.add_argument("--lease-duration", type=int, default=15, metavar="SECONDS")
    parser.add_argument(
        "--identity",
        default=os.environ.get("POD_NAME") or socket.gethostname(),
        help="this replica's name in the Lease (default: $POD_NAME or the host name)",
    )
    parser.add_argument(
        "--webhook-port",
        type=int,
        default=0,
        metavar="PORT",
        help="serve the pod-gating webhook on this port (0: no webhook)",
    )
    parser.add_argument(
        "--webhook-cert-dir",
        metavar="DIR",
        help="tls.crt/tls.key to serve with (e.g. from cert-manager); without it the "
        "certificate is kept in --webhook-secret and the caBundle patched",
    )
    parser.add_argument("--webhook-secret", default="optsched-webhook-tls", metavar="NAME")
    parser.add_argument(
        "--webhook-service",
        default="optsched-webhook",
        metavar="NAME",
        help="Service name the certificate is issued for",
    )
    parser.add_argument(
        "--webhook-config",
        default="optsched-pod-gate",
        metavar="NAME",
        help="MutatingWebhookConfiguration whose caBundle is kept current",
    )
    parser.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    parser.set_defaults(func=run_command)


def run_command(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=getattr(logging, args.log_level, logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.log_level != "DEBUG":
        logging.getLogger("httpx").setLevel(logging.WARNING)
        warnings.filterwarnings("ignore", message="Kubernetes version", category=UserWarning)
    try:
        return asyncio.run(_main(args))
    except KeyboardInterrupt:
        return 0


async def _main(args: argparse.Namespace) -> int:
    from optsched.controller.leader import LeaderElector
    from optsched.controller.loop import Controller, Options, default_planner
    from optsched.controller.metrics import Metrics
    from optsched.kube.client import Client

    client = await Client.connect(args.kubeconfig)
    options = Options(
        kubeconfig=args.kubeconfig,
        check_names=tuple(args.check_name or [DEFAULT_CHECK_NAME]),
        controller_name=args.controller_name,
        interval=args.interval,
        debounce=args.debounce,
        dry_run=args.dry_run,
        policy=DeferPolicy(hold_seconds=args.hold_seconds, retry_after_seconds=args.retry_after),
    )
    metrics = Metrics()
    if args.metrics_port and not args.once:
        metrics.serve(args.metrics_port)
    elector = None
    if args.leader_elect and not args.dry_run:
        elector = LeaderElector(
            client,
            args.lease_namespace,
            args.lease_name,
            args.identity,
            duration_s=args.lease_duration,
            renew_every_s=max(1.0, args.lease_duration / 3),
        )

    def is_leader() -> bool:
        leading = elector.is_leader if elector is not None else True
        metrics.leader.set(1 if leading else 0)
        return leading

    controller = Controller(
        client,
        options,
        planner=default_planner(args.time_limit, args.workers),
        metrics=metrics,
        is_leader=is_leader,
    )
    server = None
    if args.webhook_port:
        server = await _start_webhook(args, client, controller)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    tasks = []
    if elector is not None:
        await elector.try_once()
        tasks.append(asyncio.create_task(elector.run(stop)))

        async def wake_on_leadership() -> None:
            while not stop.is_set():
                await elector.changed.wait()
                elector.changed.clear()
                controller.trigger.set()

        tasks.append(asyncio.create_task(wake_on_leadership()))
    try:
        return await controller.run(stop, once=args.once)
    finally:
        stop.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if elector is not None:
            await elector.release()
        if server is not None:
            server.stop()


async def _start_webhook(args: argparse.Namespace, client: Any, controller: Any) -> Any:
    from optsched.controller.certs import TlsMaterial, ca_bundle_patch, generate, service_dns_names
    from optsched.controller.webhook import WebhookServer
    from optsched.kube.client import ApiError

    if args.webhook_cert_dir:
        cert = os.path.join(args.webhook_cert_dir, "tls.crt")
        key = os.path.join(args.webhook_cert_dir, "tls.key")
    else:
        namespace = args.lease_namespace
        try:
            material = TlsMaterial.from_secret(
                await client.get("v1", "secrets", args.webhook_secret, namespace=namespace)
            )
        except ApiError as exc:
            if not exc.not_found:
                raise
            material = generate(service_dns_names(args.webhook_service, namespace))
            try:
                await client.create(
                    "v1",
                    "secrets",
                    {
                        "apiVersion": "v1",
                        "kind": "Secret",
                        "type": "kubernetes.io/tls",
                        "metadata": {"name": args.webhook_secret, "namespace": namespace},
                        "data": material.secret_data(),
                    },
                    namespace=namespace,
                )
            except ApiError as again:
                if not again.conflict:
                    raise
                material = TlsMaterial.from_secret(
                    await client.get("v1", "secrets", args.webhook_secret, namespace=namespace)
                )
        cert, key = material.write()
        if not args.dry_run:
            try:
                config = await client.get(
                    "admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations", args.webhook_config
                )
                await controller.writer.json_patch(
                    "admissionregistration.k8s.io/v1",
                    "mutatingwebhookconfigurations",
                    args.webhook_config,
                    ca_bundle_patch(config, material.ca_pem),
                )
            except ApiError as exc:
                log.warning(
                    "cannot set caBundle on MutatingWebhookConfiguration %s: %s", args.webhook_config, exc
                )
    server = WebhookServer("0.0.0.0", args.webhook_port, cert, key)
    server.start()
    log.info("webhook serving on :%d", server.port)
    return server
