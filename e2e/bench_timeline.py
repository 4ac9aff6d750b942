"""Where a burst's time goes, from submission to bound: per workload stage times and the cycle's phases.

The controller benchmark prints these figures next to its totals. Kueue's side
(quota reserved, admitted), the Job controller's (pods created) and
kube-scheduler's (pod bound) come from the objects' own timestamps (whole
seconds); optsched's side (check Ready, pods pinned) and each cycle's phase
durations come from the controller's log (milliseconds).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from e2e.kube import condition

STAGES = ("reserved", "ready", "admitted", "created", "pinned", "bound")
"""The stages of one workload, in order; optsched's benchmark run has all of them, TAS's no ready/pinned."""

_LOG_TIME = r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})"
_ADMITTED = re.compile(_LOG_TIME + r" INFO optsched\.controller: admitted ([^/\s]+)/(\S+):")
_PINNED = re.compile(_LOG_TIME + r" INFO optsched\.controller: pinned pod ([^/\s]+)/(\S+) to ")
_CYCLE = re.compile(r"cycle took ([0-9.]+)s \(([^)]*)\)")
_PHASE = re.compile(r"\d+ ([a-z-]+) ([0-9.]+)s")


def api_time(stamp: str | None) -> float | None:
    """An RFC 3339 timestamp of the API server as seconds since the epoch (None stays None)."""
    if not stamp:
        return None
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def log_time(stamp: str) -> float:
    """A controller log line's local time as seconds since the epoch."""
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


@dataclass(frozen=True)
class Timeline:
    """Seconds after submission at which each stage of one workload was reached (None: not reached)."""

    workload: str
    at: Mapping[str, float | None]


def _first(times: Iterable[float | None]) -> float | None:
    got = [t for t in times if t is not None]
    return min(got) if got else None


def _last(times: Iterable[float | None]) -> float | None:
    got = [t for t in times if t is not None]
    return max(got) if got else None


def timelines(
    workloads: Sequence[dict[str, Any]], pods: Sequence[dict[str, Any]], log: str, submitted: float
) -> list[Timeline]:
    """One timeline per Workload; a stage over several pods counts when the last of them reached it."""
    ready = {(ns, name): log_time(t) for t, ns, name in _ADMITTED.findall(log)}
    pinned = {(ns, name): log_time(t) for t, ns, name in _PINNED.findall(log)}
    by_job: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for pod in pods:
        meta = pod["metadata"]
        job = (meta.get("labels") or {}).get("batch.kubernetes.io/job-name", "")
        by_job.setdefault((meta["namespace"], job), []).append(pod)
    out = []
    for wl in workloads:
        meta = wl["metadata"]
        key = (meta["namespace"], meta["name"])
        owners = [o.get("name", "") for o in meta.get("ownerReferences") or []]
        its = [p for owner in owners for p in by_job.get((key[0], owner), [])]
        names = [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in its]
        scheduled = [condition(p, "PodScheduled") or {} for p in its]
        stamps: dict[str, float | None] = {
            "reserved": api_time((condition(wl, "QuotaReserved") or {}).get("lastTransitionTime")),
            "ready": ready.get(key),
            "admitted": api_time((condition(wl, "Admitted") or {}).get("lastTransitionTime")),
            "created": _last(api_time(p["metadata"].get("creationTimestamp")) for p in its) if its else None,
            "pinned": _last(pinned.get(n) for n in names) if any(n in pinned for n in names) else None,
            "bound": _last(
                api_time(c.get("lastTransitionTime")) if c.get("status") == "True" else None
                for c in scheduled
            )
            if its and all(p["spec"].get("nodeName") for p in its)
            else None,
        }
        at = {stage: (t - submitted if t is not None else None) for stage, t in stamps.items()}
        out.append(Timeline(workload=meta["name"], at=at))
    return out


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def stage_table(lines: Sequence[Timeline]) -> str:
    """Per stage: how many workloads reached it, when (p50/p90/max after submission), and the step from
    the stage before (p50/p90): the figures that say where the time goes."""
    rows = []
    previous: str | None = None
    for stage in STAGES:
        reached = [t.at[stage] for t in lines if t.at.get(stage) is not None]
        if not reached:
            continue
        at = [float(x) for x in reached if x is not None]
        step = ""
        if previous is not None:
            gaps = [
                float(t.at[stage]) - float(t.at[previous])  # type: ignore[arg-type]
                for t in lines
                if t.at.get(stage) is not None and t.at.get(previous) is not None
            ]
            step = f"; from {previous} p50 {percentile(gaps, 0.5):.1f}s p90 {percentile(gaps, 0.9):.1f}s"
        rows.append(
            f"  {stage:<9} {len(at):>4} workloads, at p50 {percentile(at, 0.5):.1f}s "
            f"p90 {percentile(at, 0.9):.1f}s max {max(at):.1f}s{step}"
        )
        previous = stage
    return "\n".join(rows)


@dataclass(frozen=True)
class Cycles:
    """The controller's cycles of one run: each one's duration and the sum of each phase."""

    seconds: tuple[float, ...]
    phases: Mapping[str, float]


def cycles(log: str) -> Cycles:
    seconds, phases = [], dict[str, float]()
    for took, detail in _CYCLE.findall(log):
        seconds.append(float(took))
        for phase, spent in _PHASE.findall(detail):
            phases[phase] = phases.get(phase, 0.0) + float(spent)
    return Cycles(seconds=tuple(seconds), phases=phases)


def cycle_summary(found: Cycles) -> str:
    spent = ", ".join(f"{phase} {seconds:.1f}s" for phase, seconds in found.phases.items())
    values = found.seconds
    return (
        f"  cycles {len(values)}, p50 {percentile(values, 0.5):.2f}s, p99 {percentile(values, 0.99):.2f}s, "
        f"total {sum(values):.1f}s ({spent})"
    )
