"""The safety rules on canned objects: over-commit (count and index) and escapes."""

from __future__ import annotations

from e2e.chaos.facts import Observation
from e2e.chaos.invariants import Escapes, OverCommit, Records, Violation
from tests.e2e_chaos.objects import node, observe, pod, workload


class Judge:
    """Both safety rules over one shared record history, as the checker runs them."""

    def __init__(self, namespaces: frozenset[str] = frozenset({"team"})) -> None:
        self.records = Records()
        self.over = OverCommit(self.records)
        self.escapes = Escapes(namespaces, self.records)

    def over_commit(self, obs: Observation) -> list[Violation]:
        self.records.remember(obs.workloads)
        return self.over.check(obs)

    def escape(self, obs: Observation) -> list[Violation]:
        self.records.remember(obs.workloads)
        return self.escapes.check(obs)


def two_plans(first: list[int], second: list[int]) -> list[dict]:
    return [
        workload("a", owner="job-a", plan="pa", slots=[(0, "n1", first)], admitted=True),
        workload("b", owner="job-b", plan="pb", slots=[(0, "n1", second)], admitted=True),
    ]


def pinned(name: str, plan: str, gpus: str, owner: str, **kw: object) -> dict:
    count = len(gpus.split(","))
    return pod(name, node="n1", gpus=count, indices=gpus, pinned="n1", plan=plan, index=0, owner=owner, **kw)


def test_two_pods_promised_the_same_gpu_index_are_one_over_commit() -> None:
    judge = Judge()
    pods = [pinned("a-0", "pa", "0,1", "job-a"), pinned("b-0", "pb", "1,2", "job-b")]
    obs = observe(1, pods=pods, nodes=[node("n1")], workloads=two_plans([0, 1], [1, 2]))
    found = judge.over_commit(obs)
    assert [(v.kind, v.rule) for v in found] == [("O", "gpu-index")]
    assert "GPU(s) [1]" in found[0].message and "team/a-0" in found[0].message
    assert judge.over_commit(obs) == [], "an incident is counted once"


def test_disjoint_promises_and_unpinned_or_terminating_pods_are_not_an_index_over_commit() -> None:
    pods = [
        pinned("a-0", "pa", "0,1", "job-a"),
        pinned("b-0", "pb", "2,3", "job-b"),
        pod("self-declared", node="n1", gpus=1, indices="0"),
        pinned("leaving", "pa", "1", "job-a", deleting=True),
    ]
    obs = observe(1, pods=pods, nodes=[node("n1")], workloads=two_plans([0, 1], [2, 3]))
    assert Judge().over_commit(obs) == []


def test_indices_a_slot_does_not_promise_are_a_note_and_not_an_over_commit() -> None:
    plans = [
        workload("a", owner="job-a", plan="pa", slots=[(0, "n1", None)], admitted=True),
        workload("b", owner="job-b", plan="pb", slots=[(0, "n1", [0])], admitted=True),
    ]
    pods = [pinned("a-0", "pa", "0,1,2,4", "job-a"), pinned("b-0", "pb", "0", "job-b")]
    found = Judge().over_commit(observe(1, pods=pods, nodes=[node("n1")], workloads=plans))
    assert [(v.kind, v.rule, v.objects) for v in found] == [("N", "self-declared-indices", ("pod/team/a-0",))]


def test_a_pod_bound_past_allocatable_is_an_over_commit_naming_it() -> None:
    rule = Judge()
    first = [pod("a", node="n1", gpus=6)]
    assert rule.over_commit(observe(1, pods=first, nodes=[node("n1")])) == []
    second = [*first, pod("intruder", node="n1", gpus=4)]
    found = rule.over_commit(observe(2, pods=second, nodes=[node("n1")]))
    assert [(v.rule, v.objects[0]) for v in found] == [("gpu-count", "node/n1")]
    assert "10 GPUs requested" in found[0].message and "team/intruder" in found[0].message


def test_a_pod_created_onto_a_full_node_is_refused_as_a_kubelet_would_and_holds_nothing() -> None:
    rule = Judge()
    full = [pod("a", node="n1", gpus=8)]
    assert rule.over_commit(observe(1, pods=full, nodes=[node("n1")])) == []
    bypass = pod("straight", node="n1", gpus=8, bypass=True)
    found = rule.over_commit(observe(2, pods=[*full, bypass], nodes=[node("n1")]))
    assert [(v.kind, v.rule) for v in found] == [("N", "kubelet-refused")]
    later = pod("later", node="n1", gpus=1)
    assert [
        v.rule for v in rule.over_commit(observe(3, pods=[*full, bypass, later], nodes=[node("n1")]))
    ] == ["gpu-count"], (
        "the refused pod holds nothing; the scheduler's pod past allocatable is still an over-commit"
    )


def test_a_pod_created_onto_free_gpus_holds_them() -> None:
    rule = Judge()
    bypass = pod("straight", node="n1", gpus=6, bypass=True)
    assert rule.over_commit(observe(1, pods=[bypass], nodes=[node("n1")])) == []
    third = pod("third", node="n1", gpus=4)
    assert [v.rule for v in rule.over_commit(observe(2, pods=[bypass, third], nodes=[node("n1")]))] == [
        "gpu-count"
    ]


def test_a_gpu_turning_unhealthy_under_running_pods_is_not_an_over_commit_but_binding_onto_it_is() -> None:
    rule = Judge()
    full = [pod(f"p{i}", node="n1", gpus=1) for i in range(8)]
    assert rule.over_commit(observe(1, pods=full, nodes=[node("n1")])) == []
    assert rule.over_commit(observe(2, pods=full, nodes=[node("n1", allocatable=7)])) == []
    refill = [*full[1:], pod("late", node="n1", gpus=1)]
    assert [v.rule for v in rule.over_commit(observe(3, pods=refill, nodes=[node("n1", allocatable=7)]))] == [
        "gpu-count"
    ]


def test_a_bind_racing_a_health_flip_is_judged_against_the_allocatable_it_saw() -> None:
    rule = Judge()
    seven = [pod(f"p{i}", node="n1", gpus=1) for i in range(7)]
    assert rule.over_commit(observe(1, pods=seven, nodes=[node("n1")])) == []
    eight = [*seven, pod("p7", node="n1", gpus=1)]
    assert rule.over_commit(observe(2, pods=eight, nodes=[node("n1", allocatable=7)])) == []


def test_pods_on_a_deleted_node_and_finished_pods_are_not_judged() -> None:
    pods = [
        pod("orphan", node="gone", gpus=8, indices="0", pinned="gone"),
        pod("orphan2", node="gone", gpus=8, indices="0", pinned="gone"),
        pod("done", node="n1", gpus=8, phase="Succeeded"),
        pod("now", node="n1", gpus=8),
    ]
    assert Judge().over_commit(observe(1, pods=pods, nodes=[node("n1")])) == []


def pinned_victim() -> tuple[dict, dict]:
    victim = workload("v", owner="job-v", plan="p1", slots=[(0, "n1", [0, 1])], admitted=True)
    return victim, pod(
        "v-0", node="n1", gpus=2, indices="0,1", pinned="n1", plan="p1", index=0, owner="job-v"
    )


def test_a_pod_pinned_to_its_own_slot_is_entitled() -> None:
    victim, victim_pod = pinned_victim()
    rule = Judge()
    for t in (1, 5, 9):
        assert rule.escape(observe(t, pods=[victim_pod], nodes=[node("n1")], workloads=[victim])) == []


def test_a_tenant_pod_pinned_into_another_workloads_slot_is_a_stolen_slot() -> None:
    victim, _ = pinned_victim()
    thief = pod("thief", namespace="evil", node="n1", gpus=2, indices="0,1", pinned="n1", plan="p1", index=0)
    rule = Judge(frozenset({"team", "evil"}))
    obs = {"pods": [thief], "nodes": [node("n1")], "workloads": [victim]}
    assert rule.escape(observe(1, **obs)) == [], "one observation is not enough"
    found = rule.escape(observe(5, **obs))
    assert [(v.kind, v.rule) for v in found] == [("E", "stolen-slot")]
    assert "evil/thief" in found[0].message and "team/v" in found[0].message
    assert rule.escape(observe(9, **obs)) == []


def test_a_managed_pod_running_without_a_pin_is_an_unpinned_run() -> None:
    own = workload("t", namespace="evil", owner="job-t", plan="p2", slots=[(0, "n2", [0])], admitted=True)
    lifted = pod("t-0", namespace="evil", node="n1", gpus=1, plan="p2", owner="job-t")
    rule = Judge(frozenset({"evil"}))
    rule.escape(observe(1, pods=[lifted], nodes=[node("n1"), node("n2")], workloads=[own]))
    found = rule.escape(observe(4, pods=[lifted], nodes=[node("n1"), node("n2")], workloads=[own]))
    assert [v.rule for v in found] == ["unpinned-run"]


def test_an_ordinary_pod_outside_any_queue_is_not_an_escape() -> None:
    plain = pod("batch", namespace="evil", node="n1", gpus=8)
    forged = pod("forged", namespace="evil", node="n1", gpus=8, plan="p1", index=0)
    rule = Judge(frozenset({"evil"}))
    for t in (1, 5):
        assert rule.escape(observe(t, pods=[plain, forged], nodes=[node("n1")])) == []


def test_a_pod_entitled_by_an_earlier_record_stays_entitled_after_a_replan() -> None:
    first = workload("w", owner="job-w", plan="p1", slots=[(0, "n1", [0])], admitted=True)
    replanned = workload("w", owner="job-w", plan="p9", slots=[(0, "n2", [0])], admitted=True)
    running = pod("w-0", node="n1", gpus=1, indices="0", pinned="n1", plan="p1", index=0, owner="job-w")
    rule = Judge()
    assert rule.escape(observe(1, pods=[], nodes=[node("n1")], workloads=[first])) == []
    for t in (2, 6):
        assert (
            rule.escape(observe(t, pods=[running], nodes=[node("n1"), node("n2")], workloads=[replanned]))
            == []
        )


def test_a_pin_by_node_affinity_on_the_node_name_entitles_like_a_hostname_selector() -> None:
    own = workload("w", owner="job-w", plan="p1", slots=[(0, "n1", [0])], admitted=True)
    running = pod("w-0", node="n1", gpus=1, indices="0", plan="p1", index=0, owner="job-w")
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
    running["spec"]["affinity"] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
    }
    rule = Judge()
    for t in (1, 5):
        assert rule.escape(observe(t, pods=[running], nodes=[node("n1")], workloads=[own])) == []
