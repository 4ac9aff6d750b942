"""The optimizer policy of bench mig: the snapshot it plans, the changes it applies, the pods it binds."""

from __future__ import annotations

import pytest

from optsched import planning
from optsched.bench.mig_optimizer import apply_change, bind_admitted, plan_window
from optsched.bench.mig_snapshot import pool_snapshot
from optsched.bench.mig_state import MigPool
from optsched.bench.mig_trace import MigRequest
from optsched.mig.profiles import MigModel, models
from optsched.model.mig import MigChange, slots
from optsched.model.placement import PodPlacement
from optsched.model.plan import Decision, Plan, PlanStatus, PodSetPlacement, WorkloadDecision
from optsched.settings import Settings

SETTINGS = Settings(time_limit_s=0.5, deterministic_time=True, workers=1)


def _model() -> MigModel:
    return next(m for m in models() if m.name == "A100-80GB")


def _request(rid: int, profile: str) -> MigRequest:
    return MigRequest(id=rid, task=f"t{rid}", share_milli=470, profile=profile, arrival=0, duration=2)


def _pool(gpus: int = 2) -> MigPool:
    """GPU 0 holds two 3g.40gb, the one at start 0 running task 100; the other GPUs are empty."""
    pool = MigPool(_model(), 1, gpus_per_node=gpus)
    assert not pool.set_layout(0, (("3g.40gb", 0), ("3g.40gb", 4)))
    assert pool.bind(100, 0, "3g.40gb", 0)
    return pool


def test_the_snapshot_carries_instances_in_use_allocatable_and_usage() -> None:
    snapshot = pool_snapshot(_pool(), [_request(1, "3g.40gb")], 900)
    (node,) = snapshot.nodes
    assert node.extended == {"nvidia.com/mig-3g.40gb": 2}
    assert snapshot.usage[node.name].extended == {"nvidia.com/mig-3g.40gb": 1}
    assert [(i.profile, i.start, i.in_use) for i in node.mig_gpus[0].instances] == [
        ("3g.40gb", 0, True),
        ("3g.40gb", 4, False),
    ]
    assert node.mig_gpus[0].model == "A100-80GB" and node.mig_gpus[1].instances == ()
    assert node.unhealthy_gpus == frozenset({0, 1})
    (workload,) = snapshot.workloads
    assert workload.pod_sets[0].request.extended == {"nvidia.com/mig-3g.40gb": 1}
    assert snapshot.cluster_queue_of(workload) is not None


def test_the_optimizer_places_what_fits_and_never_moves_a_running_pod() -> None:
    pool = _pool(gpus=1)
    outcome = plan_window(pool, [_request(1, "3g.40gb"), _request(2, "3g.40gb")], SETTINGS, 900)
    # One GPU, four slices left beside the running 3g: only one more 3g fits, whatever the layout.
    assert len(outcome.placed) == 1 and outcome.illegal == 0
    assert pool.where[100] == (0, 0) and pool.moved == 0
    placed = next(iter(outcome.placed))
    assert pool.where[placed] == (0, 4)


def _change(
    pool: MigPool, to: list[tuple[str, int]], from_: list[tuple[str, int]] | None = None
) -> MigChange:
    current = list(pool.gpus[0].layout) if from_ is None else from_
    return MigChange(node=pool.gpus[0].node, gpu=0, from_=slots(current), to=slots(to))


def test_a_stale_or_illegal_change_is_not_applied() -> None:
    pool = _pool()
    before = pool.layouts()
    assert apply_change(pool, _change(pool, [("7g.80gb", 0)], from_=[("7g.80gb", 0)])) == "stale"
    assert apply_change(pool, _change(pool, [("3g.40gb", 0), ("4g.40gb", 2)])) == "illegal"
    assert pool.layouts() == before and pool.illegal == 1 and pool.moved == 0
    unknown = MigChange(node="elsewhere", gpu=0, to=slots([("7g.80gb", 0)]))
    assert apply_change(pool, unknown) == "unknown"


def test_a_change_that_destroys_a_running_instance_counts_a_moved_pod() -> None:
    pool = _pool()
    assert apply_change(pool, _change(pool, [("3g.40gb", 0), ("1g.20gb", 4), ("1g.20gb", 6)])) == "applied"
    assert pool.moved == 0 and pool.where[100] == (0, 0)
    assert apply_change(pool, _change(pool, [("7g.80gb", 0)])) == "applied"
    assert pool.moved == 1 and 100 not in pool.where


def _plan(node: str, *names: str) -> Plan:
    decisions = [
        WorkloadDecision(
            name=f"bench/{name}",
            decision=Decision.ADMIT,
            pod_sets=[PodSetPlacement(name="main", pods=[PodPlacement(index=0, node=node)])],
        )
        for name in names
    ]
    return Plan(status=PlanStatus.OPTIMAL, workloads=decisions)


def test_admitted_pods_bind_to_a_free_instance_of_their_profile_on_their_node() -> None:
    pool = _pool()
    pending = [_request(1, "3g.40gb"), _request(2, "3g.40gb"), _request(3, "1g.10gb")]
    placed, unbound = bind_admitted(
        pool, pending, _plan(pool.gpus[0].node, "req-000001", "req-000002", "req-000003")
    )
    assert placed == [1] and unbound == 2
    assert pool.where[1] == (0, 4)


def test_a_window_applies_the_plans_layout_change_before_binding(monkeypatch: pytest.MonkeyPatch) -> None:
    pool = _pool()
    node = pool.gpus[0].node
    change = MigChange(node=node, gpu=1, to=slots([("1g.10gb", 0), ("3g.40gb", 4)]))
    planned = _plan(node, "req-000001", "req-000002").model_copy(update={"mig_changes": [change]})
    monkeypatch.setattr(planning, "plan", lambda *_args, **_kwargs: planned)
    outcome = plan_window(pool, [_request(1, "3g.40gb"), _request(2, "1g.10gb")], SETTINGS, 900)
    assert outcome.placed == frozenset({1, 2}) and outcome.changes == 1 and outcome.unbound == 0
    # Request 1 takes the free 3g beside the running one (GPU 0 has more slices in use), request 2 the new 1g.
    assert pool.where[1] == (0, 4) and pool.where[2] == (1, 0)
    assert pool.gpus[1].layout == (("1g.10gb", 0), ("3g.40gb", 4)) and pool.moved == 0
