"""Raw Kubernetes/Kueue objects for controller tests, as the API server returns them."""

from __future__ import annotations

import json
from typing import Any

from optsched.model.names import (
    COMPLETION_INDEX_LABEL,
    KUEUE_API,
    PLACEMENT_ANNOTATION,
    PLAN_ID_LABEL,
    POD_INDEX_ANNOTATION,
    PODSET_LABEL,
    SCHEDULING_GATE,
)

H100 = "NVIDIA-H100-80GB-HBM3"
A100 = "NVIDIA-A100-PCIE-40GB"
RACK = "cloud.provider.com/topology-rack"
BLOCK = "cloud.provider.com/topology-block"
RESERVED_AT = "2026-01-01T00:00:00Z"


def node(
    name: str,
    *,
    gpus: int = 8,
    product: str = H100,
    rack: str = "r1",
    ready: bool = True,
    topology: str | None = None,
) -> dict[str, Any]:
    annotations = {}
    if topology is not None:
        annotations["optsched.io/gpu-topology"] = topology
    elif gpus:
        annotations["optsched.io/gpu-topology"] = json.dumps({"nvlinkIslands": [list(range(gpus))]})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": annotations,
            "labels": {
                "kubernetes.io/hostname": name,
                "nvidia.com/gpu.product": product,
                RACK: rack,
                BLOCK: "b1",
            },
        },
        "status": {
            "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(gpus)},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def cluster_queue(name: str = "gpu", checks: tuple[str, ...] = ("optsched",)) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE_API,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "admissionChecksStrategy": {"admissionChecks": [{"name": c} for c in checks]},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": "default",
                            "resources": [
                                {"name": "cpu", "nominalQuota": "1000"},
                                {"name": "memory", "nominalQuota": "10Ti"},
                                {"name": "nvidia.com/gpu", "nominalQuota": "1000"},
                            ],
                        }
                    ],
                }
            ],
        },
    }


def local_queue(name: str = "team", cq: str = "gpu", namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": KUEUE_API,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cq},
    }


def flavor(name: str = "default") -> dict[str, Any]:
    return {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": {}}


def workload(
    name: str,
    *,
    count: int = 1,
    gpus: int = 4,
    check: str | None = "Pending",
    reserved: bool = True,
    admitted: bool = False,
    cq: str = "gpu",
    record: str | None = None,
    uid: str | None = None,
    message: str = "",
    pod_set: str = "main",
    node_selector: dict[str, str] | None = None,
    reserved_at: str = RESERVED_AT,
    check_name: str = "optsched",
    owner: str | None = None,
    owner_kind: str = "Job",
    extra_checks: tuple[str, ...] = (),
    requeues: int = 0,
) -> dict[str, Any]:
    conditions = []
    if reserved:
        conditions.append({"type": "QuotaReserved", "status": "True", "lastTransitionTime": reserved_at})
    if admitted:
        conditions.append({"type": "Admitted", "status": "True", "lastTransitionTime": reserved_at})
    status: dict[str, Any] = {"conditions": conditions}
    if reserved:
        status["admission"] = {
            "clusterQueue": cq,
            "podSetAssignments": [
                {
                    "name": pod_set,
                    "count": count,
                    "flavors": {"nvidia.com/gpu": "default", "cpu": "default", "memory": "default"},
                }
            ],
        }
    if check is not None:
        status["admissionChecks"] = [
            {"name": n, "state": check, "message": message, "lastTransitionTime": reserved_at}
            for n in (check_name, *extra_checks)
        ]
    if requeues:
        status["requeueState"] = {"count": requeues}
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "uid": uid or f"uid-{name}",
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "resourceVersion": "1",
    }
    if record is not None:
        metadata["annotations"] = {PLACEMENT_ANNOTATION: record}
    if owner is not None:
        metadata["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": owner_kind, "name": name, "uid": owner, "controller": True}
        ]
    spec = {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)}
    return {
        "apiVersion": KUEUE_API,
        "kind": "Workload",
        "metadata": metadata,
        "spec": {
            "queueName": "team",
            "podSets": [
                {
                    "name": pod_set,
                    "count": count,
                    "template": {
                        "spec": {
                            "nodeSelector": node_selector or {},
                            "containers": [
                                {
                                    "name": "c",
                                    "resources": {"requests": spec, "limits": {"nvidia.com/gpu": str(gpus)}},
                                }
                            ],
                        }
                    },
                }
            ],
        },
        "status": status,
    }


def pod(
    name: str,
    *,
    plan_id: str | None,
    gated: bool = True,
    index: int | None = None,
    node: str | None = None,
    pinned_index: int | None = None,
    pod_set: str = "main",
    created: str = "2026-01-01T00:01:00Z",
    gpus: int = 4,
    phase: str = "Pending",
    namespace: str = "default",
    owner: str | None = None,
    uid: str | None = None,
    annotations: dict[str, str] | None = None,
    queue: str | None = None,
    unschedulable_since: str | None = None,
) -> dict[str, Any]:
    labels = {}
    if queue is not None:
        labels["kueue.x-k8s.io/queue-name"] = queue
    if plan_id:
        labels[PLAN_ID_LABEL] = plan_id
        labels[PODSET_LABEL] = pod_set
    if index is not None:
        labels[COMPLETION_INDEX_LABEL] = str(index)
    annotations = dict(annotations or {})
    if pinned_index is not None:
        annotations[POD_INDEX_ANNOTATION] = str(pinned_index)
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}]
    }
    if gated:
        spec["schedulingGates"] = [{"name": SCHEDULING_GATE}]
    if node:
        spec["nodeName"] = node
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": uid or f"uid-pod-{name}",
        "labels": labels,
        "annotations": annotations,
        "resourceVersion": "7",
        "creationTimestamp": created,
    }
    if owner is not None:
        metadata["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": "Job", "name": "job", "uid": owner, "controller": True}
        ]
    status: dict[str, Any] = {"phase": phase}
    if unschedulable_since is not None:
        status["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "lastTransitionTime": unschedulable_since,
            }
        ]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}


def base_objects(*nodes: dict[str, Any]) -> list[dict[str, Any]]:
    return [*nodes, cluster_queue(), local_queue(), flavor()]


def node_gpus(
    node: str, held: dict[str, list[int]], *, islands: list[list[int]] | None = None
) -> dict[str, Any]:
    """A NodeGPUs of 8 healthy GPUs whose agent reports pods (default namespace) holding ``held``."""
    gpus = [{"index": i, "uuid": f"GPU-{node}-{i}", "health": {"state": "Healthy"}} for i in range(8)]
    pods = [
        {"namespace": "default", "name": name, "containers": [{"name": "c", "gpuIndices": indices}]}
        for name, indices in held.items()
    ]
    status: dict[str, Any] = {"gpus": gpus, "pods": pods}
    if islands is not None:
        status["nvlinkIslands"] = islands
    return {
        "apiVersion": "optsched.io/v1alpha1",
        "kind": "NodeGPUs",
        "metadata": {"name": node},
        "status": status,
    }


def mig_node_gpus(
    node: str,
    current: dict[int, list[tuple[str, int]]],
    *,
    spec: dict[int, list[tuple[str, int]]] | None = None,
    state: str | None = None,
    message: str = "",
    generation: int = 1,
    observed: int | None = None,
    record: str | None = None,
    product: str = H100,
    resource_version: str = "5",
) -> dict[str, Any]:
    """A NodeGPUs whose agent reports MIG-enabled GPUs with ``current`` instances (``(profile, start)``),
    asked for ``spec`` and answering ``state`` for generation ``observed`` (default: the current one)."""
    gpus = [
        {
            "index": i,
            "uuid": f"GPU-{node}-{i}",
            "product": product,
            "memoryMiB": 81559,
            "health": {"state": "Healthy"},
            "mig": {
                "capable": True,
                "enabled": True,
                "instances": [
                    {"profile": p, "start": s, "uuid": f"MIG-{node}-{i}-{s}", "inUse": False}
                    for p, s in layout
                ],
            },
        }
        for i, layout in sorted(current.items())
    ]
    status: dict[str, Any] = {"gpus": gpus, "pods": []}
    if state is not None:
        status["migLayout"] = {
            "state": state,
            "message": message,
            "observedGeneration": generation if observed is None else observed,
        }
    metadata: dict[str, Any] = {
        "name": node,
        "uid": f"uid-ngpu-{node}",
        "resourceVersion": resource_version,
        "generation": generation,
    }
    if record is not None:
        metadata["annotations"] = {"optsched.io/mig-changes": record}
    obj: dict[str, Any] = {
        "apiVersion": "optsched.io/v1alpha1",
        "kind": "NodeGPUs",
        "metadata": metadata,
        "status": status,
    }
    if spec is not None:
        obj["spec"] = {
            "migLayout": [
                {"gpu": g, "instances": [{"profile": p, "start": s} for p, s in layout]}
                for g, layout in sorted(spec.items())
            ]
        }
    return obj
