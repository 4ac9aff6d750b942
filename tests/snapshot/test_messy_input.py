"""Messy real-world input: each problem stays with its object, and nothing ends in an internal error."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from optsched.errors import InputError
from optsched.model.snapshot import Snapshot
from optsched.snapshot.build import load_snapshot, snapshot_from_objects
from optsched.snapshot.documents import read_bytes, read_documents
from tests.snapshot.test_build import node_obj, workload_obj

SOURCE = "dump.yaml"


def build(*objects: dict[str, Any]) -> Snapshot:
    return snapshot_from_objects(list(objects), source=SOURCE)


def only_warning(snapshot: Snapshot) -> str:
    [warning] = snapshot.warnings
    return warning


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = obj["spec"]["podSets"][0]["template"]["spec"]
    return spec


def container(obj: dict[str, Any]) -> dict[str, Any]:
    first: dict[str, Any] = pod_spec(obj)["containers"][0]
    return first


def test_a_negative_gpu_request_leaves_its_workload_out_naming_the_field() -> None:
    bad = workload_obj("neg")
    container(bad)["resources"]["requests"]["nvidia.com/gpu"] = -1
    snapshot = build(node_obj("n1"), bad, workload_obj("fine"))
    assert [w.name for w in snapshot.workloads] == ["fine"]
    warning = only_warning(snapshot)
    assert "Workload ns/neg" in warning and "resources.nvidia.com/gpu: must not be negative" in warning


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (
            lambda w: w["spec"]["podSets"][0]["template"]["spec"].update(containers=["busybox"]),
            "containers[0]",
        ),
        (lambda w: container(w).update(resources={"limits": ["nvidia.com/gpu", 1]}), "resources.limits"),
        (lambda w: container(w).update(resources="lots"), "containers[0].resources"),
        (lambda w: pod_spec(w).update(containers=[]), "containers"),
        (lambda w: w["spec"]["podSets"][0].update(count=10**12), "spec.podSets[0].count"),
        (lambda w: w["spec"].update(priority=2**40), "spec.priority"),
        (lambda w: w["spec"]["podSets"].append(dict(w["spec"]["podSets"][0])), "spec.podSets"),
        (lambda w: w["spec"]["podSets"][0]["template"].update(metadata="x"), "template.metadata"),
        (lambda w: w["spec"]["podSets"][0].update(topologyRequest={"required": {"a": 1}}), "topologyRequest"),
    ],
)
def test_a_workload_of_the_wrong_shape_is_left_out_and_the_rest_planned(mutate: Any, field: str) -> None:
    bad = workload_obj("odd")
    mutate(bad)
    snapshot = build(node_obj("n1"), bad, workload_obj("fine"))
    assert [w.name for w in snapshot.workloads] == ["fine"]
    [left_out] = snapshot.left_out
    assert (left_out.kind, left_out.name) == ("Workload", "odd")
    assert field in left_out.message and SOURCE in left_out.message


def test_a_malformed_cluster_queue_status_leaves_that_queue_out_and_holds_its_workloads() -> None:
    from tests.kueue.objects import cluster_queue, local_queue

    broken = cluster_queue("cq")
    broken["status"] = {"flavorsReservation": [{"name": "f", "resources": "all of them"}]}
    snapshot = build(node_obj("n1"), broken, local_queue("lq", "ns", "cq"), workload_obj("w"))
    assert snapshot.workloads == ()
    [held] = snapshot.held
    assert held.reason.code == "QueueUnreadable"
    assert "ClusterQueue cq could not be read" in held.reason.message
    assert "status.flavorsReservation[0].resources: expected a list" in held.reason.message


def test_an_old_kueue_api_version_is_left_out_by_name() -> None:
    old = {"apiVersion": "kueue.x-k8s.io/v1alpha2", "kind": "ClusterQueue", "metadata": {"name": "legacy"}}
    snapshot = build(node_obj("n1"), old)
    assert snapshot.cluster_queues == ()
    warning = only_warning(snapshot)
    assert "ClusterQueue legacy" in warning and "'kueue.x-k8s.io/v1alpha2' is not read" in warning
    assert "expected kueue.x-k8s.io/v1beta1 or v1beta2" in warning


@pytest.mark.parametrize(
    ("resource", "value", "problem"),
    [
        ("cpu", "-4", "must not be negative"),
        ("nvidia.com/gpu", "1000000000000", "beyond what optsched reads"),
        ("nvidia.com/gpu", "5000", "beyond what optsched reads (at most 1024)"),
        ("memory", "1e400", "not a quantity optsched reads"),
    ],
)
def test_a_node_with_an_impossible_allocatable_is_left_out(resource: str, value: str, problem: str) -> None:
    bad = node_obj("bad")
    bad["status"]["allocatable"][resource] = value
    snapshot = build(bad, node_obj("good"), workload_obj("w"))
    assert [n.name for n in snapshot.nodes] == ["good"]
    warning = only_warning(snapshot)
    assert f"status.allocatable.{resource}" in warning and problem in warning


def test_a_pydantic_refusal_is_an_input_warning_naming_the_field() -> None:
    bad = node_obj("bad")
    bad["spec"] = {"taints": [{"key": "k", "effect": "NoSchedule", "value": {"nested": True}}]}
    snapshot = build(bad, node_obj("good"))
    assert [n.name for n in snapshot.nodes] == ["good"]
    assert "spec.taints[0].value: expected a string" in only_warning(snapshot)


def write(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "dump.yaml"
    path.write_bytes(data)
    return path


def small_dump() -> str:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [node_obj("n1"), workload_obj("w")]})


def test_utf16_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    snapshot = load_snapshot(write(tmp_path, small_dump().encode("utf-16")))
    assert [n.name for n in snapshot.nodes] == ["n1"]


def test_utf16_without_a_byte_order_mark_is_named(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="looks like UTF-16 text without a byte-order mark"):
        load_snapshot(write(tmp_path, small_dump().encode("utf-16-le")))


def test_a_file_over_the_size_cap_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, b"#" * 4096)
    with pytest.raises(InputError, match="is larger than 0 MiB, the most optsched reads"):
        read_bytes(path, limit=1024)


def test_an_endless_stream_times_out_instead_of_hanging(tmp_path: Path) -> None:
    fifo = tmp_path / "stream"
    os.mkfifo(fifo)
    release = threading.Event()

    def hold_open() -> None:
        with open(fifo, "wb") as stream:  # a writer that starts a document and never ends it
            stream.write(b"apiVersion: v1\n")
            stream.flush()
            release.wait(10)

    thread = threading.Thread(target=hold_open, daemon=True)
    thread.start()
    try:
        with pytest.raises(InputError, match=r"still not read to the end after 0\.2 s"):
            read_documents(fifo, timeout=0.2)
    finally:
        release.set()
        thread.join(10)


def test_a_document_that_is_not_an_object_is_left_out_with_a_warning(tmp_path: Path) -> None:
    path = write(tmp_path, (small_dump() + "---\njust words\n").encode())
    snapshot = load_snapshot(path)
    assert [n.name for n in snapshot.nodes] == ["n1"]
    assert any("document 2 is not a Kubernetes object" in w for w in snapshot.warnings)


def test_a_file_of_nothing_but_non_objects_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(
        InputError, match=r"holds no Kubernetes objects \(document 1 is not a Kubernetes object"
    ):
        load_snapshot(write(tmp_path, b"just some words\n"))


def test_a_quota_without_a_nominal_value_leaves_its_cluster_queue_out() -> None:
    from tests.kueue.objects import cluster_queue

    broken = cluster_queue("cq")
    broken["spec"]["resourceGroups"] = [
        {
            "coveredResources": ["nvidia.com/gpu"],
            "flavors": [{"name": "gpu", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": None}]}],
        }
    ]
    snapshot = build(node_obj("n1"), broken)
    assert snapshot.cluster_queues == ()
    assert "resources[0]: needs name and nominalQuota" in only_warning(snapshot)


def test_an_object_with_an_empty_name_is_left_out() -> None:
    nameless = node_obj("")
    snapshot = build(nameless, node_obj("n1"))
    assert [n.name for n in snapshot.nodes] == ["n1"]
    assert "field metadata.name: is required but missing" in only_warning(snapshot)
