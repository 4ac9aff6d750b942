"""Admitted Workloads whose pods are not running yet hold their nodes where their admission says."""

from __future__ import annotations

import json
from typing import Any

from optsched import planning
from optsched.model.names import PLACEMENT_ANNOTATION
from optsched.model.snapshot import AssumedPod, PodRequest
from optsched.snapshot.build import snapshot_from_objects
from tests.snapshot.raw import HOSTNAME, RACK, cluster_queue, hostnames, node, pod, queue_objects, workload


def gpus_taken(snap: Any, name: str) -> int:
    usage = snap.usage_of(name)
    return usage.unknown_index_gpus + sum(1 for milli in usage.gpu_milli if milli)


def test_a_tas_admission_without_pods_holds_its_node_against_a_pending_workload() -> None:
    admitted = workload("tas", gpus=4, count=2, admitted=True, topology=hostnames(("n1", 2)))
    objects = [node("n1"), node("n2"), cluster_queue(gpus=16), *queue_objects(), admitted]
    objects.append(workload("next", gpus=8))
    snap = snapshot_from_objects(objects)
    assert gpus_taken(snap, "n1") == 8
    assert not snap.warnings
    decision = planning.plan(snap).decision("ml/next")
    assert decision is not None and decision.decision == "admit"
    assert {p.node for ps in decision.pod_sets for p in ps.pods} == {"n2"}


def test_with_its_only_node_held_a_pending_workload_is_deferred() -> None:
    admitted = workload("tas", gpus=8, admitted=True, topology=hostnames(("n1", 1)))
    snap = snapshot_from_objects(
        [node("n1"), cluster_queue(gpus=16), *queue_objects(), admitted, workload("next")]
    )
    assert planning.plan(snap).decision("ml/next").decision == "defer"  # type: ignore[union-attr]


def test_pods_already_bound_are_not_held_twice() -> None:
    admitted = workload(
        "tas", gpus=2, count=3, admitted=True, topology=hostnames(("n1", 2), ("n2", 1)), owner="job"
    )
    objects = [node("n1"), node("n2"), admitted, pod("tas-0", "n1", gpus=2, owner="job")]
    objects.append(pod("tas-1", "n2", gpus=2, annotations={"kueue.x-k8s.io/workload": "tas"}))
    snap = snapshot_from_objects(objects)
    # n1: one bound pod and one held; n2: its one pod is bound.
    assert (gpus_taken(snap, "n1"), gpus_taken(snap, "n2")) == (4, 2)
    assert snap.usage_of("n1").pods == 2 and snap.usage_of("n2").pods == 1


def test_a_rack_level_assignment_pins_only_where_the_rack_is_one_node() -> None:
    rack_level = {
        "levels": [RACK],
        "domains": [{"values": ["r1"], "count": 1}, {"values": ["r2"], "count": 1}],
    }
    admitted = workload("tas", gpus=2, count=2, admitted=True, topology=rack_level)
    snap = snapshot_from_objects([node("a", rack="r1"), node("b", rack="r1"), node("c", rack="r2"), admitted])
    assert (gpus_taken(snap, "a"), gpus_taken(snap, "b"), gpus_taken(snap, "c")) == (0, 0, 2)
    (warning,) = snap.warnings
    assert "Workload ml/tas is admitted but 1 pod(s) of PodSet main are not among the bound pods" in warning
    assert "count against ClusterQueue cq quota only" in warning


def test_without_topology_or_record_an_admission_holds_quota_and_says_so() -> None:
    snap = snapshot_from_objects([node("n1"), cluster_queue(), workload("plain", admitted=True)])
    assert gpus_taken(snap, "n1") == 0
    assert snap.cluster_queues[0].usage["h100"]["nvidia.com/gpu"] == 2
    (warning,) = snap.warnings
    assert "Workload ml/plain is admitted but 1 pod(s) of PodSet main are not among the bound pods" in warning
    assert "neither a placement record nor a Kueue topologyAssignment names their nodes" in warning


def test_optscheds_placement_record_holds_the_free_slots_with_their_gpus() -> None:
    record = {
        "planId": "p1",
        "podSets": {
            "main": [
                {"index": 0, "node": "n1", "gpus": [0, 1]},
                {"index": 1, "node": "n1", "gpus": [2, 3]},
            ]
        },
    }
    admitted = workload(
        "ours", gpus=2, count=2, admitted=True, annotations={PLACEMENT_ANNOTATION: json.dumps(record)}
    )
    started = pod(
        "ours-0",
        "n1",
        gpus=2,
        labels={"optsched.io/plan-id": "p1", "optsched.io/podset": "main"},
        annotations={"optsched.io/pod-index": "0", "optsched.io/gpus": "0,1"},
    )
    snap = snapshot_from_objects([node("n1"), admitted, started])
    usage = snap.usage_of("n1")
    assert usage.gpu_milli[:5] == (1000, 1000, 1000, 1000, 0) and usage.unknown_index_gpus == 0
    assert usage.pods == 2


def test_the_controllers_own_assumed_pods_are_not_counted_again() -> None:
    record = {"planId": "p1", "podSets": {"main": [{"index": 0, "node": "n1", "gpus": [0, 1]}]}}
    admitted = workload("ours", gpus=2, admitted=True, annotations={PLACEMENT_ANNOTATION: json.dumps(record)})
    mine = AssumedPod(workload="ml/ours", node="n1", request=PodRequest(gpus=2), gpus=(0, 1))
    snap = snapshot_from_objects([node("n1"), admitted], assumed=[mine])
    assert snap.usage_of("n1").pods == 1 and gpus_taken(snap, "n1") == 2


def test_a_v1beta2_sliced_assignment_holds_its_nodes() -> None:
    sliced = {
        "levels": [HOSTNAME],
        "slices": [
            {
                "domainCount": 2,
                "valuesPerLevel": [{"prefix": "n", "roots": ["1", "2"]}],
                "universalPodCount": 1,
            }
        ],
    }
    snap = snapshot_from_objects(
        [node("n1"), node("n2"), workload("tas", gpus=8, count=2, admitted=True, topology=sliced)]
    )
    assert (gpus_taken(snap, "n1"), gpus_taken(snap, "n2")) == (8, 8)


def test_a_malformed_assignment_is_named_and_its_reservation_still_counts() -> None:
    broken = workload("tas", admitted=True, topology={"levels": [HOSTNAME], "domains": "n1"})
    snap = snapshot_from_objects([node("n1"), cluster_queue(), broken])
    assert snap.cluster_queues[0].usage["h100"]["nvidia.com/gpu"] == 2
    assert any("status.admission.podSetAssignments[0].topologyAssignment.domains" in w for w in snap.warnings)


def test_a_huge_admitted_count_holds_at_most_what_the_node_can_run() -> None:
    admitted = workload("tas", gpus=0, count=10**9, admitted=True, topology=hostnames(("n1", 10**9)))
    snap = snapshot_from_objects([node("n1"), admitted])
    assert snap.usage_of("n1").pods == 110


def test_a_deactivated_workload_keeps_its_quota_until_released_but_holds_no_node() -> None:
    stopping = workload("stopping", gpus=4, admitted=True, topology=hostnames(("n1", 1)))
    stopping["spec"]["active"] = False
    snap = snapshot_from_objects([node("n1"), cluster_queue(gpus=8), stopping])
    assert snap.cluster_queues[0].usage["h100"]["nvidia.com/gpu"] == 4
    assert gpus_taken(snap, "n1") == 0 and not snap.warnings
