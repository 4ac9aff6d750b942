"""What MIG planning costs in plan time: one large MIG pool with a queue, planned with the module on and off.

The pool is warmed up with per-GPU best fit over the trace's first windows
(so instances are scattered and in use as in a running cluster); the queue is
the next window's arrivals. The same snapshot is planned twice under the same
settings, ``settings.modules.mig`` enabled and disabled, and both wall times
are reported. Where the solver has no MIG switch both runs plan alike, and
the result says so.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from optsched import planning
from optsched.bench.mig_policies import place_bestfit
from optsched.bench.mig_snapshot import pool_snapshot
from optsched.bench.mig_state import MigPool
from optsched.bench.mig_trace import TaskPopulation, build_trace
from optsched.mig.profiles import MigModel
from optsched.settings import ModuleSettings, ModuleSwitches, Settings

WARM_WINDOWS = 6


@dataclass(frozen=True)
class PlanTime:
    """Wall seconds of one snapshot's plan with MIG layout planning on and off."""

    model: str
    gpus: int
    running: int
    pending: int
    with_mig_s: float
    without_mig_s: float
    with_mig_admitted: int
    without_mig_admitted: int
    changes: int
    switch: bool
    """The solver has ``settings.modules.mig``; False: both runs planned the same way."""

    @property
    def extra_s(self) -> float:
        return self.with_mig_s - self.without_mig_s


def _switched(settings: Settings, enabled: bool) -> Settings:
    modules = settings.modules.model_copy(update={"mig": ModuleSettings(enabled=enabled)})
    return settings.model_copy(update={"modules": modules})


def measure_plan_time(
    population: TaskPopulation,
    model: MigModel,
    gpus: int,
    settings: Settings,
    *,
    seed: int,
    window_s: int,
    load: float,
) -> PlanTime:
    """Warm a ``gpus``-GPU pool up, then time one plan of the next window's queue with MIG on and off."""
    nodes = max(1, gpus // 8)
    trace = build_trace(
        population, model, nodes * 8, seed, windows=WARM_WINDOWS + 1, window_s=window_s, load=load
    )
    pool = MigPool(model, nodes)
    leaving: dict[int, list[int]] = {}
    for window in range(WARM_WINDOWS):
        pool.depart(leaving.pop(window, []))
        for request in trace.arrivals(window):
            if place_bestfit(pool, request):
                leaving.setdefault(request.departs, []).append(request.id)
    pool.depart(leaving.pop(WARM_WINDOWS, []))
    pending = trace.arrivals(WARM_WINDOWS)
    snapshot = pool_snapshot(pool, pending, window_s)
    switch = "mig" in ModuleSwitches.model_fields
    timings = []
    for enabled in (True, False):
        chosen = _switched(settings, enabled) if switch else settings
        started = time.perf_counter()
        plan = planning.plan(snapshot, chosen, check=False)
        admitted = sum(1 for w in plan.workloads if w.decision == "admit")
        timings.append((time.perf_counter() - started, admitted, len(plan.mig_changes)))
    return PlanTime(
        model=model.name,
        gpus=len(pool.gpus),
        running=pool.running(),
        pending=len(pending),
        with_mig_s=timings[0][0],
        without_mig_s=timings[1][0],
        with_mig_admitted=timings[0][1],
        without_mig_admitted=timings[1][1],
        changes=timings[0][2],
        switch=switch,
    )


def describe(result: PlanTime) -> list[str]:
    lines = [
        f"plan time, {result.model} pool of {result.gpus} GPUs, {result.running} instances running, "
        f"{result.pending} requests pending:",
        f"  MIG layout planning on:  {result.with_mig_s:.2f} s wall, {result.with_mig_admitted} admitted, "
        f"{result.changes} layout change(s)",
        f"  MIG layout planning off: {result.without_mig_s:.2f} s wall, "
        f"{result.without_mig_admitted} admitted",
        f"  difference {result.extra_s:+.2f} s (target: at most +2 s)",
    ]
    if not result.switch:
        lines.append("  (this solver has no settings.modules.mig switch: both runs planned the same way)")
    return lines
