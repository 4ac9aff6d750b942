"""Raw Kueue queue objects, Namespaces and Workloads as a dump holds them, for the admissibility tests.

``cluster()`` is a well-formed cluster: one 8-GPU node, flavor ``gpu``, the
AdmissionCheck ``prov``, ClusterQueue ``cq`` (``namespaceSelector: {}``) and
LocalQueue ``team/lq`` pointing at it. Each test breaks one thing.
"""

from __future__ import annotations

from typing import Any

KUEUE = "kueue.x-k8s.io/v1beta2"


def node(name: str = "n1", gpus: int = 8) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
        "status": {
            "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(gpus)},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def flavor(name: str = "gpu") -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": {}}


def admission_check(name: str = "prov", *, active: str | None = "True") -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": KUEUE,
        "kind": "AdmissionCheck",
        "metadata": {"name": name},
        "spec": {"controllerName": "example.com/provisioner"},
    }
    if active is not None:
        obj["status"] = {"conditions": [{"type": "Active", "status": active, "reason": "Ready"}]}
    return obj


def cluster_queue(
    name: str = "cq",
    *,
    flavors: tuple[str, ...] = ("gpu",),
    checks: tuple[str, ...] = ("prov",),
    selector: dict[str, Any] | None = None,
    stop: str | None = None,
    condition: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A ClusterQueue; ``selector`` None leaves ``namespaceSelector`` out (Kueue: no namespace)."""
    spec: dict[str, Any] = {
        "resourceGroups": [
            {
                "coveredResources": ["nvidia.com/gpu"],
                "flavors": [
                    {"name": f, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "64"}]}
                    for f in flavors
                ],
            }
        ],
    }
    if checks:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": c} for c in checks]}
    if selector is not None:
        spec["namespaceSelector"] = selector
    if stop is not None:
        spec["stopPolicy"] = stop
    obj: dict[str, Any] = {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": spec,
    }
    if condition is not None:
        obj["status"] = {"conditions": [{"type": "Active", **condition}]}
    return obj


def local_queue(
    name: str = "lq", namespace: str = "team", cq: str = "cq", *, stop: str | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {"clusterQueue": cq}
    if stop is not None:
        spec["stopPolicy"] = stop
    return {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def workload(
    name: str,
    *,
    namespace: str = "team",
    queue: str = "lq",
    gpus: int = 2,
    reserved_in: str | None = None,
) -> dict[str, Any]:
    """A pending Workload; ``reserved_in`` gives it a quota reservation in that ClusterQueue."""
    obj: dict[str, Any] = {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {
            "queueName": queue,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "containers": [
                                {"name": "c", "resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}
                            ]
                        }
                    },
                }
            ],
        },
    }
    if reserved_in is not None:
        obj["status"] = {
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
            ],
            "admission": {
                "clusterQueue": reserved_in,
                "podSetAssignments": [{"name": "main", "count": 1, "flavors": {"nvidia.com/gpu": "gpu"}}],
            },
        }
    return obj


def cluster(*, cq: dict[str, Any] | None = None, lq: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The well-formed cluster, with ``cq`` or ``lq`` in place of the default ones."""
    return [
        node(),
        flavor(),
        admission_check(),
        cq if cq is not None else cluster_queue(selector={}),
        lq if lq is not None else local_queue(),
    ]
