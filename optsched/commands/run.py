"""``optsched run``: the in-cluster controller (AdmissionCheck, webhook, ungater, metrics).

Wired into the CLI with :func:`register_run`; :func:`run_command` is the verb.
Exit codes follow every other verb: 0 clean stop, 2 bad usage or kubeconfig,
1 an internal error.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import socket
import warnings
from typing import Any

from optsched.commands.common import add_admission_arguments
from optsched.controller.options import (
    DeferPolicy,
    LeaseOptions,
    MetricsOptions,
    Options,
    Replica,
    WebhookOptions,
)
from optsched.settings import Settings

SOLVER = Settings()
"""The solver's defaults, which ``--time-limit`` and ``--workers`` start from."""


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def _flag(text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _bind_address(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``:PORT`` (all addresses) or ``0`` (no endpoint), as controller-runtime spells it."""
    if text.strip() == "0":
        return ("", 0)
    host, sep, port = text.strip().rpartition(":")
    if not sep or not (port.isascii() and port.isdigit()) or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, :PORT or 0, got {text!r}")
    return (host.strip("[]") or MetricsOptions.host, int(port))


def _add_metrics_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=MetricsOptions.port,
        metavar="PORT",
        help="Prometheus metrics and /healthz port (default: %(default)s; 0 disables)",
    )
    parser.add_argument(
        "--metrics-bind-address",
        type=_bind_address,
        metavar="HOST:PORT",
        help="where to serve metrics and /healthz, e.g. 127.0.0.1:9464 or :9464 (0 disables; "
        "overrides --metrics-port)",
    )
    parser.add_argument(
        "--metrics-secure",
        type=_flag,
        nargs="?",
        const=True,
        default=MetricsOptions.secure,
        metavar="BOOL",
        help="serve metrics over HTTPS and let only scrapers whose token the API server accepts and "
        "authorizes for get on /metrics read them (default: %(default)s; /healthz is always open)",
    )
    parser.add_argument(
        "--metrics-cert-dir",
        metavar="DIR",
        help="tls.crt/tls.key for the secure metrics endpoint (e.g. the webhook's); without it a "
        "certificate is made at start",
    )
    parser.add_argument(
        "--request-timeout",
        type=_positive,
        default=Replica.request_timeout,
        metavar="SECONDS",
        help="seconds one API call may take, its answer included (default: %(default)s)",
    )


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
        help=f"AdmissionCheck name(s) this controller serves (default: {', '.join(Options.check_names)})",
    )
    parser.add_argument(
        "--controller-name",
        default=Options.controller_name,
        metavar="NAME",
        help="spec.controllerName of our AdmissionChecks (default: %(default)s)",
    )
    parser.add_argument(
        "--interval",
        type=_positive,
        default=Options.interval,
        metavar="SECONDS",
        help="seconds between cycles when nothing happens (default: %(default)s)",
    )
    parser.add_argument(
        "--debounce",
        type=_positive,
        default=Options.debounce,
        metavar="SECONDS",
        help="a burst of watch events delays its cycle at most this long (default: %(default)s)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="plan and log every write the loop would send; write nothing"
    )
    parser.add_argument("--once", action="store_true", help="run one cycle and exit")
    _add_metrics_arguments(parser)
    parser.add_argument(
        "--time-limit",
        type=_positive,
        default=SOLVER.time_limit_s,
        metavar="SECONDS",
        help="solver budget per cycle (default: %(default)s)",
    )
    parser.add_argument(
        "--workers", type=int, default=SOLVER.workers, metavar="N", help="CP-SAT workers (0: all cores)"
    )
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
        help="requeueAfterSeconds of the first Retry, doubled with each requeue (default: %(default)s)",
    )
    parser.add_argument(
        "--max-retry-after",
        type=int,
        default=DeferPolicy.max_retry_after_seconds,
        metavar="SECONDS",
        help="ceiling of the Retry backoff (default: %(default)s)",
    )
    parser.add_argument(
        "--unschedulable-seconds",
        type=int,
        default=DeferPolicy.unschedulable_seconds,
        metavar="SECONDS",
        help="re-plan a workload whose pinned pod kube-scheduler cannot bind for this long "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--orphan-claim-seconds",
        type=int,
        default=DeferPolicy.orphan_claim_seconds,
        metavar="SECONDS",
        help="delete an optsched ResourceClaim whose pod is gone once it is this old (default: %(default)s)",
    )
    parser.add_argument(
        "--no-dra-claims",
        dest="dra_claims",
        action="store_false",
        help="give no pod a ResourceClaim on DRA nodes: pods there are node-pinned only, their "
        "nvidia.com/gpu served through the DeviceClass's extendedResourceName (enforcement none)",
    )
    parser.add_argument(
        "--no-reject-impossible",
        dest="reject_impossible",
        action="store_false",
        help="requeue a workload that can never fit this cluster instead of rejecting it",
    )
    parser.add_argument(
        "--leader-elect", action="store_true", help="hold a coordination.k8s.io Lease; only the holder writes"
    )
    parser.add_argument(
        "--lease-namespace",
        default=os.environ.get("POD_NAMESPACE", LeaseOptions.namespace),
        metavar="NS",
        help=f"namespace of the Lease (default: $POD_NAMESPACE or {LeaseOptions.namespace})",
    )
    parser.add_argument("--lease-name", default=LeaseOptions.name, metavar="NAME")
    parser.add_argument("--lease-duration", type=int, default=LeaseOptions.duration_s, metavar="SECONDS")
    parser.add_argument(
        "--identity",
        default=os.environ.get("POD_NAME") or socket.gethostname(),
        help="this replica's name in the Lease (default: $POD_NAME or the host name)",
    )
    parser.add_argument(
        "--webhook-port",
        type=int,
        default=WebhookOptions.port,
        metavar="PORT",
        help="serve the pod-gating webhook on this port (0: no webhook)",
    )
    parser.add_argument(
        "--webhook-cert-dir",
        metavar="DIR",
        help="tls.crt/tls.key to serve with (e.g. from cert-manager); without it the "
        "certificate is kept in --webhook-secret and the caBundle patched",
    )
    parser.add_argument("--webhook-secret", default=WebhookOptions.secret, metavar="NAME")
    parser.add_argument(
        "--webhook-service",
        default=WebhookOptions.service,
        metavar="NAME",
        help="Service name the certificate is issued for",
    )
    parser.add_argument(
        "--webhook-config",
        default=WebhookOptions.config,
        metavar="NAME",
        help="MutatingWebhookConfiguration whose caBundle is kept current",
    )
    add_admission_arguments(parser)
    parser.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    parser.set_defaults(func=run_command)


def run_command(args: argparse.Namespace) -> int:
    # Deferred on purpose: the controller loads OR-Tools (through planning) and prometheus,
    # which `optsched --help` and the offline verbs do not need.
    from optsched.controller.replica import run_replica

    logging.basicConfig(
        level=getattr(logging, args.log_level, logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.log_level != "DEBUG":
        logging.getLogger("httpx").setLevel(logging.WARNING)
        warnings.filterwarnings("ignore", message="Kubernetes version", category=UserWarning)
    try:
        return asyncio.run(run_replica(args.kubeconfig, replica_from(args)))
    except KeyboardInterrupt:
        return 0


def options_from(args: argparse.Namespace) -> Options:
    return Options(
        check_names=tuple(args.check_name or Options.check_names),
        controller_name=args.controller_name,
        interval=args.interval,
        debounce=args.debounce,
        dry_run=args.dry_run,
        dra_claims=args.dra_claims,
        policy=DeferPolicy(
            hold_seconds=args.hold_seconds,
            retry_after_seconds=args.retry_after,
            max_retry_after_seconds=args.max_retry_after,
            unschedulable_seconds=args.unschedulable_seconds,
            reject_impossible=args.reject_impossible,
            orphan_claim_seconds=args.orphan_claim_seconds,
        ),
    )


def metrics_from(args: argparse.Namespace) -> MetricsOptions:
    host, port = args.metrics_bind_address or (MetricsOptions.host, args.metrics_port)
    return MetricsOptions(host=host, port=port, secure=args.metrics_secure, cert_dir=args.metrics_cert_dir)


def replica_from(args: argparse.Namespace) -> Replica:
    lease = LeaseOptions(namespace=args.lease_namespace, name=args.lease_name, duration_s=args.lease_duration)
    webhook = WebhookOptions(
        port=args.webhook_port,
        cert_dir=args.webhook_cert_dir,
        secret=args.webhook_secret,
        service=args.webhook_service,
        config=args.webhook_config,
        namespace=args.lease_namespace,
    )
    return Replica(
        identity=args.identity,
        options=options_from(args),
        settings=Settings(
            time_limit_s=args.time_limit,
            workers=args.workers,
            extended_resource_toleration=args.extended_resource_toleration,
        ),
        lease=lease if args.leader_elect else None,
        webhook=webhook,
        metrics=metrics_from(args),
        request_timeout=args.request_timeout,
        once=args.once,
    )
