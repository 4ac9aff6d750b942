"""``optsched bench agent``: one agent process serving many simulated nodes, measured.

Offline (no ``--kubeconfig``) it runs the agent's passes for ``--nodes``
simulated nodes without an API server: discovery, health, the emulated
device plugin and the published values. With ``--kubeconfig`` it runs the
real runner against a cluster (every node there served with the given
profile), writes included. Either way it prints per-node discovery time
(median and p95 over all nodes and passes), wall and CPU seconds per pass and
per node, and the process's resident memory before and after, per node.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from optsched.agent.cycle import NodeAgent, NodeView
from optsched.agent.held import EmulatedHeld
from optsched.agent.metrics import AgentMetrics
from optsched.agent.profile import resolve_profiles
from optsched.agent.serve import AgentFactory, ServeOptions, simulated_backend


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _offline(options: ServeOptions, nodes: int, passes: int) -> tuple[list[float], list[float], list[float]]:
    (profile,) = options.profiles[:1]
    agents = [
        NodeAgent(
            f"sim-{i:04d}",
            simulated_backend(profile, f"sim-{i:04d}", options),
            EmulatedHeld(),
            "simulated",
            None,
            simulated=True,
        )
        for i in range(nodes)
    ]
    discovery: list[float] = []
    walls: list[float] = []
    cpus: list[float] = []
    for number in range(passes):
        started, cpu = time.perf_counter(), _cpu()
        for agent in agents:
            view = NodeView({"metadata": {"name": agent.node, "labels": {}}}, None)
            discovery.append(agent.cycle(view).discovery_seconds)
        walls.append(time.perf_counter() - started)
        cpus.append(_cpu() - cpu)
        print(f"pass {number + 1}/{passes}: {walls[-1]:.2f} s", file=sys.stderr)
    return discovery, walls, cpus


def _online(
    options: ServeOptions, kubeconfig: str, passes: int, heartbeat_s: float
) -> tuple[list[float], list[float], list[float], int]:
    # The API client is only needed when a cluster is named.
    from optsched.agent.run import AgentRunner
    from optsched.kube.client import Client
    from optsched.kube.writer import Writer

    async def go() -> tuple[list[float], list[float], list[float], int]:
        client = await Client.connect(kubeconfig)
        runner = AgentRunner(
            client,
            Writer(client, field_manager="optsched-agent"),
            AgentFactory(options),
            AgentMetrics(),
            heartbeat_s=heartbeat_s,
        )
        discovery: list[float] = []
        walls: list[float] = []
        cpus: list[float] = []
        served = 0
        for number in range(passes):
            started, cpu = time.perf_counter(), _cpu()
            reports = await runner.pass_once()
            walls.append(time.perf_counter() - started)
            cpus.append(_cpu() - cpu)
            discovery.extend(r.discovery_seconds for r in reports)
            served = len(reports)
            print(f"pass {number + 1}/{passes}: {served} nodes, {walls[-1]:.2f} s", file=sys.stderr)
        return discovery, walls, cpus, served

    return asyncio.run(go())


def run_agent_bench(args: argparse.Namespace) -> int:
    profiles = tuple(resolve_profiles(args.hardware))
    with tempfile.TemporaryDirectory(prefix="optsched-agent-bench-") as state:
        options = ServeOptions(simulate=True, profiles=profiles[:1], state_dir=Path(state))
        rss_before = _rss_mib()
        if args.kubeconfig:
            discovery, walls, cpus, nodes = _online(options, args.kubeconfig, args.passes, args.heartbeat)
        else:
            discovery, walls, cpus = _offline(options, args.nodes, args.passes)
            nodes = args.nodes
        rss_after = _rss_mib()
    _report(nodes, discovery, walls, cpus, rss_before, rss_after, "cluster" if args.kubeconfig else "offline")
    return 0


def _report(
    nodes: int,
    discovery: list[float],
    walls: list[float],
    cpus: list[float],
    before: float,
    after: float,
    mode: str,
) -> None:
    ordered = sorted(discovery) or [0.0]
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    per_node = max(nodes, 1)
    lines: list[tuple[str, Any]] = [
        ("mode", mode),
        ("nodes served", nodes),
        ("passes", len(walls)),
        ("discovery per node, median ms", f"{statistics.median(ordered) * 1000:.3f}"),
        ("discovery per node, p95 ms", f"{p95 * 1000:.3f}"),
        (
            "pass wall s (first, median of the rest)",
            f"{walls[0]:.2f}, {statistics.median(walls[1:] or walls):.2f}",
        ),
        ("CPU ms per node per pass (median)", f"{statistics.median(cpus) / per_node * 1000:.3f}"),
        ("RSS MiB before / after", f"{before:.1f} / {after:.1f}"),
        ("RSS KiB per node (after - before)", f"{(after - before) * 1024 / per_node:.1f}"),
    ]
    for label, value in lines:
        print(f"{label:42} {value}")
