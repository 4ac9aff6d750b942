"""The ``optimizer`` policy of ``optsched bench mig``: one window's arrivals planned by optsched's planner.

The pool and the window's requests become a snapshot
(:mod:`optsched.bench.mig_snapshot`), planned by
:func:`optsched.planning.plan` under the settings the benchmark gives
(a deterministic budget on one worker). Then, as the controller and the node
agents would:

- each of ``plan.mig_changes`` is checked: its ``from`` must be the GPU's
  layout now (else it is stale and skipped), its ``to`` must pass
  :func:`~optsched.mig.layout.layout_problems` (else it is illegal and
  skipped); it is applied through :meth:`MigPool.set_layout`, which counts
  every running instance it would destroy as a pod that had to move;
- each admitted pod is bound to a free instance of its profile on its
  planned node (the GPU with the most slices in use first); an admitted pod
  whose node has no such instance is counted and not placed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from optsched import planning
from optsched.bench.mig_snapshot import NAMESPACE, pool_snapshot, workload_name
from optsched.bench.mig_state import Layout, MigPool, used_slices
from optsched.bench.mig_trace import MigRequest
from optsched.model.mig import MigChange, MigSlotView
from optsched.model.plan import Decision, Plan
from optsched.settings import Settings


@dataclass(frozen=True)
class WindowPlan:
    """What one window's plan did: requests placed, and what was refused or lost."""

    placed: frozenset[int]
    plan_seconds: float
    changes: int
    stale: int
    illegal: int
    unbound: int
    status: str


def plan_window(pool: MigPool, pending: list[MigRequest], settings: Settings, window_s: int) -> WindowPlan:
    """Plan ``pending`` on ``pool`` with the optimizer, apply its layout changes and bind its pods."""
    snapshot = pool_snapshot(pool, pending, window_s)
    started = time.perf_counter()
    plan = planning.plan(snapshot, settings, check=False)
    seconds = time.perf_counter() - started
    stale = illegal = 0
    for change in plan.mig_changes:
        outcome = apply_change(pool, change)
        stale += outcome == "stale"
        illegal += outcome == "illegal"
    placed, unbound = bind_admitted(pool, pending, plan)
    return WindowPlan(
        placed=frozenset(placed),
        plan_seconds=seconds,
        changes=len(plan.mig_changes),
        stale=stale,
        illegal=illegal,
        unbound=unbound,
        status=str(plan.status),
    )


def apply_change(pool: MigPool, change: MigChange) -> str:
    """Apply one planned layout change: ``applied``, or why not (``unknown``, ``stale``, ``illegal``)."""
    pos = pool.gpu(change.node, change.gpu)
    if pos is None:
        return "unknown"
    if _layout(change.from_) != pool.gpus[pos].layout:
        return "stale"
    target = _layout(change.to)
    return "illegal" if pool.set_layout(pos, target) else "applied"


def _layout(views: tuple[MigSlotView, ...]) -> Layout:
    return tuple(sorted(((s.profile, s.start) for s in views), key=lambda x: (x[1], x[0])))


def bind_admitted(pool: MigPool, pending: list[MigRequest], plan: Plan) -> tuple[list[int], int]:
    """Bind every admitted pod to a free instance of its profile on its node; (placed ids, unbound count)."""
    by_name = {f"{NAMESPACE}/{workload_name(r)}": r for r in pending}
    placed: list[int] = []
    unbound = 0
    for decision in plan.workloads:
        request = by_name.get(decision.name)
        if request is None or decision.decision is not Decision.ADMIT:
            continue
        nodes = [p.node for ps in decision.pod_sets for p in ps.pods if p.node]
        if not nodes or not _bind_on_node(pool, request, nodes[0]):
            unbound += 1
            continue
        placed.append(request.id)
    return placed, unbound


def _bind_on_node(pool: MigPool, request: MigRequest, node: str) -> bool:
    options = [
        (-len(used_slices(pool.model, g.busy)), g.index, pos)
        for pos, g in enumerate(pool.gpus)
        if g.node == node and g.free_instance(request.profile) is not None
    ]
    if not options:
        return False
    return pool.bind(request.id, min(options)[2], request.profile)
