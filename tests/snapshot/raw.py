"""Raw Kubernetes and Kueue objects as a dump holds them, for the snapshot reader's tests."""

from __future__ import annotations

from typing import Any

KUEUE = "kueue.x-k8s.io/v1beta2"
GPU = "nvidia.com/gpu"
HOSTNAME = "kubernetes.io/hostname"
RACK = "cloud.provider.com/topology-rack"


def node(name: str, *, gpus: int = 8, rack: str = "r1", version: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", HOSTNAME: name, RACK: rack},
    }
    if version is not None:
        meta["resourceVersion"] = version
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": meta,
        "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", GPU: str(gpus)}},
    }


def pod(
    name: str,
    node_name: str | None,
    *,
    gpus: int = 2,
    namespace: str = "ml",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    owner: str | None = None,
    version: str | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": labels or {},
        "annotations": annotations or {},
    }
    if owner is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": "Job", "name": owner, "uid": f"uid-{owner}"}
        ]
    if version is not None:
        meta["resourceVersion"] = version
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"limits": {GPU: str(gpus)}}}]}
    if node_name is not None:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": "Running"}}


def cluster_queue(
    name: str = "cq", *, gpus: int = 4, status_gpus: int | None = None, version: str | None = None
) -> dict[str, Any]:
    resources = [{"name": r, "nominalQuota": q} for r, q in (("cpu", "64"), ("memory", "512Gi"), (GPU, gpus))]
    obj: dict[str, Any] = {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory", GPU],
                    "flavors": [{"name": "h100", "resources": resources}],
                }
            ],
        },
    }
    if version is not None:
        obj["metadata"]["resourceVersion"] = version
    if status_gpus is not None:
        totals = [{"name": "cpu", "total": "0"}, {"name": "memory", "total": "0"}]
        totals.append({"name": GPU, "total": str(status_gpus)})
        obj["status"] = {"flavorsReservation": [{"name": "h100", "resources": totals}]}
    return obj


def queue_objects() -> list[dict[str, Any]]:
    """The LocalQueue ``ml/lq`` onto ClusterQueue ``cq`` and its flavor ``h100``."""
    return [
        {
            "apiVersion": KUEUE,
            "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": "ml"},
            "spec": {"clusterQueue": "cq"},
        },
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "h100"}, "spec": {}},
    ]


def workload(
    name: str,
    *,
    gpus: int = 2,
    count: int = 1,
    admitted: bool = False,
    usage: bool = True,
    topology: dict[str, Any] | None = None,
    extra_conditions: tuple[tuple[str, str], ...] = (),
    annotations: dict[str, str] | None = None,
    owner: str | None = None,
    api: str = KUEUE,
    version: str | None = None,
) -> dict[str, Any]:
    """A Workload of one PodSet; ``admitted`` gives it Kueue's reservation and Admitted condition."""
    template = {
        "spec": {"containers": [{"name": "c", "resources": {"requests": {GPU: str(gpus), "cpu": "1"}}}]}
    }
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "ml",
        "creationTimestamp": "2026-11-01T10:00:00Z",
        "annotations": annotations or {},
    }
    if owner is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": "Job", "name": owner, "uid": f"uid-{owner}"}
        ]
    if version is not None:
        meta["resourceVersion"] = version
    obj: dict[str, Any] = {
        "apiVersion": api,
        "kind": "Workload",
        "metadata": meta,
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": count, "template": template}]},
        "status": {"conditions": [{"type": t, "status": s} for t, s in extra_conditions]},
    }
    if admitted:
        assignment: dict[str, Any] = {
            "name": "main",
            "count": count,
            "flavors": {"cpu": "h100", "memory": "h100", GPU: "h100"},
        }
        if usage:
            assignment["resourceUsage"] = {GPU: str(gpus * count), "cpu": str(count)}
        if topology is not None:
            assignment["topologyAssignment"] = topology
        obj["status"]["admission"] = {"clusterQueue": "cq", "podSetAssignments": [assignment]}
        conditions = [{"type": "QuotaReserved", "status": "True"}, {"type": "Admitted", "status": "True"}]
        obj["status"]["conditions"] = conditions + obj["status"]["conditions"]
    return obj


def hostnames(*per_node: tuple[str, int]) -> dict[str, Any]:
    """A v1beta1 ``topologyAssignment`` naming nodes by hostname, with pod counts."""
    return {"levels": [HOSTNAME], "domains": [{"values": [n], "count": c} for n, c in per_node]}


NODE_GPUS_API = "optsched.io/v1alpha1"


def uuid(node_name: str, index: int) -> str:
    return f"GPU-{node_name}-{index:04d}"


def node_gpus(
    name: str,
    *,
    gpus: int = 8,
    islands: list[list[int]] | None = None,
    numa: list[int | None] | None = None,
    unhealthy: tuple[int, ...] = (),
    pods: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A NodeGPUs as the node agent publishes it: one NVSwitch island unless ``islands`` says otherwise."""
    groups = islands if islands is not None else [list(range(gpus))]
    island_of = {gpu: number for number, group in enumerate(groups) for gpu in group}
    entries = [
        {
            "index": i,
            "minor": i,
            "uuid": uuid(name, i),
            "pciBusId": f"00000000:{0x18 + i:02X}:00.0",
            "numa": (numa[i] if numa is not None else i * 2 // gpus),
            "island": island_of.get(i),
            "product": "NVIDIA-H100-80GB-HBM3",
            "memoryMiB": 81559,
            "clique": None,
            "health": {"state": "Unhealthy", "reason": "XID 79 (GPU has fallen off the bus)"}
            if i in unhealthy
            else {"state": "Healthy", "reason": ""},
            "mig": {"capable": True, "enabled": False, "instances": []},
        }
        for i in range(gpus)
    ]
    return {
        "apiVersion": NODE_GPUS_API,
        "kind": "NodeGPUs",
        "metadata": {
            "name": name,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": f"uid-{name}"}],
        },
        "spec": {},
        "status": {
            "backend": "simulated",
            "driverVersion": "",
            "nvlinkIslands": groups,
            "gpus": entries,
            "pods": pods or [],
            "migLayout": {"state": "Success", "message": "", "observedGeneration": 1},
            "heartbeat": "2026-12-01T13:00:00Z",
        },
    }


def holding(node_name: str, pod_name: str, *indices: int, namespace: str = "ml") -> dict[str, Any]:
    """A ``status.pods`` entry: the pod's one container holds these GPUs of ``node_name``."""
    return {
        "namespace": namespace,
        "name": pod_name,
        "containers": [
            {
                "name": "c",
                "gpuUUIDs": [uuid(node_name, i) for i in indices],
                "gpuIndices": list(indices),
                "migUUIDs": [],
            }
        ],
    }
