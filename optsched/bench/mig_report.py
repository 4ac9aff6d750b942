"""The table and JSON of ``optsched bench mig``: each figure as mean ± sd over seeds, and the targets.

Plan time percentiles pool every window of every seed of a (pool, policy).
The target lines put the optimizer next to the best static layout
(acceptance) and next to per-GPU best fit (GPUs in use, with both
acceptances shown, since the comparison holds only at equal acceptance).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from optsched.bench.mig_policies import BESTFIT, STATIC_POLICIES
from optsched.bench.mig_sim import OPTIMIZER, RunResult


@dataclass(frozen=True)
class Row:
    """One (pool, policy) over its seeds."""

    pool: str
    policy: str
    runs: tuple[RunResult, ...]

    def stat(self, value: Callable[[RunResult], float]) -> tuple[float, float]:
        values = [value(r) for r in self.runs]
        return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0

    def plan_ms(self, q: float) -> float:
        times = sorted(s for r in self.runs for s in r.plan_seconds)
        if not times:
            return 0.0
        return 1000.0 * times[min(len(times) - 1, int(q * len(times)))]

    def total(self, value: Callable[[RunResult], int]) -> int:
        return sum(value(r) for r in self.runs)


def rows(results: Sequence[RunResult]) -> list[Row]:
    """Results grouped by pool, then policy, in the order they were run."""
    order: dict[tuple[str, str], list[RunResult]] = {}
    for r in results:
        order.setdefault((r.pool, r.policy), []).append(r)
    return [Row(pool, policy, tuple(runs)) for (pool, policy), runs in order.items()]


def _pm(mean: float, sd: float, digits: int = 1) -> str:
    return f"{mean:.{digits}f} ± {sd:.{digits}f}"


HEADER = (
    "| pool | policy | acceptance % | GPUs in use (avg) | GPUs in use (end) | reconfigured / 1k req "
    "| pods moved | plan p50 ms | plan p99 ms |"
)


def table(results: Sequence[RunResult]) -> list[str]:
    """The Markdown table: one line per (pool, policy)."""
    lines = [HEADER, "|" + "---|" * 9]
    for row in rows(results):
        lines.append(
            f"| {row.pool} ({row.runs[0].gpus} GPUs) | {row.policy} "
            f"| {_pm(*row.stat(lambda r: 100 * r.acceptance))} "
            f"| {_pm(*row.stat(lambda r: r.in_use_mean))} "
            f"| {_pm(*row.stat(lambda r: r.in_use_end))} "
            f"| {_pm(*row.stat(lambda r: r.reconfigured_per_1000), 0)} "
            f"| {row.total(lambda r: r.moved)} "
            f"| {row.plan_ms(0.5):.1f} | {row.plan_ms(0.99):.1f} |"
        )
    return lines


def notes(results: Sequence[RunResult]) -> list[str]:
    """Counts that must be zero for the figures to mean what they say, where one is not."""
    out = []
    for row in rows(results):
        illegal, stale, unbound = (
            row.total(f) for f in (lambda r: r.illegal, lambda r: r.stale, lambda r: r.unbound)
        )
        if illegal or stale or unbound:
            out.append(
                f"{row.pool} {row.policy}: {illegal} illegal layout(s) refused, "
                f"{stale} stale change(s) skipped, "
                f"{unbound} admitted pod(s) without a free instance on their node"
            )
    return out


def targets(results: Sequence[RunResult]) -> list[str]:
    """The optimizer against the issue's targets, per pool; nothing when the optimizer did not run."""
    lines = []
    by_key = {(row.pool, row.policy): row for row in rows(results)}
    for pool in dict.fromkeys(r.pool for r in results):
        opt = by_key.get((pool, OPTIMIZER))
        if opt is None:
            continue
        acc = opt.stat(lambda r: r.acceptance)[0]
        statics = [
            (by_key[(pool, s)].stat(lambda r: r.acceptance)[0], s)
            for s in STATIC_POLICIES
            if (pool, s) in by_key
        ]
        if statics:
            best, name = max(statics)
            ratio = f"{acc / best:.2f}x" if best > 0 else "n/a (the best static layout accepts nothing)"
            lines.append(
                f"{pool}: acceptance {100 * acc:.1f}% = {ratio} the best static layout "
                f"({name}, {100 * best:.1f}%); target >= 1.2x"
            )
        bestfit = by_key.get((pool, BESTFIT))
        if bestfit is not None:
            used, bf_used = opt.stat(lambda r: r.in_use_mean)[0], bestfit.stat(lambda r: r.in_use_mean)[0]
            bf_acc = bestfit.stat(lambda r: r.acceptance)[0]
            change = f"{100 * (used / bf_used - 1):+.1f}%" if bf_used else "n/a"
            lines.append(
                f"{pool}: GPUs in use (avg) {used:.1f} vs best fit {bf_used:.1f} ({change}) at acceptance "
                f"{100 * acc:.1f}% vs {100 * bf_acc:.1f}%; target <= -15% at equal acceptance"
            )
        lines.append(
            f"{pool}: running instances destroyed by the optimizer: {opt.total(lambda r: r.moved)}; target 0"
        )
    return lines


def run_json(result: RunResult) -> dict[str, object]:
    return {
        "pool": result.pool,
        "seed": result.seed,
        "policy": result.policy,
        "gpus": result.gpus,
        "arrived": result.arrived,
        "placed": result.placed,
        "acceptance": round(result.acceptance, 5),
        "gpusInUseMean": round(result.in_use_mean, 3),
        "gpusInUseEnd": result.in_use_end,
        "reconfigured": result.reconfigured,
        "reconfiguredPer1000": round(result.reconfigured_per_1000, 2),
        "podsMoved": result.moved,
        "illegalLayouts": result.illegal,
        "staleChanges": result.stale,
        "admittedUnbound": result.unbound,
        "planSeconds": [round(s, 5) for s in result.plan_seconds],
        "acceptanceSeries": [round(a, 5) for a in result.acceptance_series],
        "gpusInUseSeries": list(result.in_use_series),
    }
