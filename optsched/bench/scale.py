"""``optsched bench scale``: how the planner's policies compare on a large cluster under contention.

The default instance (:mod:`optsched.bench.scale_cluster`) is a live-looking
cluster whose pending queue asks 1.2-1.5x its free GPUs, so policies must
choose; ``--queue classic`` keeps the earlier mostly idle cluster
(:mod:`optsched.bench.scale_classic`). Each policy plans the same snapshot; the
table shows what each admits, how well it keeps pods inside NVLink islands and
gangs inside racks, and what it costs in time and memory ("solve s" is the
policy's own time as its plan reports it -- for the optimizer the greedy hint,
model building, CP-SAT search and GPU index assignment; "wall s" adds plan
assembly: summary, deferral reasons; peak MiB is the process's peak resident
memory so far). Everything is seeded, so a run can be repeated exactly.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

from optsched import planning
from optsched.bench.options import parse_policies, parse_seeds, register_scale
from optsched.bench.progress import Progress
from optsched.bench.scale_bounds import scale_bounds
from optsched.bench.scale_classic import synthetic_cluster
from optsched.bench.scale_cluster import contended_cluster, demand_ratio
from optsched.bench.scale_figures import figures
from optsched.bench.scale_report import SeedRun, seed_table, summary_table, to_json
from optsched.errors import InputError
from optsched.model.snapshot import Snapshot
from optsched.settings import Settings
from optsched.validate import check_plan

__all__ = ["contended_cluster", "main", "run_scale", "synthetic_cluster"]


def _peak_mib() -> float:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


def _settings(args: argparse.Namespace) -> Settings:
    """The optimizer's settings: wall-clock seconds on every core, or deterministic seconds on one."""
    if args.nodes < 1 or args.workloads < 1:
        raise InputError(
            f"needs at least 1 node and 1 workload, got {args.nodes} and {args.workloads}",
            field="--nodes/--workloads",
        )
    if args.time_limit <= 0:
        raise InputError(f"{args.time_limit:g} is not a positive number of seconds", field="--time-limit")
    if args.workers is not None and args.workers < 0:
        raise InputError(f"{args.workers} is not a worker count (0 = all cores)", field="--workers")
    workers = args.workers if args.workers is not None else (1 if args.deterministic else 0)
    return Settings(time_limit_s=args.time_limit, workers=workers, deterministic_time=args.deterministic)


def run_seed(
    args: argparse.Namespace,
    seed: int,
    settings: Settings,
    policies: list[str],
    progress: Progress,
    done: int,
) -> SeedRun:
    """One seed: build the instance and its bounds, plan it with each policy, collect the figures."""
    generate = synthetic_cluster if args.queue == "classic" else contended_cluster
    snapshot: Snapshot = generate(args.nodes, args.workloads, seed)
    bounds = scale_bounds(snapshot)
    ratio = demand_ratio(snapshot)
    results = []
    for name in policies:
        started = time.perf_counter()
        plan = planning.plan(snapshot, settings, name, check=False)
        seconds = time.perf_counter() - started
        violations = check_plan(snapshot, plan)
        for violation in violations[:5]:
            print(f"  INVALID {name} (seed {seed}): {violation}")
        results.append(figures(snapshot, plan, bounds, wall_seconds=seconds, invalid=len(violations)))
        done += 1
        progress.update(done)
    free = ratio and sum(w.gpu_demand for w in snapshot.workloads) / ratio
    return SeedRun(
        args.nodes,
        args.workloads,
        seed,
        args.queue,
        round(free, 3),
        ratio,
        bounds.gpus_admitted,
        tuple(results),
    )


def run_scale(args: argparse.Namespace) -> int:
    """Plan every seed's instance with each policy; print the tables, write the JSON and the figure."""
    seeds = parse_seeds(str(args.seeds))
    policies = parse_policies(args.policies, planning.POLICIES)
    settings = _settings(args)
    progress = Progress(
        len(seeds) * len(policies), "bench scale", enabled=len(seeds) > 1 and not args.no_progress
    )
    runs: list[SeedRun] = []
    for seed in seeds:
        run = run_seed(args, seed, settings, policies, progress, len(runs) * len(policies))
        runs.append(run)
        if not progress.enabled:
            print("\n".join(seed_table(run)), flush=True)
    progress.close()
    if progress.enabled:
        for run in runs:
            print("\n".join(seed_table(run)))
    if len(runs) > 1:
        print("\n".join(summary_table(runs)))
    print(f"peak memory {_peak_mib():.0f} MiB")
    if args.json is not None:
        _write_json(args.json, [to_json(r) for r in runs])
    if not args.no_plots:
        # Deferred: matplotlib loads only when a figure is drawn.
        from optsched.bench.scale_plot import plot_scale

        path = plot_scale(args.out / f"scale-{args.queue}-{args.nodes}n-{args.workloads}w.png", runs)
        print(f"figure: {path}", file=sys.stderr)
    return 0


def _write_json(path: Path, documents: list[dict[str, object]]) -> None:
    payload = documents[0] if len(documents) == 1 else documents
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(payload, indent=1) + "\n")
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror}", field="--json") from None
    print(f"results: {path}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """``python -m optsched.bench.scale``: the same run as ``optsched bench scale``, the same exit codes."""
    parser = argparse.ArgumentParser(prog="optsched bench scale", description=__doc__.splitlines()[0])
    register_scale(parser)
    try:
        return run_scale(parser.parse_args(argv))
    except InputError as exc:
        print(f"optsched: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
