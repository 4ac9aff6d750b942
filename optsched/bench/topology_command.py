"""``optsched bench topology``: simulate every policy on every seed, then print, store and plot.

All policies of a seed run on the same generated cluster and job stream, so
the table compares policies, not luck. The JSON keeps each run's summary and
its allocation over time for later plots.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

from optsched.bench.options import TOPOLOGY_POLICIES, parse_policies, parse_seeds
from optsched.bench.plots import plot_bars, plot_lines
from optsched.bench.progress import Progress
from optsched.bench.topology import PolicyResult, simulate
from optsched.bench.topology_cluster import generate_jobs, synthetic_cluster
from optsched.errors import InputError

SUMMARY_COLUMNS = (
    ("gpus_allocated_pct_mean", "GPUs allocated % (mean)"),
    ("nvlink_one_island_pct", "multi-GPU pods in one NVLink island %"),
    ("avoidable_splits", "avoidable island splits"),
    ("racks_per_gang", "racks / gang"),
    ("blocks_per_gang", "blocks / gang"),
    ("gang_wait_mean", "gang wait (cycles)"),
    ("gang_wait_p95", "gang wait p95"),
    ("job_wait_mean", "job wait (cycles)"),
    ("stranded_gpus_mean", "stranded GPUs (mean)"),
    ("unfinished_jobs", "never admitted"),
    ("plan_seconds_p50", "plan s (p50)"),
    ("invalid_plans", "invalid plans"),
)


def summary_table(results: list[PolicyResult]) -> str:
    """One row per policy: each summary figure averaged over the seeds that have it."""
    by_policy: dict[str, list[dict[str, float]]] = {}
    for r in results:
        by_policy.setdefault(r.policy, []).append(r.summary())
    head = ["policy", "seeds", *[label for _, label in SUMMARY_COLUMNS]]
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    for policy, summaries in by_policy.items():
        cells = [f"**{policy}**", str(len(summaries))]
        for key, _ in SUMMARY_COLUMNS:
            values = [s[key] for s in summaries if not math.isnan(s[key])]
            cells.append(f"{statistics.fmean(values):.2f}" if values else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def run_topology_command(args: argparse.Namespace) -> int:
    """Check the options, simulate, print the summary table, write the JSON and the plots."""
    if args.nodes < 18 or args.jobs < 1:
        raise InputError("need at least 18 nodes and 1 job", field="--nodes/--jobs")
    if args.load <= 0:
        raise InputError("must be positive", field="--load")
    policies = parse_policies(args.policies, TOPOLOGY_POLICIES)
    seeds = parse_seeds(args.seeds)
    results = _simulate_all(args, policies, seeds)
    total_gpus = sum(n.gpu_count for n in synthetic_cluster(args.nodes, seeds[0]))
    print(
        f"\n## topology benchmark: {args.nodes} nodes ({total_gpus} GPUs), {args.jobs} jobs, "
        f"offered load {args.load:g}, seeds {args.seeds}\n"
    )
    print(summary_table(results))
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    (out / "topology-results.json").write_text(json.dumps(_payload(args, seeds, results), indent=1))
    if not args.no_plots:
        _plot(out, results, seeds[0], args.seeds)
        print(f"plots: {out}/topology-*.png", file=sys.stderr)
    print(f"results: {out / 'topology-results.json'}", file=sys.stderr)
    return 0


def _simulate_all(args: argparse.Namespace, policies: list[str], seeds: list[int]) -> list[PolicyResult]:
    """Every policy on every seed; a seed's cluster and jobs are generated once for all its policies."""
    results: list[PolicyResult] = []
    for seed in seeds:
        nodes = synthetic_cluster(args.nodes, seed)
        jobs = generate_jobs(sum(n.gpu_count for n in nodes), args.jobs, args.load, seed)
        for policy in policies:
            progress = Progress(len(jobs), f"topology {policy} seed {seed}", enabled=not args.no_progress)
            results.append(
                simulate(policy, nodes, jobs, seed=seed, time_limit_s=args.time_limit, progress=progress)
            )
            progress.close()
    return results


def _payload(args: argparse.Namespace, seeds: list[int], results: list[PolicyResult]) -> dict[str, object]:
    """``topology-results.json``: the run's options and each result's summary and allocation series."""
    return {
        "nodes": args.nodes,
        "jobs": args.jobs,
        "load": args.load,
        "seeds": seeds,
        "results": [
            {
                "policy": r.policy,
                "seed": r.seed,
                "summary": r.summary(),
                "allocated_pct": [round(v, 3) for v in r.allocated_pct],
            }
            for r in results
        ],
    }


def _plot(out: Path, results: list[PolicyResult], first_seed: int, seeds_text: str) -> None:
    """Allocation over time on the first seed; NVLink and rack figures averaged over all seeds."""
    first = [r for r in results if r.seed == first_seed]
    plot_lines(
        out / "topology-allocated.png",
        "GPUs allocated over time",
        {r.policy: (list(range(len(r.allocated_pct))), r.allocated_pct) for r in first},
        "cycle",
        "GPUs allocated (%)",
    )
    names = list(dict.fromkeys(r.policy for r in results))

    def mean_of(key: str) -> list[float]:
        return [statistics.fmean(r.summary()[key] for r in results if r.policy == name) for name in names]

    title = f"mean over seeds {seeds_text}"
    plot_bars(
        out / "topology-nvlink.png",
        f"multi-GPU pods inside one NVLink island ({title})",
        names,
        mean_of("nvlink_one_island_pct"),
        "%",
    )
    plot_bars(
        out / "topology-racks.png",
        f"racks spanned per gang ({title})",
        names,
        mean_of("racks_per_gang"),
        "racks / gang",
    )
