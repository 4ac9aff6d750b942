"""One run of ``optsched bench mig``: a policy serving a MIG trace on a pool, window by window.

Every window, in this order: the requests whose lifetime ended leave (their
instances stay, free); the window's arrivals are placed (the online
policies one at a time in arrival order, the optimizer all together in one
plan); a request not placed in its window is rejected, never carried over,
so acceptance = placed / arrived. At the window's end the run records the
GPUs in use (holding at least one running instance), the GPUs whose layout
differs from the window's start (reconfigured), the running instances
destroyed (pods that had to move) and the policy's time for the window.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from optsched.bench.mig_optimizer import plan_window
from optsched.bench.mig_policies import PLACERS, STATIC_POLICIES, fill_static
from optsched.bench.mig_state import MigPool
from optsched.bench.mig_trace import MigRequest, MigTrace
from optsched.mig.profiles import MigModel
from optsched.settings import Settings

OPTIMIZER = "optimizer"
POLICIES = (*STATIC_POLICIES, "bestfit", "firstfit", OPTIMIZER)
"""Every policy ``bench mig`` compares, in table order."""


@dataclass(frozen=True)
class RunResult:
    """The figures of one (pool, seed, policy) run; series hold one value per window."""

    pool: str
    seed: int
    policy: str
    gpus: int
    arrived: int
    placed: int
    acceptance_series: tuple[float, ...]
    in_use_series: tuple[int, ...]
    reconfigured: int
    moved: int
    illegal: int
    stale: int
    unbound: int
    plan_seconds: tuple[float, ...]

    @property
    def acceptance(self) -> float:
        return self.placed / self.arrived if self.arrived else 0.0

    @property
    def in_use_mean(self) -> float:
        return statistics.fmean(self.in_use_series) if self.in_use_series else 0.0

    @property
    def in_use_end(self) -> int:
        return self.in_use_series[-1] if self.in_use_series else 0

    @property
    def reconfigured_per_1000(self) -> float:
        return 1000.0 * self.reconfigured / self.arrived if self.arrived else 0.0


@dataclass
class _Tally:
    placed: int = 0
    arrived: int = 0
    reconfigured: int = 0
    stale: int = 0
    unbound: int = 0


def _place(
    pool: MigPool, policy: str, arrivals: list[MigRequest], settings: Settings, window_s: int, tally: _Tally
) -> set[int]:
    if policy == OPTIMIZER:
        outcome = plan_window(pool, arrivals, settings, window_s)
        tally.stale += outcome.stale
        tally.unbound += outcome.unbound
        return set(outcome.placed)
    placer = PLACERS[policy]
    return {r.id for r in arrivals if placer(pool, r)}


def simulate(
    trace: MigTrace,
    model: MigModel,
    nodes: int,
    policy: str,
    settings: Settings,
    *,
    seed: int = 0,
    on_window: Callable[[], None] | None = None,
) -> RunResult:
    """Serve ``trace`` with ``policy`` on a pool of ``nodes`` eight-GPU nodes of ``model``."""
    pool = MigPool(model, nodes)
    if policy in STATIC_POLICIES:
        fill_static(pool, policy)
    by_window: dict[int, list[MigRequest]] = {}
    for request in trace.requests:
        by_window.setdefault(request.arrival, []).append(request)
    leaving: dict[int, list[int]] = {}
    tally = _Tally()
    acceptance: list[float] = []
    in_use: list[int] = []
    seconds: list[float] = []
    for window in range(trace.windows):
        pool.depart(leaving.pop(window, []))
        before = pool.layouts()
        arrivals = by_window.get(window, [])
        started = time.perf_counter()
        placed = _place(pool, policy, arrivals, settings, trace.window_s, tally)
        seconds.append(time.perf_counter() - started)
        for request in arrivals:
            if request.id in placed:
                leaving.setdefault(request.departs, []).append(request.id)
        tally.arrived += len(arrivals)
        tally.placed += len(placed)
        tally.reconfigured += sum(1 for a, b in zip(before, pool.layouts(), strict=True) if a != b)
        acceptance.append(tally.placed / tally.arrived if tally.arrived else 1.0)
        in_use.append(pool.in_use())
        if on_window is not None:
            on_window()
    return RunResult(
        pool=model.name,
        seed=seed,
        policy=policy,
        gpus=len(pool.gpus),
        arrived=tally.arrived,
        placed=tally.placed,
        acceptance_series=tuple(acceptance),
        in_use_series=tuple(in_use),
        reconfigured=tally.reconfigured,
        moved=pool.moved,
        illegal=pool.illegal,
        stale=tally.stale,
        unbound=tally.unbound,
        plan_seconds=tuple(seconds),
    )
