"""``optsched bench trace|topology|scale|agent|mig``: the benchmark verbs.

``register`` plugs them into the main ``optsched`` parser; ``main`` runs them
stand-alone (``python -m optsched.bench.cli trace ...``) with the same exit
codes: 0 success, 2 bad input, 1 internal error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from optsched.bench.mig_options import register_mig
from optsched.bench.options import DEFAULT_OUT, TRACE_POLICIES, register_scale
from optsched.bench.trace_data import WORKLOADS
from optsched.errors import InputError


def _add_output(p: argparse.ArgumentParser, out_help: str) -> None:
    """Where results go and what is drawn: the same three options, last, on both simulation verbs."""
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help=out_help)
    p.add_argument("--no-plots", action="store_true", help="skip the PNG figures")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def _add_trace(sub: Any) -> None:
    p = sub.add_parser(
        "trace",
        help="replay the Alibaba GPU trace the FGD way and compare with the authors' results",
        description="Replay a trace workload (GPU nodes only, tasks inflated to 130%% of capacity, "
        "shuffled by seed, placed one at a time, never leaving) and put the results next to the FGD "
        "authors' own.",
    )
    p.add_argument(
        "--trace-dir",
        type=Path,
        default=None,
        help="folder with the openb CSVs; default ../shared/traces/alibaba-gpu-v2023 next to the repo",
    )
    p.add_argument(
        "--expected-dir",
        type=Path,
        default=None,
        help="the FGD authors' result tables; default fgd-atc23-expected-results beside --trace-dir",
    )
    p.add_argument(
        "--workload",
        default="default",
        help=f"comma-separated workloads, or 'all' ({', '.join(WORKLOADS)}); default 'default'",
    )
    p.add_argument(
        "--seeds", default="42-51", help="seeds, e.g. 42-51 (the authors' ten) or 42; default 42-51"
    )
    p.add_argument(
        "--policies",
        default="fgd,bestfit,firstfit",
        help=f"comma-separated, from {', '.join(TRACE_POLICIES)}; default fgd,bestfit,firstfit",
    )
    p.add_argument(
        "--batch",
        type=int,
        default=1,
        help="1 = online; N > 1 lets the optimizer place the next N arrived tasks together",
    )
    p.add_argument(
        "--batch-time-limit",
        type=float,
        default=1.0,
        help="CP-SAT budget per batch in deterministic seconds (repeatable whatever the load); default 1",
    )
    p.add_argument(
        "--batch-objective",
        choices=("fragmentation", "opened-gpus"),
        default="fragmentation",
        help="what a batch window minimises after placing the most GPU demand: the FGD fragmentation of "
        "the nodes it touches (default), or whole free GPUs opened for shares (the earlier window)",
    )
    p.add_argument(
        "--ratio", type=float, default=1.3, help="inflate demand to this share of capacity; default 1.3"
    )
    p.add_argument(
        "--limit-pods", type=int, default=None, help="use only the first N tasks (by name): quick runs"
    )
    _add_output(p, "results folder (merged across runs); default bench-results/")
    p.set_defaults(func=run_trace_command)


def _add_topology(sub: Any) -> None:
    p = sub.add_parser(
        "topology",
        help="synthetic modern cluster with arrivals and departures: NVLink, racks, gang wait, stranded GPUs",
        description="Simulate a generated queue of 1-8-GPU pods and multi-pod gangs arriving and leaving "
        "on a synthetic H100/H200/A100/NVL72 cluster, under each policy.",
    )
    p.add_argument("--nodes", type=int, default=512, help="nodes in the synthetic cluster; default 512")
    p.add_argument("--jobs", type=int, default=1500, help="jobs arriving over the run; default 1500")
    p.add_argument("--seeds", default="1", help="seeds, e.g. 1-3; default 1")
    p.add_argument(
        "--policies",
        default="optimizer,tas,bestfit,fgd,leastallocated",
        help="comma-separated; default optimizer,tas,bestfit,fgd,leastallocated",
    )
    p.add_argument(
        "--load",
        type=float,
        default=1.1,
        help="offered GPU load relative to capacity; default 1.1 (a queue forms)",
    )
    p.add_argument(
        "--time-limit",
        type=float,
        default=2.0,
        help="optimizer search budget per cycle in CP-SAT deterministic seconds (repeatable); default 2",
    )
    _add_output(p, "results folder; default bench-results/")
    p.set_defaults(func=run_topology_command)


def _add_scale(sub: Any) -> None:
    p = sub.add_parser(
        "scale",
        help="policies against bounds on a large contended snapshot: GPUs admitted, racks, NVLink, time",
        description="Plan a generated snapshot (by default a live-looking cluster whose queue asks "
        "1.2-1.5x the free GPUs) with each policy and print each quality figure next to a bound no plan "
        "can beat, and the share of the distance from the best greedy policy to it the optimizer closes.",
    )
    register_scale(p)
    p.set_defaults(func=run_scale_command)


def _add_agent(sub: Any) -> None:
    p = sub.add_parser("agent", help="one node agent process serving many simulated nodes: time and memory")
    p.add_argument(
        "--nodes", type=int, default=1000, help="simulated nodes without --kubeconfig (default 1000)"
    )
    p.add_argument("--hardware", default="dgx-h100", help="hardware profile (file or shipped name)")
    p.add_argument("--passes", type=int, default=3, help="passes over every node (default 3)")
    p.add_argument("--kubeconfig", default=None, help="run against this cluster, serving every node in it")
    p.add_argument("--heartbeat", type=float, default=60.0, help="NodeGPUs heartbeat seconds (default 60)")
    p.set_defaults(func=run_agent_command)


def _add_mig(sub: Any) -> None:
    p = sub.add_parser(
        "mig",
        help="MIG layouts under a trace with arrivals and departures: static, best fit, first fit, optimizer",
        description="Serve a MIG request trace built from the Alibaba openb trace on A100-80GB and H100-80GB "
        "pools with static layouts, per-GPU best fit, DRA-style first fit and the optimizer.",
    )
    register_mig(p)
    p.set_defaults(func=run_mig_command)


def register(subparsers: Any) -> None:
    """Add ``bench`` with ``trace``, ``topology``, ``scale``, ``agent`` and ``mig`` to the main parser."""
    bench = subparsers.add_parser(
        "bench", help="benchmarks: trace replay, topology, solver scale, node agent, MIG layouts"
    )
    sub = bench.add_subparsers(dest="bench_command", metavar="BENCH")
    _add_trace(sub)
    _add_topology(sub)
    _add_scale(sub)
    _add_agent(sub)
    _add_mig(sub)
    bench.set_defaults(func=lambda _args: _missing_verb(bench))


def _missing_verb(parser: argparse.ArgumentParser) -> int:
    """``bench`` without a verb is a usage error: its help, exit 2."""
    parser.print_help(sys.stderr)
    return 2


def run_agent_command(args: argparse.Namespace) -> int:
    """``optsched bench agent``."""
    # Deferred: the agent's modules are loaded only for this verb.
    from optsched.bench.agent import run_agent_bench

    return run_agent_bench(args)


def run_mig_command(args: argparse.Namespace) -> int:
    """``optsched bench mig``."""
    # Deferred: the optimizer plans through optsched.planning (ortools), plots need matplotlib.
    from optsched.bench.mig_command import run_mig

    return run_mig(args)


def run_trace_command(args: argparse.Namespace) -> int:
    """``optsched bench trace``."""
    # Deferred: the replay loads ortools (batch windows) and matplotlib (plots); --help stays fast.
    from optsched.bench.trace_command import run_trace_command as run

    return run(args)


def run_topology_command(args: argparse.Namespace) -> int:
    """``optsched bench topology``."""
    # Deferred: each cycle is planned through optsched.planning (ortools), plots need matplotlib.
    from optsched.bench.topology_command import run_topology_command as run

    return run(args)


def run_scale_command(args: argparse.Namespace) -> int:
    """``optsched bench scale``."""
    # Deferred: every policy plans through optsched.planning, which loads ortools.
    from optsched.bench.scale import run_scale

    return run_scale(args)


def main(argv: Sequence[str] | None = None) -> int:
    """Stand-alone entry point: ``python -m optsched.bench.cli trace ...``."""
    parser = argparse.ArgumentParser(prog="optsched")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an internal error")
    subparsers = parser.add_subparsers(dest="command")
    register(subparsers)
    try:
        args = parser.parse_args(["bench", *(argv if argv is not None else sys.argv[1:])])
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    try:
        return int(args.func(args))
    except InputError as exc:
        print(f"optsched: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("optsched: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if args.debug:
            raise
        print(f"optsched: internal error: {type(exc).__name__}: {exc} (run with --debug)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
