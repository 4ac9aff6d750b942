"""One NodeGPUs object read into typed facts: GPUs by index, islands, health, and the devices pods hold."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from optsched.errors import InputError
from optsched.snapshot.fields import describe
from optsched.snapshot.node_gpus import read_node_gpus
from tests.snapshot.raw import holding, node_gpus, uuid

Edit = Callable[[dict[str, Any]], None]


def _facts(obj: dict[str, Any]):  # type: ignore[no-untyped-def]
    facts = read_node_gpus(obj)
    assert facts is not None
    return facts


def test_a_published_object_gives_islands_numa_health_ids_and_held_devices() -> None:
    obj = node_gpus(
        "n1",
        islands=[[0, 1, 2, 3], [4, 5, 6, 7]],
        unhealthy=(6,),
        pods=[holding("n1", "train-0", 5, 4)],
    )
    facts = _facts(obj)
    assert facts.node == "n1" and facts.gpu_count == 8
    assert facts.topology.islands == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert facts.topology.numa == (0, 0, 0, 0, 1, 1, 1, 1)
    assert facts.topology.unhealthy == frozenset({6})
    assert facts.topology.uuids == tuple(uuid("n1", i) for i in range(8))
    assert facts.topology.pci_bus_ids[0] == "00000000:18:00.0"
    held = facts.held_by("ml", "train-0")
    assert held is not None and held.indices == (5, 4) and held.source == "NodeGPUs n1"
    assert facts.held_by("ml", "other") is None and facts.warnings == ()


def test_islands_come_from_the_gpus_island_numbers_without_a_list() -> None:
    obj = node_gpus("n1", gpus=4, islands=[[0, 2], [1, 3]])
    del obj["status"]["nvlinkIslands"]
    assert _facts(obj).topology.islands == ((0, 2), (1, 3))
    for gpu in obj["status"]["gpus"]:
        gpu["island"] = None
    assert _facts(obj).topology.islands == ((0,), (1,), (2,), (3,))


def test_gpus_are_read_by_their_index_not_their_place_in_the_list() -> None:
    obj = node_gpus("n1", gpus=4, unhealthy=(0,))
    obj["status"]["gpus"].reverse()
    facts = _facts(obj)
    assert facts.topology.uuids == tuple(uuid("n1", i) for i in range(4))
    assert facts.topology.unhealthy == frozenset({0})


def test_an_unknown_numa_node_or_bus_id_leaves_that_list_empty() -> None:
    obj = node_gpus("n1", gpus=2, numa=[0, None])
    obj["status"]["gpus"][1]["pciBusId"] = ""
    facts = _facts(obj)
    assert facts.topology.numa == () and facts.topology.pci_bus_ids == ()


def test_an_object_listing_no_gpus_has_reported_nothing() -> None:
    assert read_node_gpus(node_gpus("n1", gpus=0)) is None
    bare = node_gpus("n1")
    del bare["status"]
    assert read_node_gpus(bare) is None


def _set(path: str, value: Any) -> Edit:
    def edit(obj: dict[str, Any]) -> None:
        parts = path.split(".")
        target: Any = obj
        for part in parts[:-1]:
            target = target[int(part)] if isinstance(target, list) else target[part]
        last = parts[-1]
        if value is _DELETE:
            del target[last]
        elif isinstance(target, list):
            target[int(last)] = value
        else:
            target[last] = value

    return edit


_DELETE = object()
GPU0 = "status.gpus.0"
POD0 = "status.pods.0"
CONTAINER0 = "status.pods.0.containers.0"
C0 = "status.pods[0].containers[0]"


@pytest.mark.parametrize(
    ("edit", "field", "message"),
    [
        (_set("status", []), "status", "expected a mapping"),
        (_set("metadata.name", _DELETE), "metadata.name", "required"),
        (_set("status.gpus", "8"), "status.gpus", "expected a list"),
        (_set("status.gpus.2", "GPU-2"), "status.gpus[2]", "expected a mapping"),
        (_set("status.gpus.2.index", _DELETE), "status.gpus[2].index", "required"),
        (_set("status.gpus.2.index", "2"), "status.gpus[2].index", "whole number"),
        (_set("status.gpus.3.index", 1), "status.gpus[3].index", "numbered 0..7, each once"),
        (_set("status.gpus.3.index", 8), "status.gpus[3].index", "numbered 0..7"),
        (_set("status.gpus.1.uuid", _DELETE), "status.gpus[1].uuid", "1..128 characters"),
        (_set("status.gpus.1.uuid", uuid("n1", 0)), "status.gpus[1].uuid", "also GPU 0's"),
        (_set("status.gpus.1.uuid", "G" * 129), "status.gpus[1].uuid", "1..128 characters"),
        (_set(f"{GPU0}.pciBusId", ["00000000:18:00.0"]), "status.gpus[0].pciBusId", "expected a string"),
        (_set(f"{GPU0}.numa", -1), "status.gpus[0].numa", "whole number >= 0 or null"),
        (_set(f"{GPU0}.island", "a"), "status.gpus[0].island", "whole number >= 0 or null"),
        (_set(f"{GPU0}.island", 1), "status.gpus[0].island", "not in status.nvlinkIslands[1]"),
        (_set(f"{GPU0}.health", "Healthy"), "status.gpus[0].health", "expected a mapping"),
        (_set(f"{GPU0}.health.state", "Sick"), "status.gpus[0].health.state", "Healthy or Unhealthy"),
        (_set(f"{GPU0}.health.reason", {"xid": 79}), "status.gpus[0].health.reason", "expected a string"),
        (_set("status.nvlinkIslands", [[0, 1], [1, 2]]), "status.nvlinkIslands", "two NVLink islands"),
        (_set("status.nvlinkIslands", [[0, 9]]), "status.nvlinkIslands", "names GPU 9"),
        (_set("status.nvlinkIslands", [0, 1]), "status.nvlinkIslands", "list of GPU indices"),
        (_set("status.nvlinkIslands", {"0": [0]}), "status.nvlinkIslands", "expected a list"),
        (_set("status.pods", {"ml/a": []}), "status.pods", "expected a list"),
        (_set(f"{POD0}.name", _DELETE), "status.pods[0].name", "required"),
        (_set(f"{POD0}.namespace", ["ml"]), "status.pods[0].namespace", "expected a string"),
        (_set(f"{POD0}.containers", "c"), "status.pods[0].containers", "expected a list"),
        (
            _set(f"{CONTAINER0}.gpuUUIDs", "GPU-n1-0000"),
            f"{C0}.gpuUUIDs",
            "expected a list",
        ),
        (_set(f"{CONTAINER0}.gpuUUIDs", [3]), f"{C0}.gpuUUIDs[0]", "non-empty string"),
        (_set(f"{CONTAINER0}.gpuIndices", [-1]), f"{C0}.gpuIndices[0]", "GPU index"),
        (_set(f"{CONTAINER0}.gpuIndices", [True]), f"{C0}.gpuIndices[0]", "GPU index"),
        (
            _set(f"{CONTAINER0}.migUUIDs", [None]),
            f"{C0}.migUUIDs[0]",
            "non-empty string",
        ),
    ],
)
def test_each_malformed_field_is_named(edit: Edit, field: str, message: str) -> None:
    obj = node_gpus("n1", pods=[holding("n1", "a", 0)])
    edit(obj)
    with pytest.raises(InputError) as caught:
        read_node_gpus(obj)
    assert caught.value.obj == describe(obj)
    assert caught.value.field == field
    assert message in caught.value.detail


def _with_container(**container: Any) -> dict[str, Any]:
    pod = {"namespace": "ml", "name": "a", "containers": [{"name": "c", **container}]}
    return node_gpus("n1", gpus=4, pods=[pod])


def test_uuids_become_indices_through_the_object_and_indices_stand_in_for_unknown_uuids() -> None:
    by_uuid = _facts(_with_container(gpuUUIDs=[uuid("n1", 3)], gpuIndices=[0]))
    assert by_uuid.held_by("ml", "a").indices == (3,)  # type: ignore[union-attr]
    fallback = _facts(_with_container(gpuUUIDs=["GPU-elsewhere"], gpuIndices=[2]))
    assert fallback.held_by("ml", "a").indices == (2,)  # type: ignore[union-attr]
    indices_only = _facts(_with_container(gpuIndices=[1, 2]))
    assert indices_only.held_by("ml", "a").indices == (1, 2)  # type: ignore[union-attr]
    assert by_uuid.warnings == fallback.warnings == indices_only.warnings == ()


@pytest.mark.parametrize(
    ("container", "named"),
    [
        ({"gpuUUIDs": ["GPU-elsewhere"]}, "GPU GPU-elsewhere is none of its GPUs"),
        ({"gpuUUIDs": ["GPU-elsewhere", uuid("n1", 0)], "gpuIndices": [0]}, "GPU GPU-elsewhere"),
        ({"gpuIndices": [4]}, "GPU index 4 is none of its GPUs"),
    ],
)
def test_devices_the_object_cannot_place_make_the_pods_gpus_of_unknown_index(
    container: dict[str, Any], named: str
) -> None:
    facts = _facts(_with_container(**container))
    held = facts.held_by("ml", "a")
    assert held is not None and held.indices is None
    [warning] = facts.warnings
    assert warning.startswith("NodeGPUs n1: status.pods[0].containers[0]: ")
    assert named in warning and warning.endswith("the GPUs of pod ml/a count as of unknown index")


def test_a_pod_listed_without_gpu_devices_is_not_recorded() -> None:
    facts = _facts(_with_container(gpuUUIDs=[], migUUIDs=["MIG-1"]))
    assert facts.held_by("ml", "a") is None
    assert _facts(node_gpus("n1", pods=[{"namespace": "ml", "name": "a"}])).held_by("ml", "a") is None


def test_containers_and_repeated_entries_add_up_and_a_missing_namespace_is_default() -> None:
    first = holding("n1", "a", 0, 1)
    first["containers"].append({"name": "side", "gpuUUIDs": [uuid("n1", 1), uuid("n1", 2)]})
    again = holding("n1", "a", 5)
    plain = holding("n1", "b", 7)
    del plain["namespace"]
    facts = _facts(node_gpus("n1", pods=[first, again, plain]))
    assert facts.held_by("ml", "a").indices == (0, 1, 2, 5)  # type: ignore[union-attr]
    assert facts.held_by("default", "b").indices == (7,)  # type: ignore[union-attr]


def test_fitting_to_fewer_gpus_keeps_the_facts_of_those_and_says_so() -> None:
    facts = _facts(node_gpus("n1", islands=[[0, 1, 2, 3], [4, 5, 6, 7]], unhealthy=(1, 6)))
    fitted, [warning] = facts.fitted(6, what="the node advertises nvidia.com/gpu:")
    assert fitted.gpu_count == 6
    assert fitted.topology.islands == ((0, 1, 2, 3), (4, 5))
    assert fitted.topology.unhealthy == frozenset({1})
    assert len(fitted.topology.uuids) == len(fitted.topology.numa) == 6
    assert warning == (
        "Node n1: NodeGPUs n1 lists 8 GPUs but the node advertises nvidia.com/gpu: 6; only GPUs 0..5 "
        "are planned, with the NodeGPUs islands, NUMA and health for them"
    )
    same, notes = facts.fitted(8, what="")
    assert same == facts and notes == []
    none, _ = facts.fitted(0, what="")
    assert none.gpu_count == 0 and none.topology.islands == ()


def test_reading_never_changes_the_object() -> None:
    obj = node_gpus("n1", pods=[holding("n1", "a", 0)])
    before = copy.deepcopy(obj)
    read_node_gpus(obj)
    assert obj == before
