"""Concatenated dumps: an object twice is read once, the newer copy, with a warning."""

from __future__ import annotations

from optsched.snapshot.build import READ_KINDS, snapshot_from_objects
from optsched.snapshot.dedupe import dedupe
from tests.snapshot.raw import GPU, cluster_queue, node, pod, queue_objects, workload


def test_a_duplicate_node_is_counted_once_and_the_newer_copy_wins() -> None:
    # "10" is newer than "9" as a number, not as a string.
    snap = snapshot_from_objects([node("n1", gpus=4, version="10"), node("n1", gpus=8, version="9")])
    (only,) = snap.nodes
    assert only.gpu_count == 4
    (warning,) = snap.warnings
    assert warning == (
        "Node n1 appears 2 times in the input; kept the newest (resourceVersion 10) "
        "and ignored the other copies"
    )


def test_a_duplicate_pod_is_counted_once() -> None:
    bound = pod("p", "n1", gpus=2, version="5")
    snap = snapshot_from_objects([node("n1"), bound, pod("p", "n1", gpus=2, version="5")])
    assert snap.usage_of("n1").unknown_index_gpus == 2 and snap.usage_of("n1").pods == 1
    assert any(w.startswith("Pod ml/p appears 2 times") for w in snap.warnings)


def test_a_duplicate_workload_is_planned_once() -> None:
    older, newer = workload("w", gpus=1, version="3"), workload("w", gpus=2, version="4")
    snap = snapshot_from_objects([node("n1"), *queue_objects(), cluster_queue(gpus=8), newer, older])
    (only,) = snap.workloads
    assert only.pod_sets[0].request.gpus == 2
    assert any(w.startswith("Workload ml/w appears 2 times") for w in snap.warnings)


def test_a_duplicate_cluster_queue_is_read_once_with_its_newer_quota() -> None:
    objects = [node("n1"), cluster_queue(gpus=4, version="1"), cluster_queue(gpus=6, version="2")]
    (cq,) = snapshot_from_objects(objects).cluster_queues
    assert cq.resource_groups[0].flavors[0].resource(GPU).nominal == 6  # type: ignore[union-attr]


def test_without_comparable_versions_the_later_copy_in_the_input_wins() -> None:
    objects, warnings = dedupe([node("n1", gpus=4, version="abc"), node("n1", gpus=2)], READ_KINDS)
    assert [o["status"]["allocatable"][GPU] for o in objects] == ["2"]
    assert "kept the last one in the input" in warnings[0]


def test_same_names_of_other_kinds_or_namespaces_are_different_objects() -> None:
    other_namespace = pod("p", "n1", namespace="other")
    objects, warnings = dedupe([node("p"), pod("p", "n1"), other_namespace, cluster_queue("p")], READ_KINDS)
    assert len(objects) == 4 and warnings == []
