"""The ``bench scale`` figure: each policy's value per metric next to the bound (median, min-max)."""

from __future__ import annotations

import statistics
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from optsched.bench.plots import COLORS, DPI
from optsched.bench.scale_report import METRICS, SeedRun


def plot_scale(path: Path, runs: list[SeedRun]) -> Path:
    """A panel per metric (GPUs admitted, racks and blocks per gang, NVLink hit): bars, the bound dashed."""
    names = [f.policy for f in runs[0].policies]
    fig, axes = plt.subplots(1, len(METRICS), figsize=(3.2 * len(METRICS), 3.4))
    for ax, metric in zip(axes, METRICS, strict=True):
        medians, lows, highs, labels = [], [], [], []
        for name in names:
            values = [
                v for r in runs for f in r.policies if f.policy == name if (v := metric.value(f)) is not None
            ]
            if not values:
                continue
            mid = statistics.median(values)
            labels.append(name)
            medians.append(mid)
            lows.append(mid - min(values))
            highs.append(max(values) - mid)
        ax.bar(labels, medians, yerr=[lows, highs], color=[COLORS.get(n, "C0") for n in labels], capsize=3)
        bounds = [b for r in runs if (b := r.bound(metric)) is not None]
        if bounds:
            ax.axhline(statistics.median(bounds), color="k", linestyle="--", linewidth=1.2, label="bound")
            ax.legend(fontsize=7)
        ax.set_title(metric.key, fontsize=9)
        ax.tick_params(axis="x", labelrotation=35, labelsize=7)
        ax.grid(axis="y", alpha=0.3)
    first = runs[0]
    fig.suptitle(
        f"bench scale: {first.nodes} nodes, {first.workloads} workloads, {len(runs)} seed(s)", fontsize=10
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path
