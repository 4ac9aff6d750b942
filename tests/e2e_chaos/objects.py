"""Canned raw objects for the soak's pure parts: Pods, Nodes and Workloads as the API server returns them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from e2e.chaos.facts import Observation, observation

CHECK = "chaos-check"


def node(
    name: str,
    gpus: int = 8,
    *,
    allocatable: int | None = None,
    unhealthy: tuple[int, ...] = (),
    ready: bool = True,
    taints: tuple[str, ...] = (),
    product: str = "H100",
    rack: str = "rack-0",
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {"nvidia.com/gpu.product": product, "cloud.provider.com/topology-rack": rack},
            "annotations": {"optsched.io/gpu-topology": json.dumps({"unhealthy": list(unhealthy)})},
        },
        "spec": {"taints": [{"key": "t", "effect": e} for e in taints]},
        "status": {
            "capacity": {"nvidia.com/gpu": str(gpus)},
            "allocatable": {"nvidia.com/gpu": str(gpus if allocatable is None else allocatable)},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod(
    name: str,
    *,
    namespace: str = "team",
    node: str | None = None,
    gpus: int = 1,
    indices: str | None = None,
    pinned: str | None = None,
    plan: str | None = None,
    index: int | None = None,
    owner: str | None = None,
    phase: str = "Running",
    gated: bool = False,
    deleting: bool = False,
    queue: str | None = None,
    bypass: bool = False,
) -> dict[str, Any]:
    """A pod; one with a node was bound by kube-scheduler, unless ``bypass``: created onto it."""
    labels = {"optsched.io/podset": "main"}
    if plan:
        labels["optsched.io/plan-id"] = plan
    if queue:
        labels["kueue.x-k8s.io/queue-name"] = queue
    annotations = {}
    if indices is not None:
        annotations["optsched.io/gpus"] = indices
    if index is not None:
        annotations["optsched.io/pod-index"] = str(index)
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
    }
    if node:
        spec["nodeName"] = node
    if pinned:
        spec["nodeSelector"] = {"kubernetes.io/hostname": pinned}
    if gated:
        spec["schedulingGates"] = [{"name": "optsched.io/placement"}]
    md: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}"}
    md["labels"], md["annotations"] = labels, annotations
    if owner:
        md["ownerReferences"] = [{"uid": owner}]
    if deleting:
        md["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    if node and not bypass:
        md["managedFields"] = [{"manager": "kube-scheduler", "operation": "Update", "subresource": "binding"}]
    return {"metadata": md, "spec": spec, "status": {"phase": phase}}


def workload(
    name: str,
    *,
    namespace: str = "team",
    owner: str,
    plan: str | None = None,
    slots: Sequence[tuple[int, str, list[int] | None]] = (),
    admitted: bool = False,
    reserved: bool | None = None,
    ready: bool | None = None,
    count: int | None = None,
    finished: str | None = None,
    evicted: str | None = None,
    preempted: bool = False,
) -> dict[str, Any]:
    conditions = []
    if admitted:
        conditions.append({"type": "Admitted", "status": "True"})
    if reserved if reserved is not None else admitted:
        conditions.append({"type": "QuotaReserved", "status": "True"})
    if finished:
        conditions.append({"type": "Finished", "status": "True", "reason": finished})
    if evicted:
        conditions.append({"type": "Evicted", "status": "True", "reason": evicted})
    if preempted:
        conditions.append({"type": "Preempted", "status": "True"})
    annotations = {}
    if plan:
        record = {
            "planId": plan,
            "podSets": {"main": [{"index": i, "node": n, "gpus": g} for i, n, g in slots]},
        }
        annotations["optsched.io/placement"] = json.dumps(record)
    status: dict[str, Any] = {"conditions": conditions}
    if ready if ready is not None else bool(plan):
        status["admissionChecks"] = [{"name": CHECK, "state": "Ready"}]
    if count is not None:
        status["admission"] = {"podSetAssignments": [{"name": "main", "count": count}]}
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"wl-{namespace}-{name}",
            "ownerReferences": [{"uid": owner}],
            "annotations": annotations,
        },
        "spec": {},
        "status": status,
    }


def cluster_queue(nominal: int = 100, reserved: int = 0) -> dict[str, Any]:
    return {
        "spec": {
            "resourceGroups": [
                {
                    "flavors": [
                        {"name": "f", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": nominal}]}
                    ]
                }
            ]
        },
        "status": {
            "flavorsReservation": [
                {"name": "f", "resources": [{"name": "nvidia.com/gpu", "total": str(reserved)}]}
            ]
        },
    }


def observe(
    at: float,
    *,
    pods: Sequence[dict[str, Any]] = (),
    nodes: Sequence[dict[str, Any]] = (),
    workloads: Sequence[dict[str, Any]] = (),
    quota: dict[str, Any] | None = None,
    jobs: Sequence[dict[str, Any]] | None = None,
) -> Observation:
    """An observation; without ``jobs``, a Job exists for the owner of every Workload."""
    if jobs is None:
        owners = {o["uid"] for w in workloads for o in w["metadata"].get("ownerReferences", [])}
        jobs = [{"metadata": {"uid": uid}} for uid in sorted(owners)]
    return observation(at, pods, nodes, workloads, quota or cluster_queue(), jobs, CHECK)
