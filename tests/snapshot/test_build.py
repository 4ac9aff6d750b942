"""Reading snapshots: kubectl Lists and YAML streams into the frozen model."""

from pathlib import Path
from typing import Any

import pytest
import yaml

from optsched.errors import InputError
from optsched.snapshot.build import load_snapshot, snapshot_from_objects

ROOT = Path(__file__).resolve().parents[2]


def node_obj(name: str, gpus: int = 8, topology: str | None = None, **labels: str) -> dict[str, Any]:
    annotations = {"optsched.io/gpu-topology": topology} if topology is not None else {}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                "nvidia.com/gpu.memory": "81559",
                **labels,
            },
            "annotations": annotations,
        },
        "status": {
            "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(gpus)},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod_obj(
    name: str,
    node: str,
    resources: dict[str, Any],
    gpus_annotation: str | None = None,
    phase: str = "Running",
) -> dict[str, Any]:
    annotations = {"optsched.io/gpus": gpus_annotation} if gpus_annotation else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "annotations": annotations},
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"limits": resources}}]},
        "status": {"phase": phase},
    }


def workload_obj(
    name: str,
    *,
    gpus: int = 1,
    count: int = 1,
    conditions: list[dict[str, str]] | None = None,
    api: str = "kueue.x-k8s.io/v1beta2",
    annotations: dict[str, str] | None = None,
    extra_resources: dict[str, Any] | None = None,
) -> dict[str, Any]:
    resources = {"nvidia.com/gpu": gpus, "cpu": "2", "memory": "8Gi", **(extra_resources or {})}
    return {
        "apiVersion": api,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "ns", "creationTimestamp": "2026-11-01T10:00:00Z"},
        "spec": {
            "queueName": "lq",
            "priority": 5,
            "podSets": [
                {
                    "name": "main",
                    "count": count,
                    "template": {
                        "metadata": {"annotations": annotations or {}},
                        "spec": {"containers": [{"name": "c", "resources": {"requests": resources}}]},
                    },
                }
            ],
        },
        "status": {"conditions": conditions or []},
    }


def test_reads_nodes_usage_and_pending_workloads() -> None:
    snap = snapshot_from_objects(
        [
            node_obj("n1", topology='{"nvlinkIslands": [[0,1],[2,3],[4,5],[6,7]], "unhealthy": [7]}'),
            pod_obj("p1", "n1", {"nvidia.com/gpu": 2, "cpu": "4"}, gpus_annotation="0,1"),
            pod_obj("p2", "n1", {"nvidia.com/gpu": 1}),
            pod_obj(
                "p3",
                "n1",
                {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 20000, "nvidia.com/gpucores": 30},
                gpus_annotation="2",
            ),
            pod_obj("done", "n1", {"nvidia.com/gpu": 4}, phase="Succeeded"),
            workload_obj(
                "w1",
                gpus=4,
                count=2,
                annotations={
                    "kueue.x-k8s.io/podset-required-topology": "rack",
                    "optsched.io/nvlink": "required",
                },
            ),
            workload_obj("admitted", conditions=[{"type": "Admitted", "status": "True"}]),
            workload_obj("finished", conditions=[{"type": "Finished", "status": "True"}]),
        ]
    )
    (node,) = snap.nodes
    assert node.nvlink_islands == ((0, 1), (2, 3), (4, 5), (6, 7))
    assert node.unhealthy_gpus == frozenset({7})
    assert node.cpu_milli == 64_000 and node.memory_mib == 512 * 1024 and node.gpu_memory_mib == 81559
    usage = snap.usage_of("n1")
    assert usage.gpu_milli[:3] == (1000, 1000, 300)
    assert usage.gpu_mem_mib[2] == 20000
    assert usage.unknown_index_gpus == 1
    assert usage.pods == 3
    assert [w.name for w in snap.workloads] == ["w1"]
    (pod_set,) = snap.workloads[0].pod_sets
    assert pod_set.count == 2 and pod_set.request.gpus == 4
    assert pod_set.required_topology == "rack" and pod_set.nvlink_required
    assert snap.workloads[0].priority == 5


def test_share_requests_follow_the_hami_convention() -> None:
    snap = snapshot_from_objects(
        [
            node_obj("n1"),
            workload_obj(
                "frac", gpus=1, extra_resources={"nvidia.com/gpumem": "10000", "nvidia.com/gpucores": "25"}
            ),
        ]
    )
    request = snap.workloads[0].pod_sets[0].request
    assert request.is_share and request.gpu_milli == 250 and request.gpu_mem_mib == 10000


def test_v1beta1_workloads_and_cluster_queue_cohorts_are_read() -> None:
    cq = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {
            "cohort": "all",
            "resourceGroups": [
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": "h100",
                            "resources": [
                                {"name": "nvidia.com/gpu", "nominalQuota": 16, "borrowingLimit": 8}
                            ],
                        }
                    ],
                }
            ],
        },
    }
    snap = snapshot_from_objects([node_obj("n1"), cq, workload_obj("w", api="kueue.x-k8s.io/v1beta1")])
    assert snap.cluster_queues[0].cohort == "all"
    quota = snap.cluster_queues[0].resource_groups[0].flavors[0].resources[0]
    assert (quota.nominal, quota.borrowing_limit) == (16, 8)
    assert snap.workloads[0].name == "w"


def test_malformed_gpu_topology_leaves_the_node_out_with_a_warning() -> None:
    snap = snapshot_from_objects([node_obj("good"), node_obj("bad", topology="{oops")])
    assert [n.name for n in snap.nodes] == ["good"]
    assert any("Node bad" in w and "optsched.io/gpu-topology" in w for w in snap.warnings)


def test_bad_quantity_names_file_object_and_field(tmp_path: Path) -> None:
    bad = node_obj("n1")
    bad["status"]["allocatable"]["cpu"] = "12 cores"
    path = tmp_path / "snap.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [bad]}))
    snapshot = load_snapshot(path)
    assert snapshot.nodes == ()
    [left_out] = snapshot.left_out
    assert (left_out.kind, left_out.name) == ("Node", "n1")
    [warning] = snapshot.warnings
    assert str(path) in warning and "Node n1" in warning and "status.allocatable.cpu" in warning


def test_a_workload_without_podsets_is_left_out_and_the_others_are_read() -> None:
    obj = workload_obj("w")
    del obj["spec"]["podSets"]
    snapshot = snapshot_from_objects([node_obj("n1"), obj, workload_obj("fine")], source="x.yaml")
    assert [w.name for w in snapshot.workloads] == ["fine"]
    [warning] = snapshot.warnings
    assert warning == "x.yaml: Workload ns/w: field spec.podSets: is required but missing (left out)"


def test_not_yaml_is_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("key: [unclosed\n  - : :\n")
    with pytest.raises(InputError, match="not valid YAML"):
        load_snapshot(path)


def test_scalar_document_is_not_an_object(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("just some words\n")
    with pytest.raises(InputError, match="not a Kubernetes object"):
        load_snapshot(path)


def test_bundled_example_loads() -> None:
    snap = load_snapshot(ROOT / "examples" / "cluster-small.yaml")
    assert len(snap.nodes) >= 10
    assert snap.workloads


def test_optsched_topology_annotations_are_read_like_kueues() -> None:
    obj = workload_obj(
        "w", annotations={"optsched.io/required-topology": "rack", "optsched.io/preferred-topology": "block"}
    )
    (pod_set,) = snapshot_from_objects([node_obj("n1"), obj]).workloads[0].pod_sets
    assert (pod_set.required_topology, pod_set.preferred_topology) == ("rack", "block")


def test_assumed_pods_hold_capacity_like_bound_pods() -> None:
    from optsched.model.snapshot import AssumedPod, PodRequest

    whole = PodRequest(cpu_milli=2000, memory_mib=1024, gpus=2)
    assumed = [
        AssumedPod(workload="ml/a", node="n1", request=whole, gpus=(0, 1)),
        AssumedPod(workload="ml/b", node="n1", request=whole, gpus=None),
        AssumedPod(workload="ml/c", node="n1", request=whole, gpus=(7, 7)),
        AssumedPod(workload="ml/d", node="gone", request=whole, gpus=(0, 1)),
    ]
    snap = snapshot_from_objects([node_obj("n1")], assumed=assumed)
    usage = snap.usage_of("n1")
    assert usage.gpu_milli[:3] == (1000, 1000, 0)
    assert usage.unknown_index_gpus == 4  # no indices, and repeated ones, are not trusted
    assert (usage.cpu_milli, usage.memory_mib, usage.pods) == (6000, 3072, 3)
    assert "gone" not in snap.usage


def test_a_creation_time_without_a_zone_is_read_as_utc() -> None:
    from optsched import planning

    def workload_obj(name: str, created: str) -> dict[str, Any]:
        template = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}
        return {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {"name": name, "namespace": "ns", "creationTimestamp": created},
            "spec": {"podSets": [{"name": "main", "count": 1, "template": template}]},
        }

    objects = [
        node_obj("n1"),
        workload_obj("zoned", "2026-11-01T10:00:00Z"),
        workload_obj("bare", "2026-11-01T09:00:00"),
    ]
    snap = snapshot_from_objects(objects)
    assert [w.key for w in snap.workloads] == ["ns/bare", "ns/zoned"]
    assert all(w.created.tzinfo is not None for w in snap.workloads)
    assert len(planning.plan(snap).admitted) == 2


def test_gpu_memory_booked_past_the_gpus_counts_as_full_with_a_warning() -> None:
    big_share = pod_obj("big-share", "t4-1", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "20000"}, "0")
    t4 = node_obj("t4-1", gpus=1)
    t4["metadata"]["labels"]["nvidia.com/gpu.memory"] = "16384"
    snap = snapshot_from_objects([t4, big_share])
    assert snap.usage_of("t4-1").gpu_mem_mib == (16384,)
    assert any("t4-1" in w and "memory" in w for w in snap.warnings)
