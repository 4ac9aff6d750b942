"""The liveness rules over time: stuck admitted pods, fitting workloads never admitted, lost workloads."""

from __future__ import annotations

from e2e.chaos.capacity import Demand
from e2e.chaos.liveness import Liveness, Tracked
from tests.e2e_chaos.objects import cluster_queue, node, observe, pod, workload

GANG = Tracked("job-g", "team/g", "gang", "honest", Demand(2, 4, "H100"))


def checker(bound: float = 100.0) -> Liveness:
    return Liveness({"job-g": GANG}, bound=bound)


def admitted_with_one_pod_gated() -> dict:
    return {
        "workloads": [
            workload("g", owner="job-g", plan="p", slots=[(0, "n1", None), (1, "n1", None)], admitted=True)
        ],
        "pods": [
            pod("g-0", node="n1", gpus=4, plan="p", index=0, pinned="n1", owner="job-g"),
            pod("g-1", gpus=4, plan="p", gated=True, owner="job-g"),
        ],
        "nodes": [node("n1")],
    }


def test_an_admitted_workload_with_a_pod_unbound_past_the_bound_is_stuck_once() -> None:
    rule = checker()
    state = admitted_with_one_pod_gated()
    assert rule.observe(observe(0, **state), 0, frozenset()) == []
    assert rule.observe(observe(90, **state), 0, frozenset()) == []
    found = rule.observe(observe(120, **state), 0, frozenset())
    assert [(v.kind, v.rule) for v in found] == [("S", "admitted-unbound")]
    assert "team/g-1 gated" in found[0].message and "1 of 2 pods bound" in found[0].message
    assert rule.observe(observe(200, **state), 0, frozenset()) == []


def test_time_with_the_control_plane_down_does_not_count_towards_stuck() -> None:
    rule = checker()
    state = admitted_with_one_pod_gated()
    rule.observe(observe(0, **state), 0, frozenset())
    assert rule.observe(observe(150, **state), 60, frozenset()) == []


def test_a_pod_binding_resets_the_timer() -> None:
    rule = checker()
    state = admitted_with_one_pod_gated()
    rule.observe(observe(0, **state), 0, frozenset())
    bound = dict(state, pods=[*state["pods"][:1], pod("g-1", node="n1", gpus=4, owner="job-g")])
    rule.observe(observe(60, **bound), 0, frozenset())
    assert rule.observe(observe(150, **state), 0, frozenset()) == []


def test_a_pending_workload_that_fits_for_the_whole_bound_is_stuck() -> None:
    rule = checker()
    waiting = {"workloads": [workload("g", owner="job-g", reserved=True)], "nodes": [node("n1")]}
    rule.observe(observe(0, **waiting), 0, frozenset())
    found = rule.observe(observe(101, **waiting), 0, frozenset())
    assert [v.rule for v in found] == ["fits-not-admitted"]


def test_a_workload_whose_job_or_pod_is_gone_is_not_stuck() -> None:
    rule = checker()
    orphan = {"workloads": [workload("g", owner="job-g", reserved=True)], "nodes": [node("n1")], "jobs": []}
    rule.observe(observe(0, **orphan), 0, frozenset())
    assert rule.observe(observe(300, **orphan), 0, frozenset()) == []


def test_a_pending_workload_that_does_not_fit_or_lacks_quota_is_not_stuck() -> None:
    for state in (
        {"workloads": [workload("g", owner="job-g")], "nodes": [node("n1")], "quota": cluster_queue(100, 96)},
        {"workloads": [workload("g", owner="job-g", reserved=True)], "nodes": [node("n1", gpus=4)]},
    ):
        rule = checker()
        rule.observe(observe(0, **state), 0, frozenset())
        assert rule.observe(observe(300, **state), 0, frozenset()) == []


def test_capacity_taken_in_between_restarts_the_fits_timer() -> None:
    rule = checker()
    waiting = {"workloads": [workload("g", owner="job-g", reserved=True)], "nodes": [node("n1")]}
    rule.observe(observe(0, **waiting), 0, frozenset())
    rule.observe(observe(50, **waiting, pods=[pod("other", node="n1", gpus=8)]), 0, frozenset())
    assert rule.observe(observe(120, **waiting), 0, frozenset()) == []


def running() -> dict:
    return {
        "workloads": [
            workload("g", owner="job-g", plan="p", slots=[(0, "n1", None), (1, "n2", None)], admitted=True)
        ],
        "pods": [
            pod("g-0", node="n1", gpus=4, owner="job-g"),
            pod("g-1", node="n2", gpus=4, owner="job-g"),
        ],
        "nodes": [node("n1"), node("n2")],
    }


def evicted(reason: str, **kw: bool) -> dict:
    return dict(running(), workloads=[workload("g", owner="job-g", reserved=True, evicted=reason, **kw)])


def test_a_running_workload_evicted_by_an_admission_check_is_lost() -> None:
    rule = checker()
    rule.observe(observe(0, **running()), 0, frozenset())
    assert rule.observe(observe(2, **evicted("AdmissionCheck")), 0, frozenset()) == []
    found = rule.observe(observe(4, **evicted("AdmissionCheck")), 0, frozenset())
    assert [(v.kind, v.rule) for v in found] == [("L", "killed")]
    assert "AdmissionCheck" in found[0].message


def test_preemption_and_a_deleted_node_excuse_a_kill() -> None:
    rule = checker()
    rule.observe(observe(0, **running()), 0, frozenset())
    for t in (2, 4):
        assert rule.observe(observe(t, **evicted("Preempted", preempted=True)), 0, frozenset()) == []
    rule = checker()
    rule.observe(observe(0, **running()), 0, frozenset())
    failed = dict(running(), workloads=[workload("g", owner="job-g", admitted=True, finished="Failed")])
    assert rule.observe(observe(2, **failed), 0, frozenset({"n2"})) == []


def test_a_failed_job_after_it_ran_is_lost_and_a_finished_one_is_not() -> None:
    rule = checker()
    rule.observe(observe(0, **running()), 0, frozenset())
    done = dict(running(), workloads=[workload("g", owner="job-g", admitted=True, finished="Succeeded")])
    assert rule.observe(observe(2, **done), 0, frozenset()) == []
    rule = checker()
    rule.observe(observe(0, **running()), 0, frozenset())
    found = rule.observe(
        observe(
            2,
            **running(),
            jobs=[
                {
                    "metadata": {"uid": "job-g"},
                    "status": {"conditions": [{"type": "Failed", "status": "True"}]},
                }
            ],
        ),
        0,
        frozenset(),
    )
    assert [v.rule for v in found] == ["killed"]


def test_a_workload_evicted_before_any_pod_bound_is_replanned_and_nothing_else() -> None:
    rule = checker()
    gated = admitted_with_one_pod_gated()
    gated["pods"] = gated["pods"][1:]
    rule.observe(observe(0, **gated), 0, frozenset())
    for t in (2, 4):
        assert rule.observe(observe(t, **evicted("AdmissionCheck")), 0, frozenset()) == []


def test_a_workload_refused_by_our_check_is_a_decision_not_a_stall() -> None:
    rule = checker()
    refused = workload("g", owner="job-g", reserved=True)
    refused["status"]["admissionChecks"] = [{"name": "chaos-check", "state": "Rejected"}]
    state = {"workloads": [refused], "nodes": [node("n1")]}
    noted = rule.observe(observe(0, **state), 0, frozenset())
    assert [(v.kind, v.rule) for v in noted] == [("N", "refused")] and "fits now: True" in noted[0].message
    assert rule.observe(observe(300, **state), 0, frozenset()) == []
    assert rule.phases() == {"rejected": 1}


def test_a_workload_killed_before_all_its_pods_ran_is_a_note_not_a_loss() -> None:
    rule = checker()
    rule.observe(observe(0, **admitted_with_one_pod_gated()), 0, frozenset())
    rule.observe(observe(2, **evicted("AdmissionCheck")), 0, frozenset())
    found = rule.observe(observe(4, **evicted("AdmissionCheck")), 0, frozenset())
    assert [(v.kind, v.rule) for v in found] == [("N", "killed-before-complete")]
