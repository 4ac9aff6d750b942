"""``optsched bench trace``: replay trace workloads, store the runs, print and plot them.

Every option is checked before the first replay starts, so a mistake costs a
one-line error, not a wasted run. Results merge into ``--out`` across runs,
and the tables show what this command ran next to the FGD authors' results.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from optsched.bench.batch import batch_placer_factory
from optsched.bench.batch_frag import frag_placer_factory
from optsched.bench.expected import (
    FRAGMENTATION_FILE,
    OUR_TWIN,
    Expected,
    default_expected_dir,
    load_expected,
)
from optsched.bench.options import TRACE_POLICIES, parse_policies, parse_seeds
from optsched.bench.plots import plot_unallocated
from optsched.bench.report import headline_table, idle_table, spread_check, workloads_table
from optsched.bench.results import StoredRun, save_runs, stored
from optsched.bench.trace import default_trace_dir, run_policy_seeds
from optsched.bench.trace_data import WORKLOADS, pod_file
from optsched.errors import InputError


def run_trace_command(args: argparse.Namespace) -> int:
    """Check the options, replay each workload and policy on every seed, then report."""
    trace_dir = resolve_trace_dir(args.trace_dir)
    seeds = parse_seeds(args.seeds)
    policies = parse_policies(args.policies, TRACE_POLICIES)
    workloads = _workloads(args.workload, trace_dir)
    _check_batch(args.batch, policies)
    expected_dir = args.expected_dir or default_expected_dir(trace_dir)
    expected = load_expected(expected_dir) if expected_dir.is_dir() else None
    if expected is None:
        print(f"note: no authors' results at {expected_dir}; printing ours only", file=sys.stderr)
    new = _replay_all(args, trace_dir, workloads, policies, seeds)
    all_runs = save_runs(args.out, new)
    # Tables cover what this command ran, with earlier runs of other policies kept in --out for context.
    ran = {(r.workload, r.policy, r.batch) for r in new}
    shown = [r for r in all_runs if r.workload in workloads]
    _print_tables(workloads, shown, all_runs, expected, args.ratio)
    if not args.no_plots:
        _plot(args.out, workloads, shown, expected, expected_dir)
    print(
        f"results: {args.out / 'trace-results.json'} ({len(ran)} policy/workload runs added)", file=sys.stderr
    )
    return 0


def resolve_trace_dir(given: Path | None) -> Path:
    """``--trace-dir``, or the default next to the repository; either must be a folder."""
    trace_dir = given if given is not None else default_trace_dir()
    if not trace_dir.is_dir():
        hint = "" if given is not None else " (the default, next to the repository); pass --trace-dir"
        raise InputError(f"trace folder not found{hint}", source=str(trace_dir), field="--trace-dir")
    return trace_dir


def _workloads(text: str, trace_dir: Path) -> list[str]:
    """``all``, or named workloads: the paper's, or any other pod list file in the trace folder."""
    workloads = list(WORKLOADS) if text == "all" else [w.strip() for w in text.split(",")]
    for workload in workloads:
        if workload not in WORKLOADS and not (trace_dir / pod_file(workload)).is_file():
            raise InputError(
                f"unknown workload {workload!r}; choose from {', '.join(WORKLOADS)}", field="--workload"
            )
    return workloads


def _check_batch(batch: int, policies: list[str]) -> None:
    """Only the optimizer places a window of tasks, and it only makes sense with one."""
    if batch < 1:
        raise InputError("must be at least 1", field="--batch")
    if batch > 1 and policies != ["optimizer"]:
        raise InputError(
            "a batch window needs --policies optimizer (the heuristics place one task at a time)",
            field="--batch",
        )
    if "optimizer" in policies and batch == 1:
        raise InputError(
            "the optimizer runs with a batch window (--batch N, N > 1); online use a heuristic",
            field="--policies",
        )


def _replay_all(
    args: argparse.Namespace,
    trace_dir: Path,
    workloads: list[str],
    policies: list[str],
    seeds: Sequence[int],
) -> list[StoredRun]:
    """Replay every workload under every policy and seed; the runs as they are stored."""
    factory = None
    if args.batch > 1:
        make = frag_placer_factory if args.batch_objective == "fragmentation" else batch_placer_factory
        factory = make(time_limit_s=args.batch_time_limit)
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
    return new


def _print_tables(
    workloads: list[str],
    shown: list[StoredRun],
    all_runs: list[StoredRun],
    expected: Expected | None,
    ratio: float,
) -> None:
    """Tables per workload, then one across workloads when the command or ``--out`` holds several."""
    for workload in workloads:
        print(f"\n## {workload}: unallocated GPU % (mean ± sd over seeds)\n")
        print(headline_table(workload, [r for r in shown if r.workload == workload], expected))
        idle = idle_table(workload, [r for r in shown if r.workload == workload])
        if idle:
            print(f"\n### {workload}: idle GPUs at the end ({ratio:.0%} arrival), mean over seeds\n")
            print(idle)
        if expected is not None:
            print(f"\n### {workload}: our re-implementations inside the authors' seed range?\n")
            print(spread_check(workload, [r for r in shown if r.workload == workload], expected))
    if len({r.workload for r in all_runs}) > 1 or len(workloads) > 1:
        print("\n## all workloads: unallocated GPU % at 100% arrival (mean over seeds)\n")
        print(workloads_table(all_runs, expected))


def _plot(
    out: Path, workloads: list[str], shown: list[StoredRun], expected: Expected | None, expected_dir: Path
) -> None:
    """Unallocated and fragmented GPUs per workload, each with the authors' curves of the same policies."""
    for workload in workloads:
        twins = {OUR_TWIN[r.policy] for r in shown if r.workload == workload and r.policy in OUR_TWIN}
        authors = tuple(sorted(twins | {"05-BestFit", "06-FGD"}))
        path = plot_unallocated(
            out / f"trace-{workload}-unallocated.png",
            workload,
            shown,
            expected,
            author_policies=authors,
        )
        print(f"\nplot: {path}", file=sys.stderr)
        frag_file = expected_dir / FRAGMENTATION_FILE
        path = plot_unallocated(
            out / f"trace-{workload}-fragmentation.png",
            workload,
            shown,
            load_expected(expected_dir, FRAGMENTATION_FILE) if frag_file.is_file() else None,
            attr="fragmentation_pct",
            ylabel="fragmented GPU (% of all GPUs, FGD measure)",
            complement=False,
            author_policies=authors,
        )
        print(f"plot: {path}", file=sys.stderr)
