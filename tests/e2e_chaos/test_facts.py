"""Raw objects to facts: tolerant parsing, never through optsched's own readers."""

from __future__ import annotations

from e2e.chaos.facts import gpu_request, indices, pod_fact, quota_fact, record_fact, workload_fact
from tests.e2e_chaos.objects import CHECK, cluster_queue, pod, workload


def test_a_record_that_is_not_the_documented_shape_is_no_record() -> None:
    assert record_fact("{not json") is None
    assert record_fact('{"podSets": {}}') is None
    record = record_fact(
        '{"planId": "p", "podSets": {"main": [{"index": 0, "node": "n1", "gpus": [2]}, {"x": 1}]}}'
    )
    assert record is not None and [(s.index, s.node, s.gpus) for s in record.slots] == [(0, "n1", (2,))]


def test_gpu_indices_and_requests_read_as_kube_scheduler_counts_them() -> None:
    assert indices("0,1, 3") == (0, 1, 3)
    assert indices("a,1") is None and indices("-1") is None and indices("") is None
    spec = {
        "containers": [{"resources": {"limits": {"nvidia.com/gpu": "2"}}}, {"resources": {"requests": {}}}],
        "initContainers": [{"resources": {"limits": {"nvidia.com/gpu": "3"}}}],
    }
    assert gpu_request(spec) == 3


def test_a_pod_created_onto_a_node_is_told_from_one_a_scheduler_bound() -> None:
    assert pod_fact(pod("a", node="n1")).scheduled
    assert not pod_fact(pod("b", node="n1", bypass=True)).scheduled
    assert pod_fact(pod("c")).scheduled and not pod_fact(pod("c")).bound


def test_workload_status_quota_and_refusal_are_read_from_kueue_fields() -> None:
    raw = workload(
        "w", owner="j", plan="p", slots=[(0, "n1", None)], admitted=True, count=3, evicted="Preempted"
    )
    fact = workload_fact(raw, CHECK)
    assert (fact.admitted, fact.quota_reserved, fact.admitted_pods, fact.preempted) == (True, True, 3, True)
    assert fact.check_state == "Ready" and fact.record is not None and not fact.inactive
    raw["spec"]["active"] = False
    assert workload_fact(raw, CHECK).inactive
    assert quota_fact(cluster_queue(112, 40)).free == 72 and quota_fact(None).free == 0
