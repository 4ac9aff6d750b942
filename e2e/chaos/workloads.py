"""The honest workload stream: what arrives when, and the Job or Pod each one is.

Kinds, drawn with fixed weights from a seeded generator:

* ``gang``: 2-4 pods of a whole node or half a node each on one 8-GPU product,
  half of them with a required rack (``optsched.io/required-topology``);
* ``whole-node``: one pod taking every GPU of an 8-GPU node;
* ``small``: one pod of 1-2 GPUs on any product;
* ``partial``: 4 pods of 2 GPUs that Kueue may admit with as few as 2
  (``kueue.x-k8s.io/job-min-parallelism``: partial admission);
* ``plain-pod``: one bare Pod of 1 GPU in the queue (Kueue's pod integration).

Priorities are ``low`` (most), ``mid`` and ``high``, as Kueue
WorkloadPriorityClasses, so Kueue preempts within the ClusterQueue. Every pod
finishes after its run time (KWOK's ``e2e.optsched.io/run-duration``), so the
stream keeps capacity turning over.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from e2e.chaos.capacity import Demand

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"
REQUIRED_TOPOLOGY = "optsched.io/required-topology"
ALLOW_MIXED = "optsched.io/allow-mixed-gpu-products"
RUN_DURATION = "e2e.optsched.io/run-duration"
PRODUCT_LABEL = "nvidia.com/gpu.product"
RACK_LABEL = "cloud.provider.com/topology-rack"
PRIORITIES = {"low": 100, "mid": 500, "high": 1000, "urgent": 10000}
KINDS = (("gang", 3.0), ("whole-node", 2.0), ("small", 3.0), ("partial", 1.5), ("plain-pod", 1.0))


@dataclass(frozen=True)
class WorkloadSpec:
    name: str
    kind: str
    demand: Demand
    priority: str
    run_seconds: int
    annotations: Mapping[str, str] = field(default_factory=dict)
    """Extra pod template annotations (tenants forge optsched's here)."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Extra pod template labels."""

    @property
    def plain_pod(self) -> bool:
        return self.kind == "plain-pod"


@dataclass(frozen=True)
class Products:
    """GPU products of the cluster: GPUs per node and how many nodes, from the Node objects."""

    per_node: Mapping[str, int]
    nodes: Mapping[str, int]

    def with_gpus(self, count: int) -> list[str]:
        return sorted(p for p, n in self.per_node.items() if n >= count)


def _priority(rng: random.Random) -> str:
    return rng.choices(("low", "mid", "high"), weights=(7, 2, 1))[0]


def _spec(kind: str, name: str, rng: random.Random, products: Products) -> WorkloadSpec | None:
    eight = products.with_gpus(8)
    if kind in ("gang", "whole-node", "partial") and not eight:
        kind = "small"
    if kind == "gang":
        product = rng.choice(eight)
        pods = rng.randint(2, min(4, max(2, products.nodes[product])))
        gpus = rng.choice((products.per_node[product], products.per_node[product] // 2))
        level = RACK_LABEL if rng.random() < 0.5 else None
        demand = Demand(pods, gpus, product, level)
        return WorkloadSpec(name, kind, demand, _priority(rng), rng.randint(25, 50))
    if kind == "whole-node":
        product = rng.choice(eight)
        return WorkloadSpec(
            name, kind, Demand(1, products.per_node[product], product), _priority(rng), rng.randint(20, 40)
        )
    if kind == "partial":
        product = rng.choice(eight)
        return WorkloadSpec(
            name, kind, Demand(4, 2, product, min_pods=2), _priority(rng), rng.randint(20, 40)
        )
    anywhere: list[str | None] = [None, *sorted(products.per_node)]
    gpus = 1 if kind == "plain-pod" else rng.randint(1, 2)
    return WorkloadSpec(
        name, kind, Demand(1, gpus, rng.choice(anywhere)), _priority(rng), rng.randint(10, 30)
    )


def stream(
    seed: int, seconds: float, products: Products, mean_gap: float = 5.0
) -> list[tuple[float, WorkloadSpec]]:
    """Arrivals (seconds after the start, spec) over ``seconds``; seeded, so replayable."""
    rng = random.Random(f"workloads:{seed}")
    names = [name for name, _ in KINDS]
    weights = [weight for _, weight in KINDS]
    out = []
    t = rng.uniform(0, 2)
    number = 0
    while t < seconds:
        kind = rng.choices(names, weights=weights)[0]
        spec = _spec(kind, f"{kind}-{number:03d}", rng, products)
        if spec is not None:
            out.append((t, spec))
        number += 1
        t += rng.expovariate(1.0 / mean_gap)
    return out


def _pod_spec(spec: WorkloadSpec) -> dict[str, Any]:
    gpus = str(spec.demand.gpus)
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {
                "name": "main",
                "image": "busybox:1.36",
                "command": ["sleep", str(spec.run_seconds)],
                "resources": {
                    "requests": {"cpu": "100m", "memory": "128Mi", "nvidia.com/gpu": gpus},
                    "limits": {"nvidia.com/gpu": gpus},
                },
            }
        ],
    }
    if spec.demand.product:
        pod["nodeSelector"] = {PRODUCT_LABEL: spec.demand.product}
    return pod


def _template_metadata(spec: WorkloadSpec) -> dict[str, Any]:
    annotations = {RUN_DURATION: f"{spec.run_seconds}s", **spec.annotations}
    if spec.demand.level:
        annotations[REQUIRED_TOPOLOGY] = spec.demand.level
    if spec.demand.mixed:
        annotations[ALLOW_MIXED] = "true"
    return {"annotations": annotations, "labels": {"e2e.optsched.io/chaos-kind": spec.kind, **spec.labels}}


def job_manifest(spec: WorkloadSpec, queue: str) -> dict[str, Any]:
    """An indexed batch Job for ``spec`` in LocalQueue ``queue``."""
    annotations = {}
    if spec.demand.min_pods is not None:
        annotations[MIN_PARALLELISM] = str(spec.demand.min_pods)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": spec.name,
            "labels": {QUEUE_LABEL: queue, PRIORITY_LABEL: f"chaos-{spec.priority}"},
            "annotations": annotations,
        },
        "spec": {
            "parallelism": spec.demand.pods,
            "completions": spec.demand.pods,
            "completionMode": "Indexed",
            "backoffLimit": 0,
            "suspend": True,
            "template": {"metadata": _template_metadata(spec), "spec": _pod_spec(spec)},
        },
    }


def pod_manifest(spec: WorkloadSpec, queue: str) -> dict[str, Any]:
    """A bare Pod for ``spec`` in LocalQueue ``queue`` (Kueue's pod integration)."""
    metadata = _template_metadata(spec)
    metadata["labels"] = {**metadata["labels"], QUEUE_LABEL: queue, PRIORITY_LABEL: f"chaos-{spec.priority}"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": spec.name, **metadata},
        "spec": _pod_spec(spec),
    }


def manifest(spec: WorkloadSpec, queue: str) -> dict[str, Any]:
    return pod_manifest(spec, queue) if spec.plain_pod else job_manifest(spec, queue)


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": name},
        "value": value,
        "description": "optsched chaos soak",
    }
