"""A node whose device plugin reports GPUs unhealthy: capacity keeps the indices, allocatable drops them."""

from __future__ import annotations

import json
from typing import Any

from optsched.snapshot.build import snapshot_from_objects
from tests.snapshot.raw import GPU, node, node_gpus


def degraded(name: str, allocatable: int, capacity: int = 8) -> dict[str, Any]:
    obj = node(name, gpus=allocatable)
    obj["status"]["capacity"] = {**obj["status"]["allocatable"], GPU: str(capacity)}
    return obj


def test_a_gpu_reported_unhealthy_keeps_its_index_and_only_it_is_left_out() -> None:
    snap = snapshot_from_objects([degraded("n1", 7), node_gpus("n1", unhealthy=(3,))])
    (n1,) = snap.nodes
    assert n1.gpu_count == 8
    assert n1.healthy_gpus == (0, 1, 2, 4, 5, 6, 7)


def test_the_annotation_explains_the_shortfall_as_well() -> None:
    obj = degraded("n1", 7)
    obj["metadata"]["annotations"] = {
        "optsched.io/gpu-topology": json.dumps({"nvlinkIslands": [list(range(8))], "unhealthy": [5]})
    }
    (n1,) = snapshot_from_objects([obj]).nodes
    assert n1.healthy_gpus == (0, 1, 2, 3, 4, 6, 7)


def test_a_shortfall_nobody_explains_keeps_allocatables_count() -> None:
    (n1,) = snapshot_from_objects([degraded("n1", 6), node_gpus("n1", unhealthy=(3,))]).nodes
    assert len(n1.healthy_gpus) <= 6, "never more usable GPUs than the node advertises"
    (n2,) = snapshot_from_objects([degraded("n2", 7)]).nodes
    assert n2.gpu_count == 7


def test_a_gpu_partitioned_by_mig_keeps_its_index_and_takes_no_whole_gpu_pod() -> None:
    gpus = node_gpus("n1")
    gpus["status"]["gpus"][0]["mig"] = {"capable": True, "enabled": True, "instances": []}
    (n1,) = snapshot_from_objects([degraded("n1", 7, capacity=7), gpus]).nodes
    assert n1.gpu_count == 8
    assert n1.healthy_gpus == (1, 2, 3, 4, 5, 6, 7)


def test_whole_gpus_asked_by_two_containers_are_marked_split() -> None:
    from optsched.snapshot.pods import pod_request  # only this test reads a single pod spec

    def container(gpus: int) -> dict[str, object]:
        return {"name": f"c{gpus}", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}

    obj = {"kind": "Pod", "metadata": {"name": "p"}}
    one = pod_request({"containers": [container(2), {"name": "sidecar"}]}, obj=obj, field="spec")
    two = pod_request({"containers": [container(2), container(1)]}, obj=obj, field="spec")
    assert (one.gpus, one.split_gpus) == (2, False)
    assert (two.gpus, two.split_gpus) == (3, True)
