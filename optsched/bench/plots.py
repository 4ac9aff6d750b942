"""PNG figures for the benchmarks (matplotlib, headless Agg backend, small files)."""

from __future__ import annotations

import statistics
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from optsched.bench.expected import AUTHOR_POLICIES, OUR_TWIN, Expected
from optsched.bench.results import StoredRun, group, series_by_seed

DPI = 90
X_FROM = 75
COLORS = {
    "fgd": "C1",
    "bestfit": "C0",
    "optimizer": "C2",
    "dotprod": "C3",
    "firstfit": "C4",
    "leastallocated": "C5",
    "gpupacking": "C6",
    "random": "C7",
    "tas": "C8",
}
"""One colour per policy; the authors' result for the same policy is drawn dashed in the same colour."""


def _band(
    series: dict[int, list[float | None]], complement: bool
) -> tuple[list[int], list[float], list[float], list[float]]:
    xs: list[int] = []
    med: list[float] = []
    lo: list[float] = []
    hi: list[float] = []
    for k in range(X_FROM, 131):
        values = [v for v in (s[k] for s in series.values()) if v is not None]
        if complement:
            values = [100.0 - v for v in values]
        if not values:
            continue
        xs.append(k)
        med.append(statistics.median(values))
        lo.append(min(values))
        hi.append(max(values))
    return xs, med, lo, hi


def plot_unallocated(
    path: Path,
    workload: str,
    runs: list[StoredRun],
    expected: Expected | None,
    *,
    attr: str = "allocated_pct",
    ylabel: str = "unallocated GPU (%)",
    complement: bool = True,
    author_policies: tuple[str, ...] = ("05-BestFit", "06-FGD"),
) -> Path:
    """Like the FGD paper's Fig. 9a: metric vs arrived workload; line = median, band = min-max over seeds."""
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    twins = {theirs: ours for ours, theirs in OUR_TWIN.items()}
    if expected is not None:
        for policy in author_policies:
            seeds = expected.seeds(workload, policy)
            if seeds:
                xs, med, lo, hi = _band(seeds, complement)
                color = COLORS.get(twins.get(policy, ""), "k")
                label = f"{AUTHOR_POLICIES[policy]} (authors)"
                ax.plot(xs, med, linestyle="--", linewidth=1.4, color=color, label=label)
                ax.fill_between(xs, lo, hi, color=color, alpha=0.10)
    for (wl, policy, batch), group_runs in sorted(group(runs).items()):
        if wl != workload:
            continue
        xs, med, lo, hi = _band(series_by_seed(group_runs, attr), complement)
        color = COLORS.get(policy, "k")
        style = ":" if batch > 1 and policy != "optimizer" else "-"
        label = f"{group_runs[0].label} (optsched)"
        ax.plot(xs, med, linewidth=1.3, linestyle=style, color=color, label=label, alpha=0.9)
        ax.fill_between(xs, lo, hi, color=color, alpha=0.2)
    _finish_axes(ax, f"trace replay: {workload}", "arrived workload (% of cluster GPU capacity)", ylabel)
    return _save(fig, path)


def _finish_axes(ax: Axes, title: str, xlabel: str, ylabel: str) -> None:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def _save(fig: Figure, path: Path) -> Path:
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def plot_bars(path: Path, title: str, labels: list[str], values: list[float], ylabel: str) -> Path:
    """One bar per policy (topology benchmark summaries)."""
    fig, ax = plt.subplots(figsize=(6.0, 3.4))
    ax.bar(labels, values, color=[COLORS.get(label, "C0") for label in labels])
    for i, v in enumerate(values):
        ax.text(i, v, f"{v:.2f}", ha="center", va="bottom", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    plt.setp(ax.get_xticklabels(), rotation=15, ha="right")
    return _save(fig, path)


def plot_lines(
    path: Path, title: str, series: dict[str, tuple[list[float], list[float]]], xlabel: str, ylabel: str
) -> Path:
    """Several policies' metric over time (topology benchmark: GPUs allocated)."""
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for label, (xs, ys) in series.items():
        ax.plot(xs, ys, linewidth=1.3, label=label, color=COLORS.get(label))
    _finish_axes(ax, title, xlabel, ylabel)
    return _save(fig, path)
