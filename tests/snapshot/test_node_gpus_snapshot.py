"""NodeGPUs in a snapshot: it wins over the topology annotation, its pods' devices over optsched.io/gpus."""

from __future__ import annotations

import json
from typing import Any

import pytest

from optsched import planning
from optsched.model.snapshot import FULL_GPU_MILLI, Snapshot
from optsched.settings import Settings
from optsched.snapshot.build import snapshot_from_objects
from tests.snapshot.raw import (
    NODE_GPUS_API,
    cluster_queue,
    holding,
    node,
    node_gpus,
    pod,
    queue_objects,
    uuid,
    workload,
)

TOPOLOGY = "optsched.io/gpu-topology"
ONE_BOARD = json.dumps({"nvlinkIslands": [list(range(8))], "numa": [0] * 8, "unhealthy": [3]})


def annotated(name: str, topology: str | None = ONE_BOARD, *, gpus: int = 8) -> dict[str, Any]:
    obj = node(name, gpus=gpus)
    if topology is not None:
        obj["metadata"]["annotations"] = {TOPOLOGY: topology}
    return obj


def only_node(snap: Snapshot):  # type: ignore[no-untyped-def]
    [one] = snap.nodes
    return one


def test_a_valid_node_gpus_wins_over_the_annotation() -> None:
    gpus = node_gpus("n1", islands=[[0, 1, 2, 3], [4, 5, 6, 7]], unhealthy=(6,))
    snap = snapshot_from_objects([annotated("n1"), gpus])
    n1 = only_node(snap)
    assert n1.nvlink_islands == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert n1.unhealthy_gpus == frozenset({6})
    assert n1.numa == (0, 0, 0, 0, 1, 1, 1, 1)
    assert n1.gpu_uuids == tuple(uuid("n1", i) for i in range(8))
    assert snap.warnings == ()


def test_a_valid_node_gpus_keeps_a_node_whose_annotation_is_malformed() -> None:
    snap = snapshot_from_objects([annotated("n1", "{not json"), node_gpus("n1")])
    assert only_node(snap).nvlink_islands == (tuple(range(8)),)
    assert snap.warnings == ()


def test_a_malformed_node_gpus_is_left_out_and_the_node_reads_its_annotation() -> None:
    gpus = node_gpus("n1", islands=[[0, 1], [2, 3, 4, 5, 6, 7]])
    gpus["status"]["gpus"][2]["health"] = {"state": "Broken"}
    snap = snapshot_from_objects([annotated("n1"), gpus], source="dump.yaml")
    n1 = only_node(snap)
    assert n1.nvlink_islands == (tuple(range(8)),) and n1.unhealthy_gpus == frozenset({3})
    [left_out] = snap.left_out
    assert (left_out.kind, left_out.name) == ("NodeGPUs", "n1")
    assert left_out.message.startswith("dump.yaml: NodeGPUs n1: field status.gpus[2].health.state:")
    assert f"Node n1 falls back to its {TOPOLOGY} annotation (no NVLink without one)" in snap.warnings


def test_the_annotation_fills_the_uuids_where_there_is_no_node_gpus() -> None:
    uuids = [uuid("n1", i) for i in range(2)]
    snap = snapshot_from_objects([annotated("n1", json.dumps({"uuids": uuids}), gpus=2)])
    assert only_node(snap).gpu_uuids == tuple(uuids)


def test_a_node_advertising_fewer_gpus_by_exactly_its_unhealthy_ones_keeps_every_index() -> None:
    gpus = node_gpus("n1", islands=[[0, 1, 2, 3], [4, 5, 6, 7]], unhealthy=(2, 7))
    snap = snapshot_from_objects([annotated("n1", None, gpus=6), gpus])
    n1 = only_node(snap)
    assert n1.gpu_count == 8, "kubelet leaves the 2 unhealthy GPUs out of allocatable"
    assert n1.healthy_gpus == (0, 1, 3, 4, 5, 6)
    assert snap.warnings == ()


def test_a_node_gpus_listing_more_gpus_than_the_node_advertises_is_fitted_with_a_warning() -> None:
    gpus = node_gpus("n1", islands=[[0, 1, 2, 3], [4, 5, 6, 7]], unhealthy=(2,))
    snap = snapshot_from_objects([annotated("n1", None, gpus=6), gpus])
    n1 = only_node(snap)
    assert n1.gpu_count == 6
    assert n1.nvlink_islands == ((0, 1, 2, 3), (4, 5))
    assert n1.healthy_gpus == (0, 1, 3, 4, 5)
    [warning] = snap.warnings
    assert warning.startswith("Node n1: NodeGPUs n1 lists 8 GPUs but the node advertises nvidia.com/gpu: 6")


def test_a_node_gpus_listing_fewer_gpus_plans_only_those() -> None:
    snap = snapshot_from_objects([annotated("n1", None, gpus=8), node_gpus("n1", gpus=4)])
    assert only_node(snap).gpu_count == 4
    assert "only GPUs 0..3 are planned" in snap.warnings[0]


def test_a_node_gpus_of_no_known_node_is_ignored_with_a_note() -> None:
    snap = snapshot_from_objects([annotated("n1"), node_gpus("gone", unhealthy=(0,))])
    assert only_node(snap).unhealthy_gpus == frozenset({3})
    assert snap.warnings == ("NodeGPUs gone: no Node gone in the input; ignored",)


def test_another_version_is_left_out_and_another_group_is_not_ours() -> None:
    newer = {**node_gpus("n1", unhealthy=(0,)), "apiVersion": "optsched.io/v1"}
    theirs = {**node_gpus("n2", unhealthy=(0,)), "apiVersion": "example.com/v1alpha1"}
    snap = snapshot_from_objects([annotated("n1"), annotated("n2"), newer, theirs])
    assert [n.unhealthy_gpus for n in snap.nodes] == [frozenset({3}), frozenset({3})]
    [left_out] = snap.left_out
    assert left_out.name == "n1"
    assert f"apiVersion 'optsched.io/v1' is not read (expected {NODE_GPUS_API})" in left_out.message


def test_two_copies_of_a_node_gpus_are_read_once() -> None:
    old = node_gpus("n1", unhealthy=(0,))
    old["metadata"]["resourceVersion"] = "5"
    new = node_gpus("n1", unhealthy=(1,))
    new["metadata"]["resourceVersion"] = "9"
    snap = snapshot_from_objects([annotated("n1"), new, old])
    assert only_node(snap).unhealthy_gpus == frozenset({1})
    assert any(w.startswith("NodeGPUs n1 appears 2 times") for w in snap.warnings)


def _used(snap: Snapshot, name: str = "n1") -> list[int]:
    """GPU indices in use on the node."""
    return [g for g, milli in enumerate(snap.usage_of(name).gpu_milli) if milli == FULL_GPU_MILLI]


def test_the_devices_a_pod_really_holds_override_its_annotation() -> None:
    planned = pod("a-0", "n1", gpus=2, annotations={"optsched.io/gpus": "0,1"})
    gpus = node_gpus("n1", pods=[holding("n1", "a-0", 5, 4)])
    assert _used(snapshot_from_objects([annotated("n1"), planned])) == [0, 1]
    snap = snapshot_from_objects([annotated("n1"), planned, gpus])
    assert _used(snap) == [4, 5]
    assert snap.usage_of("n1").unknown_index_gpus == 0 and snap.warnings == ()


def test_a_pod_listed_without_devices_keeps_its_annotation() -> None:
    planned = pod("a-0", "n1", gpus=2, annotations={"optsched.io/gpus": "0,1"})
    gpus = node_gpus("n1", pods=[{"namespace": "ml", "name": "a-0", "containers": [{"name": "c"}]}])
    assert _used(snapshot_from_objects([annotated("n1"), planned, gpus])) == [0, 1]


def test_devices_that_cannot_be_placed_are_of_unknown_index() -> None:
    planned = pod("a-0", "n1", gpus=2, annotations={"optsched.io/gpus": "0,1"})
    stray = {"namespace": "ml", "name": "a-0", "containers": [{"name": "c", "gpuUUIDs": ["GPU-x", "GPU-y"]}]}
    snap = snapshot_from_objects([annotated("n1"), planned, node_gpus("n1", pods=[stray])])
    assert _used(snap) == [] and snap.usage_of("n1").unknown_index_gpus == 2
    assert any("the GPUs of pod ml/a-0 count as of unknown index" in w for w in snap.warnings)


def test_held_devices_that_do_not_match_the_request_are_named_and_of_unknown_index() -> None:
    planned = pod("a-0", "n1", gpus=2)
    snap = snapshot_from_objects([annotated("n1"), planned, node_gpus("n1", pods=[holding("n1", "a-0", 3)])])
    assert snap.usage_of("n1").unknown_index_gpus == 2
    assert "Pod ml/a-0: NodeGPUs n1 lists 1 GPUs but the pod requests 2" in snap.warnings[0]


def test_held_devices_beyond_the_gpus_planned_are_of_unknown_index() -> None:
    planned = pod("a-0", "n1", gpus=1)
    gpus = node_gpus("n1", pods=[holding("n1", "a-0", 7)])
    snap = snapshot_from_objects([annotated("n1", None, gpus=6), planned, gpus])
    assert snap.usage_of("n1").unknown_index_gpus == 1


@pytest.mark.parametrize("policy", ["optimizer", "bestfit", "firstfit"])
def test_a_plan_never_promises_a_gpu_a_pod_really_holds(policy: str) -> None:
    # The annotation says the running pod has GPUs 0-3; the device plugin gave it 4-7, and 0 is unhealthy.
    running = pod("a-0", "n1", gpus=4, annotations={"optsched.io/gpus": "0,1,2,3"})
    gpus = node_gpus("n1", unhealthy=(0,), pods=[holding("n1", "a-0", 4, 5, 6, 7)])
    objects = [annotated("n1", None), cluster_queue(gpus=8), *queue_objects(), running, gpus]
    snap = snapshot_from_objects([*objects, workload("b", gpus=3)])
    plan = planning.plan(snap, Settings(workers=1, time_limit_s=5), policy)
    [decision] = plan.admitted
    [placed] = decision.pod_sets[0].pods
    assert placed.node == "n1" and sorted(placed.gpus or ()) == [1, 2, 3]
    too_many = snapshot_from_objects([*objects, workload("c", gpus=4)])
    assert planning.plan(too_many, Settings(workers=1, time_limit_s=5), policy).admitted == []


def hami_node(name: str) -> dict[str, Any]:
    """A node whose two GPUs HAMi registers (``GPU-hami-0``, ``GPU-hami-1``), split ten ways."""
    register = json.dumps(
        [
            {"id": f"GPU-hami-{i}", "index": i, "count": 10, "devmem": 4096, "devcore": 100, "health": True}
            for i in range(2)
        ]
    )
    obj = node(name, gpus=20)
    obj["metadata"]["annotations"] = {"hami.io/node-nvidia-register": register}
    return obj


def test_on_a_hami_node_hamis_uuids_win_with_a_warning() -> None:
    hami = hami_node("h1")
    snap = snapshot_from_objects([hami, node_gpus("h1", gpus=2, unhealthy=(1,))])
    h1 = only_node(snap)
    assert h1.gpu_uuids == ("GPU-hami-0", "GPU-hami-1") and h1.unhealthy_gpus == frozenset({1})
    [warning] = snap.warnings
    assert "differ from those of hami.io/node-nvidia-register; HAMi's are used" in warning


def test_on_a_hami_node_a_node_gpus_of_another_gpu_count_is_not_used() -> None:
    hami = hami_node("h1")
    device = "GPU-hami-1,NVIDIA,1024,50:"
    share = pod("s-0", "h1", gpus=1, annotations={"hami.io/vgpu-devices-allocated": device})
    snap = snapshot_from_objects([hami, share, node_gpus("h1", gpus=1, unhealthy=(0,))])
    h1 = only_node(snap)
    assert h1.gpu_count == 2 and h1.unhealthy_gpus == frozenset()
    assert snap.usage_of("h1").gpu_milli == (0, 500)
    [warning] = snap.warnings
    assert warning.startswith("Node h1: NodeGPUs h1 lists 1 GPUs but hami.io/node-nvidia-register 2;")
