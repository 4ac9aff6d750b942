"""``optsched agent``: the node agent (a DaemonSet on GPU nodes; one process for many simulated nodes).

``--once --print`` discovers once and writes the ``optsched.io/gpu-topology``
value to stdout and nothing else; it needs no cluster. Otherwise the agent
publishes every ``--interval`` seconds until SIGTERM. Exit codes as every
verb: 0 clean stop, 2 bad usage, a bad hardware profile, no GPUs to read or
an unreachable cluster.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

from optsched.agent.backend import BackendError
from optsched.agent.cycle import NodeView
from optsched.agent.metrics import AgentMetrics
from optsched.agent.profile import HardwareProfile, resolve_profiles
from optsched.agent.serve import DEFAULT_POD_RESOURCES, DEFAULT_STATE_DIR, AgentFactory, ServeOptions
from optsched.errors import InputError


def _xids(text: str) -> frozenset[int]:
    try:
        return frozenset(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected XID numbers such as 13,31, got {text!r}") from None


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not 0 < value <= 86400:
        raise argparse.ArgumentTypeError(f"expected seconds in (0, 86400], got {text}")
    return value


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "agent",
        help="run the node agent: publish GPUs, links, health and held devices; apply MIG layouts",
        description="Discover the node's GPUs (NVML, or a hardware profile with --simulate), and publish "
        "the optsched.io/gpu-topology annotation and the NodeGPUs object; mark GPUs unhealthy on critical "
        "XID errors; report the devices pods really hold; apply NodeGPUs spec.migLayout safely.",
    )
    p.add_argument(
        "--node",
        action="append",
        default=[],
        metavar="NAME",
        help="node to serve (repeatable; default: $NODE_NAME)",
    )
    p.add_argument(
        "--all-nodes",
        action="store_true",
        help="with --simulate: serve every node whose optsched.io/hardware-profile label names a profile",
    )
    p.add_argument(
        "--simulate", action="store_true", help="simulated GPUs from --hardware profiles (KWOK nodes)"
    )
    p.add_argument(
        "--hardware",
        action="append",
        default=[],
        metavar="FILE|NAME",
        help="GPUHardwareProfile file, or the name of a shipped profile (repeatable)",
    )
    p.add_argument("--once", action="store_true", help="one pass, then exit")
    p.add_argument(
        "--print",
        action="store_true",
        dest="print_only",
        help="with --once: print the gpu-topology annotation value to stdout; touch no cluster",
    )
    p.add_argument("--kubeconfig", metavar="PATH", help="kubeconfig (default: in-cluster or ~/.kube/config)")
    p.add_argument(
        "--interval", type=_seconds, default=30.0, metavar="SECONDS", help="seconds between passes"
    )
    p.add_argument(
        "--heartbeat",
        type=_seconds,
        default=60.0,
        metavar="SECONDS",
        help="rewrite NodeGPUs status at least this often",
    )
    p.add_argument(
        "--state-dir",
        type=Path,
        default=DEFAULT_STATE_DIR,
        metavar="DIR",
        help="MIG journal and simulated hardware state (default: %(default)s)",
    )
    p.add_argument(
        "--pod-resources-socket",
        default=DEFAULT_POD_RESOURCES,
        metavar="PATH",
        help="kubelet's PodResources socket (default: %(default)s)",
    )
    p.add_argument(
        "--ignore-xids",
        type=_xids,
        default=frozenset(),
        metavar="LIST",
        help="XIDs to ignore besides the application XIDs 13,31,43,45,68,109",
    )
    p.add_argument("--metrics-port", type=int, default=9401, help="/metrics and /healthz port (0 disables)")
    p.add_argument("--dry-run", action="store_true", help="log the writes instead of sending them")
    p.add_argument("--simulate-crash-after-mig-creates", type=int, default=None, help=argparse.SUPPRESS)
    p.set_defaults(func=agent_command)


def _profiles(args: argparse.Namespace) -> tuple[HardwareProfile, ...]:
    if not args.simulate:
        if args.hardware or args.all_nodes:
            raise InputError("--hardware and --all-nodes need --simulate")
        return ()
    if not args.hardware:
        raise InputError("--simulate needs --hardware FILE (a GPUHardwareProfile) or a shipped profile name")
    return tuple(p for source in args.hardware for p in resolve_profiles(source))


def _nodes(args: argparse.Namespace) -> tuple[str, ...]:
    nodes = tuple(args.node) or ((os.environ["NODE_NAME"],) if os.environ.get("NODE_NAME") else ())
    if args.all_nodes:
        if nodes:
            raise InputError("--all-nodes and --node exclude each other")
        return ()
    if not nodes:
        raise InputError("name the node: --node NAME (or set NODE_NAME), or --all-nodes with --simulate")
    if not args.simulate and len(nodes) > 1:
        raise InputError("a real agent serves one node; several --node need --simulate")
    return nodes


def agent_command(args: argparse.Namespace) -> int:
    profiles = _profiles(args)
    nodes = _nodes(args)
    if args.print_only and not args.once:
        raise InputError("--print needs --once")
    options = ServeOptions(
        simulate=args.simulate,
        profiles=profiles,
        state_dir=None if args.print_only else args.state_dir,
        pod_resources_socket=args.pod_resources_socket,
        ignored_xids=args.ignore_xids,
        crash_after_mig_creates=args.simulate_crash_after_mig_creates,
    )
    if args.print_only:
        return _print_once(options, nodes)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request drowns what matters
    return asyncio.run(_serve(args, options, nodes))


def _print_once(options: ServeOptions, nodes: tuple[str, ...]) -> int:
    if len(nodes) != 1:
        raise InputError("--print describes one node: give exactly one --node")
    node = {"metadata": {"name": nodes[0], "labels": {}}}
    try:
        agent = AgentFactory(options).for_name(nodes[0], node)
        if agent is None:
            raise InputError(f"no hardware profile for node {nodes[0]}")
        report = agent.cycle(NodeView(node, None))
    except BackendError as exc:
        raise InputError(f"cannot read the GPUs: {exc}") from None
    sys.stdout.write(report.annotation + "\n")
    return 0


async def _serve(args: argparse.Namespace, options: ServeOptions, nodes: tuple[str, ...]) -> int:
    # The API client is loaded only when publishing: --print never needs a cluster.
    from optsched.agent.run import AgentRunner, run_forever
    from optsched.kube.client import Client
    from optsched.kube.writer import Writer

    client = await Client.connect(args.kubeconfig)
    metrics = AgentMetrics()
    metrics.interval_s = args.interval
    if args.metrics_port and not args.once:
        metrics.serve(args.metrics_port)
    writer = Writer(client, field_manager="optsched-agent", dry_run=args.dry_run)
    runner = AgentRunner(
        client,
        writer,
        AgentFactory(options),
        metrics,
        nodes=nodes,
        heartbeat_s=args.heartbeat,
        simulated=options.simulate,
    )
    if args.once:
        await runner.pass_once()
        return 0
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    await run_forever(runner, args.interval, stop)
    return 0
