"""Policies by name: baselines give valid HEURISTIC plans; unknown names are input errors."""

import pytest

from optsched import planning
from optsched.errors import InputError
from optsched.model.plan import PlanStatus
from optsched.planning import POLICIES
from optsched.settings import Settings
from optsched.validate import check_plan
from tests.builders import RACK, node, pods, snapshot, workload

SNAP = snapshot(
    [node("n1", rack="r1"), node("n2", rack="r1"), node("n3", rack="r2")],
    [
        workload("gang", pods(2, 8, required_topology=RACK), priority=5),
        workload("small", pods(2, 2)),
        workload("share", pods(1, 1, gpu_milli=500)),
        workload("huge", pods(1, 16)),
    ],
)


def test_unknown_policy_names_the_valid_ones() -> None:
    with pytest.raises(InputError) as caught:
        planning.plan(SNAP, policy="worstfit")
    message = str(caught.value)
    assert "unknown policy 'worstfit'" in message
    assert all(name in message for name in POLICIES)
    assert caught.value.field == "policy"


@pytest.mark.parametrize("name", [p for p in POLICIES if p != "optimizer"])
def test_baselines_give_valid_heuristic_plans(name: str) -> None:
    plan = planning.plan(SNAP, policy=name)
    assert plan.status is PlanStatus.HEURISTIC
    assert plan.policy == name
    assert check_plan(SNAP, plan) == []
    assert {w.name for w in plan.admitted} == {"default/gang", "default/small", "default/share"}
    huge = plan.decision("default/huge")
    assert huge is not None and [r.message for r in huge.reasons] == [
        "pod set main: a pod needs 16 GPUs; the largest node its filters allow (n1) has 8 GPUs, "
        "so it can never fit"
    ]


def test_policy_names_are_forgiving_about_case_and_dashes() -> None:
    assert planning.plan(SNAP, policy="Best-Fit").policy == "bestfit"


def test_nothing_pending_gives_an_empty_plan() -> None:
    plan = planning.plan(snapshot([node("n1")], []), policy="bestfit")
    assert plan.status is PlanStatus.EMPTY
    assert plan.workloads == []


def test_settings_can_override_topology_levels() -> None:
    # Rack "r1" exists in two blocks: by default those are two racks, so the gang cannot share one.
    # Without the block level they are one rack.
    snap = snapshot(
        [node("n1", rack="r1", block="b1"), node("n2", rack="r1", block="b2")],
        [workload("gang", pods(2, 8, required_topology=RACK))],
    )
    assert planning.plan(snap, policy="firstfit").admitted == []
    flat = Settings(topology_levels=(RACK, "kubernetes.io/hostname"))
    plan = planning.plan(snap, flat, "firstfit")
    assert [w.name for w in plan.admitted] == ["default/gang"]


@pytest.mark.parametrize("name", ["optimizer", "bestfit", "tas"])
def test_one_plan_reads_the_snapshots_capacity_and_quota_once(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from optsched.capacity.state import ClusterState
    from optsched.kueue.quota import QuotaLedger

    calls = {"state": 0, "ledger": 0}
    state_of, ledger_of = ClusterState.from_snapshot.__func__, QuotaLedger.from_snapshot.__func__  # type: ignore[attr-defined]

    def count_state(cls: type[ClusterState], snap: object) -> ClusterState:
        calls["state"] += 1
        return state_of(cls, snap)  # type: ignore[no-any-return]

    def count_ledger(cls: type[QuotaLedger], snap: object) -> QuotaLedger:
        calls["ledger"] += 1
        return ledger_of(cls, snap)  # type: ignore[no-any-return]

    monkeypatch.setattr(ClusterState, "from_snapshot", classmethod(count_state))
    monkeypatch.setattr(QuotaLedger, "from_snapshot", classmethod(count_ledger))
    planning.plan(SNAP, policy=name)
    assert calls == {"state": 1, "ledger": 1}


@pytest.mark.parametrize("name", ["optimizer", "bestfit"])
def test_one_plan_filters_the_nodes_once_per_podset_shape(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The greedy walk, the solver's candidates and the reasons share one eligibility memo per plan.
    import optsched.capacity.eligibility as eligibility

    calls = {"n": 0}
    filter_nodes = eligibility._eligible

    def counted(*args: object) -> object:
        calls["n"] += 1
        return filter_nodes(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(eligibility, "_eligible", counted)
    planning.plan(SNAP, policy=name)
    shapes = {
        eligibility.eligibility_key(eligibility.flavors_of(SNAP, w, ps), ps)
        for w in SNAP.workloads
        for ps in w.pod_sets
    }
    assert calls["n"] == len(shapes) > 0
