"""What ``bench scale`` shows: per-seed tables with the bound row, the share of the gap closed, JSON.

The optimizer is judged by how much of the distance from the best greedy policy
to the bound it closes on each metric: ``closed = (optimizer - best greedy) /
(bound - best greedy)`` (1 = at the bound, 0 = no better than greedy, below 0
= worse). GPUs admitted has one bound for the snapshot; racks and blocks per
gang and the NVLink-island hit are means over an admitted set, so their bound
row is the bound over the optimizer's own admitted set (the first policy's
where the optimizer did not run), and each policy's own-set bounds are in the
JSON. Where the bound is not beyond the best greedy value there is nothing to
close and ``closed`` is left out.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from optsched.bench.scale_figures import Figures

OPTIMIZER = "optimizer"


@dataclass(frozen=True)
class Metric:
    key: str
    """Its name in the JSON and the table."""
    higher_is_better: bool
    value: Callable[[Figures], float | None]
    own_bound: Callable[[Figures], float | None]
    """The bound over a policy's own admitted set; None for the snapshot-wide GPUs bound."""


METRICS = (
    Metric("gpusAdmitted", True, lambda f: f.gpus_admitted, lambda f: None),
    Metric("racksPerGang", False, lambda f: f.racks_per_gang, lambda f: f.racks_bound),
    Metric("blocksPerGang", False, lambda f: f.blocks_per_gang, lambda f: f.blocks_bound),
    Metric("nvlinkHit", True, lambda f: f.nvlink_hit, lambda f: f.nvlink_bound),
)


@dataclass(frozen=True)
class SeedRun:
    """Every policy's figures on one seed's instance, with what the instance is."""

    nodes: int
    workloads: int
    seed: int
    queue: str
    free_gpus: float
    demand_ratio: float
    gpus_bound: float
    policies: tuple[Figures, ...]

    @property
    def reference(self) -> Figures | None:
        """The policy whose admitted set the per-set bounds are shown for: the optimizer, else the first."""
        return next(
            (f for f in self.policies if f.policy == OPTIMIZER), self.policies[0] if self.policies else None
        )

    def bound(self, metric: Metric) -> float | None:
        if metric.key == "gpusAdmitted":
            return self.gpus_bound
        ref = self.reference
        return metric.own_bound(ref) if ref is not None else None

    def closed(self, metric: Metric) -> float | None:
        """Share of the distance from the best greedy policy to the bound that the optimizer closes."""
        opt = next((metric.value(f) for f in self.policies if f.policy == OPTIMIZER), None)
        greedy = [v for f in self.policies if f.policy != OPTIMIZER if (v := metric.value(f)) is not None]
        bound = self.bound(metric)
        if opt is None or not greedy or bound is None:
            return None
        best = max(greedy) if metric.higher_is_better else min(greedy)
        room = bound - best if metric.higher_is_better else best - bound
        if room <= 1e-9:
            return None
        return (opt - best) / room if metric.higher_is_better else (best - opt) / room


def _fmt(metric: str, value: float | None) -> str:
    if value is None:
        return "-"
    if metric == "nvlinkHit":
        return f"{value:.1%}"
    return f"{value:g}" if metric == "gpusAdmitted" else f"{value:.3f}"


def seed_table(run: SeedRun) -> list[str]:
    """The seed's table: a row per policy, the bound row, the optimizer's stages and the closed shares."""
    rows = []
    for f in run.policies:
        row = {"policy": f.policy, **{m.key: _fmt(m.key, m.value(f)) for m in METRICS}}
        row |= {
            "wall s": f"{f.wall_seconds:.2f}",
            "status": f.status,
            "gap": f"{f.gap:.2%}" if f.gap is not None else "-",
            "invalid": str(f.invalid),
        }
        rows.append(row)
    bound_row = {"policy": "bound", **{m.key: _fmt(m.key, run.bound(m)) for m in METRICS}}
    rows.append(bound_row | {"wall s": "", "status": "", "gap": "", "invalid": ""})
    lines = [
        f"seed {run.seed}: {run.nodes} nodes, {run.workloads} workloads ({run.queue}), "
        f"{run.free_gpus:g} GPUs free, demand {run.demand_ratio:.2f}x free",
        *_align(rows),
    ]
    ref = run.reference
    for stage in ref.stages if ref is not None else ():
        lines.append(
            f"  optimizer stage {stage.name}: {stage.status} value {stage.value:g} bound {stage.bound:g} "
            f"gap {'-' if stage.gap is None else f'{stage.gap:.2%}'} ({stage.seconds:.2f}s)"
        )
    for line in ref.warnings if ref is not None and ref.policy == OPTIMIZER else ():
        lines.append(f"  optimizer: {line}")
    closed = [f"{m.key} {_closed(run.closed(m))}" for m in METRICS]
    lines.append("  closed (optimizer - best greedy) / (bound - best greedy): " + ", ".join(closed))
    return lines


def _closed(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _align(rows: list[dict[str, str]]) -> list[str]:
    headers = list(rows[0])
    widths = {h: max(len(h), *(len(r[h]) for r in rows)) for h in headers}
    out = ["  ".join(h.ljust(widths[h]) for h in headers)]
    out += ["  ".join(r[h].ljust(widths[h]) for h in headers) for r in rows]
    return out


def _spread(values: list[float]) -> tuple[float, float, float] | None:
    return (statistics.median(values), min(values), max(values)) if values else None


def summary_table(runs: list[SeedRun]) -> list[str]:
    """Median and min-max over the seeds of every metric, wall time and closed share."""
    names = [f.policy for f in runs[0].policies]
    rows = []
    for name in [*names, "bound", "closed"]:
        row = {"policy": name}
        for m in METRICS:
            row[m.key] = _spread_text(m.key, [v for r in runs if (v := _cell(r, name, m)) is not None], name)
        walls = [f.wall_seconds for r in runs for f in r.policies if f.policy == name]
        spread = _spread(walls)
        row["wall s"] = f"{spread[0]:.2f} [{spread[1]:.2f}, {spread[2]:.2f}]" if spread else ""
        rows.append(row)
    return [f"summary over {len(runs)} seeds: median [min, max]", *_align(rows)]


def _cell(run: SeedRun, name: str, metric: Metric) -> float | None:
    if name == "bound":
        return run.bound(metric)
    if name == "closed":
        return run.closed(metric)
    return next((metric.value(f) for f in run.policies if f.policy == name), None)


def _spread_text(key: str, values: list[float], name: str) -> str:
    spread = _spread(values)
    if spread is None:
        return "-"
    mid, low, high = (f"{v:.2f}" if name == "closed" else _fmt(key, v) for v in spread)
    return f"{mid} [{low}, {high}]"


def to_json(run: SeedRun) -> dict[str, Any]:
    """The seed's figures in the documented schema (more keys than the minimum: blocks, stages, closed)."""
    policies: dict[str, Any] = {}
    for f in run.policies:
        entry: dict[str, Any] = {m.key: m.value(f) for m in METRICS}
        entry |= {
            "wallSeconds": round(f.wall_seconds, 3),
            "solveSeconds": f.solve_seconds,
            "status": f.status,
            "gap": f.gap,
            "invalid": f.invalid,
            "workloadsAdmitted": f.workloads_admitted,
            "bounds": {m.key: m.own_bound(f) for m in METRICS if m.key != "gpusAdmitted"},
            "warnings": list(f.warnings),
        }
        if f.stages:
            entry["stages"] = [
                {
                    "name": s.name,
                    "status": s.status,
                    "value": s.value,
                    "bound": s.bound if math.isfinite(s.bound) else None,
                    "gap": round(s.gap, 6) if s.gap is not None else None,
                    "seconds": s.seconds,
                }
                for s in f.stages
            ]
        policies[f.policy] = entry
    return {
        "nodes": run.nodes,
        "workloads": run.workloads,
        "seed": run.seed,
        "queue": run.queue,
        "freeGpus": run.free_gpus,
        "demandRatio": round(run.demand_ratio, 4),
        "bounds": {m.key: run.bound(m) for m in METRICS},
        "policies": policies,
        "closed": {m.key: run.closed(m) for m in METRICS},
    }
