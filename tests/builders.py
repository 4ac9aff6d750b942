"""Small constructors for snapshots in tests: readable one-liners instead of YAML."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import count

from optsched.model.names import DEFAULT_TOPOLOGY_LEVELS, HOSTNAME_LABEL, PRODUCT_LABEL
from optsched.model.snapshot import (
    ClusterQueue,
    FlavorQuota,
    LocalQueue,
    Node,
    NodeUsage,
    PodRequest,
    PodSet,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Snapshot,
    Taint,
    Toleration,
    Workload,
)

BLOCK, RACK = DEFAULT_TOPOLOGY_LEVELS[0], DEFAULT_TOPOLOGY_LEVELS[1]
H100 = "NVIDIA-H100-80GB-HBM3"
A100 = "NVIDIA-A100-PCIE-40GB"
T4 = "Tesla-T4"
_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
_seq = count()


def node(
    name: str,
    *,
    gpus: int = 8,
    product: str = H100,
    islands: list[list[int]] | None = None,
    rack: str = "r1",
    block: str = "b1",
    cpu: int = 128_000,
    mem: int = 1_048_576,
    gpu_mem: int = 81_920,
    taints: tuple[Taint, ...] = (),
    unhealthy: frozenset[int] = frozenset(),
    labels: dict[str, str] | None = None,
    extended: dict[str, int] | None = None,
) -> Node:
    """A GPU node; islands default to one NVSwitch island holding every GPU."""
    if islands is None:
        islands = [list(range(gpus))] if gpus else []
    all_labels = {PRODUCT_LABEL: product, BLOCK: block, RACK: rack, HOSTNAME_LABEL: name}
    all_labels.update(labels or {})
    return Node(
        name=name,
        labels=all_labels,
        taints=taints,
        cpu_milli=cpu,
        memory_mib=mem,
        gpu_count=gpus,
        gpu_product=product,
        gpu_memory_mib=gpu_mem,
        nvlink_islands=tuple(tuple(i) for i in islands),
        unhealthy_gpus=unhealthy,
        extended=extended or {},
    )


def pods(
    count_: int,
    gpus: int,
    *,
    name: str = "main",
    cpu: int = 1000,
    mem: int = 4096,
    gpu_milli: int = 1000,
    gpu_mem: int = 0,
    min_count: int | None = None,
    required_topology: str | None = None,
    preferred_topology: str | None = None,
    nvlink_required: bool = False,
    node_selector: dict[str, str] | None = None,
    tolerations: tuple[Toleration, ...] = (),
    extended: dict[str, int] | None = None,
) -> PodSet:
    return PodSet(
        name=name,
        count=count_,
        min_count=min_count,
        request=PodRequest(
            cpu_milli=cpu,
            memory_mib=mem,
            gpus=gpus,
            gpu_milli=gpu_milli,
            gpu_mem_mib=gpu_mem,
            extended=extended or {},
        ),
        node_selector=node_selector or {},
        tolerations=tolerations,
        required_topology=required_topology,
        preferred_topology=preferred_topology,
        nvlink_required=nvlink_required,
    )


def workload(
    name: str,
    *pod_sets: PodSet,
    priority: int = 0,
    age: int | None = None,
    namespace: str = "default",
    queue: str = "",
) -> Workload:
    """A pending workload; ``age`` orders creation (larger = created earlier)."""
    seq = next(_seq)
    created = _EPOCH - timedelta(seconds=age) if age is not None else _EPOCH + timedelta(seconds=seq)
    return Workload(
        namespace=namespace,
        name=name,
        queue_name=queue,
        priority=priority,
        created=created,
        pod_sets=pod_sets,
    )


def snapshot(
    nodes: list[Node],
    workloads: list[Workload],
    *,
    usage: dict[str, NodeUsage] | None = None,
    cluster_queues: list[ClusterQueue] | None = None,
    local_queues: list[LocalQueue] | None = None,
    flavors: list[ResourceFlavor] | None = None,
) -> Snapshot:
    return Snapshot(
        nodes=tuple(nodes),
        workloads=tuple(workloads),
        usage=usage or {},
        cluster_queues=tuple(cluster_queues or ()),
        local_queues=tuple(local_queues or ()),
        flavors=tuple(flavors or ()),
    )


def gpu_queue(
    name: str,
    *,
    gpus: int,
    flavor: str = "default",
    cohort: str | None = None,
    borrowing_limit: int | None = None,
) -> ClusterQueue:
    """A ClusterQueue with a GPU quota (and ample CPU/memory) on one flavor."""
    return ClusterQueue(
        name=name,
        cohort=cohort,
        resource_groups=(
            ResourceGroup(
                covered_resources=("cpu", "memory", "nvidia.com/gpu"),
                flavors=(
                    FlavorQuota(
                        name=flavor,
                        resources=(
                            ResourceQuota(name="cpu", nominal=10_000_000),
                            ResourceQuota(name="memory", nominal=100_000_000),
                            ResourceQuota(
                                name="nvidia.com/gpu", nominal=gpus, borrowing_limit=borrowing_limit
                            ),
                        ),
                    ),
                ),
            ),
        ),
    )
