"""Storing trace-replay runs as JSON and CSV so later runs can be compared and merged.

Runs are keyed by (workload, policy, batch, seed); writing merges with what
the output folder already holds, so policies can be run one at a time on a
small machine and still end up in one table.
"""

from __future__ import annotations

import csv
import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from optsched.bench.trace import MAX_PERCENT, SeedRun

RESULTS_JSON = "trace-results.json"


@dataclass(frozen=True)
class StoredRun:
    """A replay result as stored: metric series and summary figures, no per-decision data."""

    workload: str
    policy: str
    batch: int
    seed: int
    capacity_gpus: float
    arrived_pods: int
    placed_pods: int
    failed_pods: int
    failed_gpus: float
    allocated_pct: list[float | None]
    fragmentation_pct: list[float | None]
    frag_rate_pct: list[float | None]
    latency_p50_ms: float
    latency_p99_ms: float
    latency_max_ms: float
    decisions: int
    wall_s: float
    idle_whole_gpus: float | None = None
    """Idle capacity at the end in wholly free GPUs (None in results stored before it was recorded)."""
    idle_sliver_gpus: list[float] | None = None
    """Idle capacity at the end in partly used GPUs, by sliver size (see ``trace.SLIVER_EDGES``)."""

    @property
    def key(self) -> tuple[str, str, int, int]:
        return (self.workload, self.policy, self.batch, self.seed)

    @property
    def label(self) -> str:
        return self.policy if self.batch <= 1 else f"{self.policy} (batch {self.batch})"


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..100) of an unsorted list."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def stored(run: SeedRun) -> StoredRun:
    """What a run keeps on disk: series rounded for small files, latencies reduced to percentiles."""
    latencies = run.latencies_s
    return StoredRun(
        workload=run.workload,
        policy=run.policy,
        batch=run.batch,
        seed=run.seed,
        capacity_gpus=run.capacity_gpus,
        arrived_pods=run.arrived_pods,
        placed_pods=run.placed_pods,
        failed_pods=run.failed_pods,
        failed_gpus=round(run.failed_gpus, 3),
        allocated_pct=_rounded(run.allocated_pct),
        fragmentation_pct=_rounded(run.fragmentation_pct),
        frag_rate_pct=_rounded(run.frag_rate_pct),
        latency_p50_ms=round(1e3 * percentile(latencies, 50), 4),
        latency_p99_ms=round(1e3 * percentile(latencies, 99), 4),
        latency_max_ms=round(1e3 * max(latencies, default=0.0), 4),
        decisions=len(latencies),
        wall_s=round(run.wall_s, 2),
        idle_whole_gpus=round(run.idle_whole_gpus, 3),
        idle_sliver_gpus=[round(v, 3) for v in run.idle_sliver_gpus],
    )


def _rounded(series: list[float | None]) -> list[float | None]:
    return [None if v is None else round(v, 4) for v in series]


def load_runs(out_dir: Path) -> list[StoredRun]:
    """The runs stored in ``out_dir`` so far (none when it holds no results file)."""
    path = out_dir / RESULTS_JSON
    if not path.is_file():
        return []
    data = json.loads(path.read_text())
    return [StoredRun(**item) for item in data.get("runs", [])]


def save_runs(out_dir: Path, new: list[StoredRun]) -> list[StoredRun]:
    """Merge ``new`` into the folder's stored runs (same key: replaced); write JSON and CSVs."""
    out_dir.mkdir(parents=True, exist_ok=True)
    merged = {run.key: run for run in load_runs(out_dir)}
    for run in new:
        merged[run.key] = run
    runs = sorted(merged.values(), key=lambda r: r.key)
    payload: dict[str, Any] = {"runs": [run.__dict__ for run in runs]}
    (out_dir / RESULTS_JSON).write_text(json.dumps(payload, indent=1))
    for name, attr in (
        ("trace-allocated.csv", "allocated_pct"),
        ("trace-fragmentation.csv", "fragmentation_pct"),
        ("trace-frag-rate.csv", "frag_rate_pct"),
    ):
        with (out_dir / name).open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["workload", "policy", "batch", "seed", *range(MAX_PERCENT + 1)])
            for run in runs:
                series = getattr(run, attr)
                writer.writerow(
                    [run.workload, run.policy, run.batch, run.seed, *["" if v is None else v for v in series]]
                )
    return runs


def group(runs: list[StoredRun]) -> dict[tuple[str, str, int], list[StoredRun]]:
    """Runs by (workload, policy, batch)."""
    out: dict[tuple[str, str, int], list[StoredRun]] = {}
    for run in runs:
        out.setdefault((run.workload, run.policy, run.batch), []).append(run)
    return out


def series_by_seed(runs: list[StoredRun], attr: str = "allocated_pct") -> dict[int, list[float | None]]:
    """One metric series per seed, as :func:`optsched.bench.expected.at` reads them."""
    return {run.seed: list(getattr(run, attr)) for run in runs}


def latency_summary(runs: list[StoredRun]) -> tuple[float, float]:
    """Median of per-seed p50 and max of per-seed p99, in ms."""
    if not runs:
        return float("nan"), float("nan")
    return statistics.median(r.latency_p50_ms for r in runs), max(r.latency_p99_ms for r in runs)
