"""``optsched bench mig``: MIG layouts under a trace with arrivals and departures, policy against policy.

For each pool (A100-80GB and H100-80GB, eight GPUs a node) and each seed, one
trace (:mod:`optsched.bench.mig_trace`) is served by every policy in the same
run: the static layouts and the online baselines
(:mod:`optsched.bench.mig_policies`) and optsched's planner
(:mod:`optsched.bench.mig_optimizer`), window by window
(:mod:`optsched.bench.mig_sim`). The table gives each figure as mean ± sd
over seeds; ``--json`` keeps every run with its series, and two PNGs show
acceptance and GPUs in use over time.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from optsched.bench.mig_options import MIG_POLICIES, POOLS
from optsched.bench.mig_plan_time import describe, measure_plan_time
from optsched.bench.mig_report import notes, run_json, table, targets
from optsched.bench.mig_sim import RunResult, simulate
from optsched.bench.mig_trace import MigTrace, TaskPopulation, build_trace, load_tasks
from optsched.bench.options import parse_policies, parse_seeds
from optsched.bench.progress import Progress
from optsched.bench.trace_command import resolve_trace_dir
from optsched.errors import InputError
from optsched.mig.profiles import MigModel, models
from optsched.settings import Settings


def _pools(text: str) -> list[MigModel]:
    names = [p.strip().lower() for p in text.split(",") if p.strip()]
    unknown = [n for n in names if n not in POOLS]
    if unknown or not names:
        raise InputError(
            f"unknown pool {', '.join(unknown) or '(none)'}; choose from {', '.join(POOLS)}", field="--pools"
        )
    by_name = {m.name: m for m in models()}
    return [by_name[POOLS[n]] for n in names]


def _check(args: argparse.Namespace) -> None:
    for flag, value in (("--nodes", args.nodes), ("--windows", args.windows), ("--window-s", args.window_s)):
        if value < 1:
            raise InputError(f"{value} must be at least 1", field=flag)
    if args.load <= 0:
        raise InputError(f"{args.load:g} is not a positive load", field="--load")
    if args.time_limit <= 0:
        raise InputError(f"{args.time_limit:g} is not a positive number of seconds", field="--time-limit")
    if args.plan_time_gpus < 8:
        raise InputError(f"{args.plan_time_gpus} GPUs is less than one node", field="--plan-time-gpus")


def _describe(
    args: argparse.Namespace, population: TaskPopulation, traces: dict[str, list[MigTrace]]
) -> list[str]:
    kept = "fractional and one-GPU whole" if args.whole_gpu else "fractional"
    left = ", ".join(f"{n} {kind}" for kind, n in population.left_out.items() if n)
    lines = [
        f"MIG trace: {len(population.tasks)} {kept} tasks of openb '{args.workload}' "
        f"(left out: {left or 'none'}).",
        "No public MIG trace exists: each task's GPU share (gpu_milli) asks for the smallest profile "
        "of the pool's model holding that share of the whole-GPU profile's memory.",
        f"{args.windows} windows of {args.window_s} s, Poisson arrivals at load {args.load:g}, lifetimes "
        "from the trace; a request not placed within its window is rejected (acceptance = placed / arrived).",
    ]
    for pool, runs in traces.items():
        mix: dict[str, int] = {}
        for trace in runs:
            for profile, n in trace.profile_mix().items():
                mix[profile] = mix.get(profile, 0) + n
        total = sum(mix.values()) or 1
        ordered = sorted(mix.items(), key=lambda kv: (-kv[1], kv[0]))
        shares = ", ".join(f"{p} {100 * n / total:.0f}%" for p, n in ordered)
        lines.append(f"{pool}: {total / len(runs):.0f} requests per seed on {runs[0].gpus} GPUs; {shares}")
    return lines


def _run_all(
    args: argparse.Namespace,
    pools: list[MigModel],
    seeds: list[int],
    policies: list[str],
    settings: Settings,
    traces: dict[str, list[MigTrace]],
) -> list[RunResult]:
    """Every pool x seed x policy, with a progress bar counting windows."""
    progress = Progress(
        len(pools) * len(seeds) * len(policies) * args.windows, "bench mig", enabled=not args.no_progress
    )
    results: list[RunResult] = []
    ticks = [0]

    def tick() -> None:
        ticks[0] += 1
        progress.update(ticks[0])

    for model in pools:
        for seed, trace in zip(seeds, traces[model.name], strict=True):
            for policy in policies:
                results.append(
                    simulate(trace, model, args.nodes, policy, settings, seed=seed, on_window=tick)
                )
    progress.close()
    return results


def run_mig(args: argparse.Namespace) -> int:
    """Run every pool x seed x policy, print the table and targets, write the JSON and figures."""
    _check(args)
    seeds = parse_seeds(str(args.seeds))
    policies = parse_policies(args.policies, MIG_POLICIES)
    pools = _pools(args.pools)
    population = load_tasks(resolve_trace_dir(args.trace_dir), args.workload, whole_gpu=args.whole_gpu)
    settings = Settings(time_limit_s=args.time_limit, deterministic_time=True, workers=1)
    traces = {
        m.name: [
            build_trace(
                population, m, args.nodes * 8, s, windows=args.windows, window_s=args.window_s, load=args.load
            )
            for s in seeds
        ]
        for m in pools
    }
    print("\n".join(_describe(args, population, traces)), flush=True)
    results = _run_all(args, pools, seeds, policies, settings, traces)
    print("\n".join(table(results)))
    for line in notes(results) + targets(results):
        print(line)
    plan_time = None
    if args.plan_time:
        plan_time = measure_plan_time(
            population,
            pools[0],
            args.plan_time_gpus,
            settings,
            seed=seeds[0],
            window_s=args.window_s,
            load=args.load,
        )
        print("\n".join(describe(plan_time)))
    if args.json is not None:
        document: dict[str, object] = {
            "settings": {
                k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k != "func"
            },
            "runs": [run_json(r) for r in results],
        }
        if plan_time is not None:
            document["planTime"] = plan_time.__dict__ | {"extra_s": plan_time.extra_s}
        _write_json(args.json, document)
    if not args.no_plots:
        # Deferred: matplotlib loads only when a figure is drawn.
        from optsched.bench.mig_plot import plot_mig

        for path in plot_mig(args.out, results):
            print(f"figure: {path}", file=sys.stderr)
    return 0


def _write_json(path: Path, document: dict[str, object]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(document, indent=1) + "\n")
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror}", field="--json") from None
    print(f"results: {path}", file=sys.stderr)
