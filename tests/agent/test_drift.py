"""Drift between a pod's planned GPUs and the ones it holds, and the tolerant read of the plan."""

from __future__ import annotations

from typing import Any

import pytest

from optsched.agent.drift import Drift, find_drift, held_indices, planned_indices
from optsched.agent.podresources import ContainerDevices, PodDevices

GPU = "nvidia.com/gpu"
UUIDS = {f"GPU-{i}": i for i in range(8)}


def annotated(value: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", "annotations": {"optsched.io/gpus": value}}}


@pytest.mark.parametrize(
    ("value", "expected"),
    [("0,1,2,3", (0, 1, 2, 3)), ("3,1", (1, 3)), (" 4 , 5, ", (4, 5)), ("7", (7,))],
)
def test_the_plan_reads_as_ascending_indices(value: str, expected: tuple[int, ...]) -> None:
    assert planned_indices(annotated(value)) == expected


@pytest.mark.parametrize("value", ["", ",", "0,x", "-1", "1.0", "0,0", 3, None, "٣"])
def test_an_unusable_plan_is_none(value: Any) -> None:
    assert planned_indices(annotated(value)) is None


@pytest.mark.parametrize(
    "pod", [{}, {"metadata": None}, {"metadata": {"annotations": ["optsched.io/gpus"]}}, {"metadata": {}}]
)
def test_a_pod_without_a_plan_is_none(pod: dict[str, Any]) -> None:
    assert planned_indices(pod) is None


def test_held_indices_count_whole_gpus_across_containers_only() -> None:
    pods = [
        PodDevices(
            "ml",
            "a",
            (
                ContainerDevices("main", ((GPU, ("GPU-3", "GPU-1")), ("nvidia.com/mig-1g.10gb", ("MIG-x",)))),
                ContainerDevices("side", ((GPU, ("GPU-2", "GPU-unknown")),)),
            ),
        ),
        PodDevices("ml", "mig-only", (ContainerDevices("main", (("nvidia.com/mig-1g.10gb", ("MIG-y",)),)),)),
        PodDevices("ml", "cpu", (ContainerDevices("main"),)),
    ]
    assert held_indices(pods, UUIDS) == {("ml", "a"): (1, 2, 3)}


def test_drift_is_a_planned_pod_holding_other_gpus() -> None:
    planned = {
        ("ml", "same"): (0, 1),
        ("ml", "moved"): (2, 3),
        ("ml", "waiting"): (4,),
        ("a", "order"): (6, 5),
    }
    held = {
        ("ml", "same"): (0, 1),
        ("ml", "moved"): (3, 4),
        ("a", "order"): (5, 6),
        ("ml", "unplanned"): (7,),
    }
    assert find_drift(planned, held) == [Drift("ml", "moved", (2, 3), (3, 4))]


def test_drift_is_ordered_by_namespace_and_name() -> None:
    planned = {("b", "x"): (0,), ("a", "y"): (1,), ("a", "x"): (2,)}
    held = {("b", "x"): (3,), ("a", "y"): (4,), ("a", "x"): (5,)}
    assert [(d.namespace, d.name) for d in find_drift(planned, held)] == [("a", "x"), ("a", "y"), ("b", "x")]


def test_a_pod_holding_fewer_gpus_than_planned_is_drift() -> None:
    assert find_drift({("ml", "p"): (0, 1)}, {("ml", "p"): (0,)}) == [Drift("ml", "p", (0, 1), (0,))]
