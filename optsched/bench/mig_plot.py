"""The ``bench mig`` figures: acceptance and GPUs in use over time, one panel per pool.

Each line is the median over seeds of a policy's value at the end of each
window, the band its min-max.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from optsched.bench.mig_report import rows
from optsched.bench.mig_sim import RunResult
from optsched.bench.plots import DPI

COLORS = {
    "all-1g.10gb": "C7",
    "all-balanced": "C5",
    "all-3g.40gb": "C3",
    "bestfit": "C0",
    "firstfit": "C4",
    "optimizer": "C2",
}


def _figure(
    path: Path, results: Sequence[RunResult], series: Callable[[RunResult], Sequence[float]], ylabel: str
) -> Path:
    groups = rows(results)
    pools = list(dict.fromkeys(r.pool for r in groups))
    fig, axes = plt.subplots(1, len(pools), figsize=(5.2 * len(pools), 3.6), squeeze=False)
    for ax, pool in zip(axes[0], pools, strict=True):
        for row in (g for g in groups if g.pool == pool):
            values = [series(r) for r in row.runs]
            xs = list(range(1, min(len(v) for v in values) + 1))
            med = [statistics.median(v[i - 1] for v in values) for i in xs]
            lo = [min(v[i - 1] for v in values) for i in xs]
            hi = [max(v[i - 1] for v in values) for i in xs]
            color = COLORS.get(row.policy, "C9")
            ax.plot(xs, med, color=color, label=row.policy, linewidth=1.4)
            ax.fill_between(xs, lo, hi, color=color, alpha=0.15, linewidth=0)
        ax.set_title(f"{pool}, {groups[0].runs[0].gpus} GPUs", fontsize=9)
        ax.set_xlabel("planning window", fontsize=8)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def plot_mig(out: Path, results: Sequence[RunResult]) -> list[Path]:
    """``mig-acceptance.png`` and ``mig-gpus-in-use.png`` under ``out``."""
    return [
        _figure(
            out / "mig-acceptance.png",
            results,
            lambda r: [100 * a for a in r.acceptance_series],
            "accepted so far, %",
        ),
        _figure(out / "mig-gpus-in-use.png", results, lambda r: list(r.in_use_series), "GPUs in use"),
    ]
