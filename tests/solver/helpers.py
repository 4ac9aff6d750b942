"""Shared helpers for the solver tests: fast, deterministic settings and plan checks."""

from __future__ import annotations

from optsched import planning
from optsched.model.plan import Plan, PlanStatus
from optsched.model.snapshot import Snapshot
from optsched.settings import Settings
from optsched.validate import check_plan

FAST = Settings(time_limit_s=5.0, workers=1, random_seed=7)


def plan_for(
    snapshot: Snapshot,
    settings: Settings = FAST,
    previous: Plan | None = None,
    *,
    allow_fallback: bool = False,
) -> Plan:
    """Solve and insist the plan is valid (and came from the solver unless a fallback is expected)."""
    plan = planning.plan(snapshot, settings, previous=previous, check=False)
    assert check_plan(snapshot, plan) == []
    if not allow_fallback:
        assert plan.status != PlanStatus.FALLBACK, plan.warnings
        assert not any("continues from the greedy placement" in w for w in plan.warnings), plan.warnings
    return plan


def admitted(plan: Plan) -> set[str]:
    return {w.name.split("/", 1)[1] for w in plan.admitted}


def nodes_of(plan: Plan, name: str) -> list[str]:
    decision = plan.decision(f"default/{name}")
    assert decision is not None
    return [pod.node for ps in decision.pod_sets for pod in ps.pods]


def gpus_of(plan: Plan, name: str) -> list[tuple[int, ...] | None]:
    decision = plan.decision(f"default/{name}")
    assert decision is not None
    return [pod.gpus for ps in decision.pod_sets for pod in ps.pods]
