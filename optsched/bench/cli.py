"""``optsched bench trace|topology|scale``: the benchmark verbs.

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

from optsched.bench.options import DEFAULT_OUT, TRACE_POLICIES, parse_policies, parse_seeds
from optsched.errors import InputError


def _add_trace(sub: Any) -> None:
    from optsched.bench.trace_data import WORKLOADS

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
        "--ratio", type=float, default=1.3, help="inflate demand to this share of capacity; default 1.3"
    )
    p.add_argument(
        "--limit-pods", type=int, default=None, help="use only the first N tasks (by name): quick runs"
    )
    p.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help="results folder (merged across runs); default bench-results/",
    )
    p.add_argument("--no-plots", action="store_true", help="skip the PNG figures")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
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
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="results folder; default bench-results/")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG figures")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.set_defaults(func=run_topology_command)


def _add_scale(sub: Any) -> None:
    try:
        from optsched.bench.scale import register_scale, run_scale
    except ImportError:
        return
    p = sub.add_parser("scale", help="solver speed and quality on a large synthetic queue")
    register_scale(p)
    p.set_defaults(func=run_scale)


def register(subparsers: Any) -> None:
    """Add ``bench`` with ``trace``, ``topology`` and ``scale`` to the main parser."""
    bench = subparsers.add_parser("bench", help="benchmarks: trace replay, topology, solver scale")
    sub = bench.add_subparsers(dest="bench_command", metavar="BENCH")
    _add_trace(sub)
    _add_topology(sub)
    _add_scale(sub)
    bench.set_defaults(func=lambda _args: _missing_verb(bench))


def _missing_verb(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def resolve_trace_dir(given: Path | None) -> Path:
    from optsched.bench.trace import default_trace_dir

    trace_dir = given if given is not None else default_trace_dir()
    if not trace_dir.is_dir():
        hint = "" if given is not None else " (the default, next to the repository); pass --trace-dir"
        raise InputError(f"trace folder not found{hint}", source=str(trace_dir), field="--trace-dir")
    return trace_dir


def run_trace_command(args: argparse.Namespace) -> int:
    from optsched.bench.expected import FRAGMENTATION_FILE, OUR_TWIN, default_expected_dir, load_expected
    from optsched.bench.plots import plot_unallocated
    from optsched.bench.report import headline_table, idle_table, spread_check, workloads_table
    from optsched.bench.results import StoredRun, save_runs, stored
    from optsched.bench.trace import run_policy_seeds
    from optsched.bench.trace_data import WORKLOADS

    trace_dir = resolve_trace_dir(args.trace_dir)
    seeds = parse_seeds(args.seeds)
    policies = parse_policies(args.policies, TRACE_POLICIES)
    workloads = list(WORKLOADS) if args.workload == "all" else [w.strip() for w in args.workload.split(",")]
    for workload in workloads:
        if workload not in WORKLOADS and not (trace_dir / f"openb_pod_list_{workload}.csv").is_file():
            raise InputError(
                f"unknown workload {workload!r}; choose from {', '.join(WORKLOADS)}", field="--workload"
            )
    if args.batch < 1:
        raise InputError("must be at least 1", field="--batch")
    if args.batch > 1 and policies != ["optimizer"]:
        raise InputError(
            "a batch window needs --policies optimizer (the heuristics place one task at a time)",
            field="--batch",
        )
    if "optimizer" in policies and args.batch == 1:
        raise InputError(
            "the optimizer runs with a batch window (--batch N, N > 1); online use a heuristic",
            field="--policies",
        )
    expected_dir = args.expected_dir or default_expected_dir(trace_dir)
    expected = load_expected(expected_dir) if expected_dir.is_dir() else None
    if expected is None:
        print(f"note: no authors' results at {expected_dir}; printing ours only", file=sys.stderr)

    factory = None
    if args.batch > 1:
        from optsched.bench.batch import batch_placer_factory

        factory = batch_placer_factory(time_limit_s=args.batch_time_limit)
    new: list[StoredRun] = []
    for workload in workloads:
        for policy in policies:
            runs = run_policy_seeds(
                trace_dir,
                workload,
                policy,
                seeds,
                ratio=args.ratio,
                batch=args.batch,
                batch_placer_factory=factory,
                limit_pods=args.limit_pods,
                show_progress=not args.no_progress,
            )
            new.extend(stored(run) for run in runs)
    all_runs = save_runs(args.out, new)
    # Tables cover what this command ran, with earlier runs of other policies kept in --out for context.
    ran = {(r.workload, r.policy, r.batch) for r in new}
    shown = [r for r in all_runs if r.workload in workloads]
    for workload in workloads:
        print(f"\n## {workload}: unallocated GPU % (mean ± sd over seeds)\n")
        print(headline_table(workload, [r for r in shown if r.workload == workload], expected))
        idle = idle_table(workload, [r for r in shown if r.workload == workload])
        if idle:
            print(f"\n### {workload}: idle GPUs at the end ({args.ratio:.0%} arrival), mean over seeds\n")
            print(idle)
        if expected is not None:
            print(f"\n### {workload}: our re-implementations inside the authors' seed range?\n")
            print(spread_check(workload, [r for r in shown if r.workload == workload], expected))
    if len({r.workload for r in all_runs}) > 1 or len(workloads) > 1:
        print("\n## all workloads: unallocated GPU % at 100% arrival (mean over seeds)\n")
        print(workloads_table(all_runs, expected))
    if not args.no_plots:
        for workload in workloads:
            twins = {OUR_TWIN[r.policy] for r in shown if r.workload == workload and r.policy in OUR_TWIN}
            authors = tuple(sorted(twins | {"05-BestFit", "06-FGD"}))
            path = plot_unallocated(
                args.out / f"trace-{workload}-unallocated.png",
                workload,
                shown,
                expected,
                author_policies=authors,
            )
            print(f"\nplot: {path}", file=sys.stderr)
            frag_file = expected_dir / FRAGMENTATION_FILE
            path = plot_unallocated(
                args.out / f"trace-{workload}-fragmentation.png",
                workload,
                shown,
                load_expected(expected_dir, FRAGMENTATION_FILE) if frag_file.is_file() else None,
                attr="fragmentation_pct",
                ylabel="fragmented GPU (% of all GPUs, FGD measure)",
                complement=False,
                author_policies=authors,
            )
            print(f"plot: {path}", file=sys.stderr)
    print(
        f"results: {args.out / 'trace-results.json'} ({len(ran)} policy/workload runs added)", file=sys.stderr
    )
    return 0


def run_topology_command(args: argparse.Namespace) -> int:
    from optsched.bench.topology import run_topology_command as run

    return run(args)


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
