"""Markdown tables putting our replay runs next to the FGD authors' published results."""

from __future__ import annotations

import itertools
import math
import statistics

from optsched.bench.expected import AUTHOR_POLICIES, OUR_TWIN, Expected, at, mean_sd
from optsched.bench.results import StoredRun, group, latency_summary, series_by_seed
from optsched.bench.trace import SLIVER_EDGES

HEADLINE_POINTS = (90, 95, 100)


def _fmt(mean: float, sd: float) -> str:
    if math.isnan(mean):
        return "-"
    return f"{mean:.2f} ± {sd:.2f}"


def headline_table(workload: str, runs: list[StoredRun], expected: Expected | None) -> str:
    """Unallocated GPU % at 90/95/100% arrival and allocated % at 130%, mean ± sd over seeds."""
    head = [
        "policy",
        "source",
        "seeds",
        *[f"unalloc. @{k}%" for k in HEADLINE_POINTS],
        "alloc. @130%",
        "p50 / p99 ms",
    ]
    lines = [_row(head), _row(["---"] * len(head))]
    if expected is not None:
        for policy, label in AUTHOR_POLICIES.items():
            seeds = expected.seeds(workload, policy)
            if not seeds:
                continue
            cells = [_fmt(*mean_sd(at(seeds, k, complement=True))) for k in HEADLINE_POINTS]
            lines.append(
                _row([label, "FGD authors", str(len(seeds)), *cells, _fmt(*mean_sd(at(seeds, 130))), ""])
            )
    for (wl, _policy, _batch), group_runs in sorted(group(runs).items()):
        if wl != workload:
            continue
        seeds = series_by_seed(group_runs)
        cells = [_fmt(*mean_sd(at(seeds, k, complement=True))) for k in HEADLINE_POINTS]
        p50, p99 = latency_summary(group_runs)
        lines.append(
            _row(
                [
                    f"**{group_runs[0].label}**",
                    "optsched",
                    str(len(seeds)),
                    *cells,
                    _fmt(*mean_sd(at(seeds, 130))),
                    f"{p50:.2f} / {p99:.2f}",
                ]
            )
        )
    return "\n".join(lines)


def spread_check(workload: str, runs: list[StoredRun], expected: Expected) -> str:
    """Does our re-implementation land inside the authors' seed range for the same policy?"""
    head = ["policy", "point", "ours (mean)", "authors mean ± sd", "authors min-max", "inside"]
    lines = [_row(head), _row(["---"] * len(head))]
    for (wl, policy, batch), group_runs in sorted(group(runs).items()):
        twin = OUR_TWIN.get(policy)
        if wl != workload or batch > 1 or twin is None:
            continue
        theirs_seeds = expected.seeds(workload, twin)
        if not theirs_seeds:
            continue
        ours_seeds = series_by_seed(group_runs)
        for k, complement, name in ((100, True, "unalloc. @100%"), (130, False, "alloc. @130%")):
            ours = at(ours_seeds, k, complement=complement)
            theirs = at(theirs_seeds, k, complement=complement)
            if not ours or not theirs:
                continue
            mean = sum(ours) / len(ours)
            lo, hi = min(theirs), max(theirs)
            inside = "yes" if lo <= mean <= hi else "no"
            lines.append(
                _row([policy, name, f"{mean:.2f}", _fmt(*mean_sd(theirs)), f"{lo:.2f}-{hi:.2f}", inside])
            )
    return "\n".join(lines)


def workloads_table(runs: list[StoredRun], expected: Expected | None, k: int = 100) -> str:
    """Unallocated GPU % at ``k``% arrival for every workload: the authors' six and our policies."""
    ours = sorted({(r.policy, r.batch) for r in runs})
    labels = [p if b <= 1 else f"{p} (batch {b})" for p, b in ours]
    workloads = sorted({r.workload for r in runs} | set(expected.workloads() if expected else []))
    author_cols = list(AUTHOR_POLICIES.items()) if expected else []
    head = ["workload", *[f"{label} (authors)" for _, label in author_cols], *[f"**{x}**" for x in labels]]
    lines = [_row(head), _row(["---"] * len(head))]
    by_key = group(runs)
    for workload in workloads:
        cells = [workload]
        for policy, _label in author_cols:
            assert expected is not None
            values = at(expected.seeds(workload, policy), k, complement=True)
            cells.append(f"{mean_sd(values)[0]:.2f}" if values else "-")
        for policy, batch in ours:
            group_runs = by_key.get((workload, policy, batch), [])
            values = at(series_by_seed(group_runs), k, complement=True)
            cells.append(f"{mean_sd(values)[0]:.2f}" if values else "-")
        lines.append(_row(cells))
    return "\n".join(lines)


def idle_table(workload: str, runs: list[StoredRun]) -> str:
    """What the idle GPUs are made of at the end of the replay (130% arrival), mean over seeds."""
    edges = [f"{e / 1000:g}" for e in SLIVER_EDGES]
    classes = [
        f"< {edges[0]}",
        *[f"{a}-{b}" for a, b in itertools.pairwise(edges)],
        f">= {edges[-1]}",
    ]
    head = ["policy", "seeds", "idle GPUs", "in whole free GPUs", *[f"slivers {c} GPU" for c in classes]]
    lines = [_row(head), _row(["---"] * len(head))]
    for (wl, _policy, _batch), group_runs in sorted(group(runs).items()):
        known = [r for r in group_runs if r.idle_whole_gpus is not None and r.idle_sliver_gpus]
        if wl != workload or not known:
            continue
        whole = statistics.fmean(r.idle_whole_gpus or 0.0 for r in known)
        slivers = [
            statistics.fmean((r.idle_sliver_gpus or [])[i] for r in known) for i in range(len(classes))
        ]
        cells = [f"{whole + sum(slivers):.1f}", f"{whole:.1f}", *[f"{v:.1f}" for v in slivers]]
        lines.append(_row([f"**{known[0].label}**", str(len(known)), *cells]))
    return "\n".join(lines) if len(lines) > 2 else ""


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"
