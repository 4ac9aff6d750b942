"""The planner's view of a simulated MIG pool: a :class:`Snapshot` as a live cluster would give it.

Each node carries its MIG-enabled GPUs (``mig_gpus``: every instance, and
``in_use`` on those a running task holds), advertises one
``nvidia.com/mig-<profile>`` per instance (NVIDIA's mixed strategy) and has
the running tasks' instances in its usage; its GPUs are not whole-GPU
capacity (a GPU in MIG mode serves no whole-GPU pod). Each pending request is
a one-pod Workload asking ``nvidia.com/mig-<profile>: 1`` through a
LocalQueue whose ClusterQueue's quota does not bind, so only the pool limits
what is admitted.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

from optsched.bench.mig_state import MigPool
from optsched.bench.mig_trace import MigRequest
from optsched.mig.layout import resource_name
from optsched.model.mig import MigGpu, MigInstanceState
from optsched.model.names import PRODUCT_LABEL
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
    Workload,
)

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
NAMESPACE = "bench"
QUEUE = "mig"
FLAVOR = "mig"
POD_CPU_MILLI, POD_MEMORY_MIB = 1_000, 4_096
UNBOUND = 1_000_000_000
"""A quota no run reaches."""

PRODUCTS = {"A100-80GB": "NVIDIA-A100-SXM4-80GB", "H100-80GB": "NVIDIA-H100-80GB-HBM3"}
"""The GPU Feature Discovery product of each model the benchmark pools use."""


def workload_name(request: MigRequest) -> str:
    return f"req-{request.id:06d}"


def _node(pool: MigPool, name: str, positions: list[int]) -> tuple[Node, NodeUsage]:
    model = pool.model
    gpus: list[MigGpu] = []
    advertised: Counter[str] = Counter()
    used: Counter[str] = Counter()
    running = 0
    for pos in positions:
        gpu = pool.gpus[pos]
        instances = tuple(
            MigInstanceState(
                profile=i.profile,
                start=i.start,
                uuid=f"MIG-{name}-{gpu.index}-{i.start}",
                in_use=i.task is not None,
            )
            for i in sorted(gpu.instances, key=lambda i: i.start)
        )
        gpus.append(
            MigGpu(index=gpu.index, uuid=f"GPU-{name}-{gpu.index}", model=model.name, instances=instances)
        )
        for i in gpu.instances:
            advertised[resource_name(i.profile)] += 1
            if i.task is not None:
                used[resource_name(i.profile)] += 1
                running += 1
    count = len(positions)
    node = Node(
        name=name,
        labels={PRODUCT_LABEL: PRODUCTS.get(model.name, model.name), "kubernetes.io/hostname": name},
        cpu_milli=256_000,
        memory_mib=2_097_152,
        max_pods=1_000,
        gpu_count=count,
        gpu_product=PRODUCTS.get(model.name, model.name),
        gpu_memory_mib=81_920,
        unhealthy_gpus=frozenset(pool.gpus[p].index for p in positions),
        extended=dict(sorted(advertised.items())),
        mig_gpus=tuple(gpus),
    )
    usage = NodeUsage(
        cpu_milli=POD_CPU_MILLI * running,
        memory_mib=POD_MEMORY_MIB * running,
        pods=running,
        extended=dict(sorted(used.items())),
    )
    return node, usage


def _queue(pool: MigPool) -> tuple[ClusterQueue, LocalQueue, ResourceFlavor]:
    resources = ("cpu", "memory", *sorted({resource_name(p.name) for p in pool.model.profiles}))
    cq = ClusterQueue(
        name=QUEUE,
        resource_groups=(
            ResourceGroup(
                covered_resources=resources,
                flavors=(
                    FlavorQuota(
                        name=FLAVOR,
                        resources=tuple(ResourceQuota(name=r, nominal=UNBOUND) for r in resources),
                    ),
                ),
            ),
        ),
    )
    return cq, LocalQueue(namespace=NAMESPACE, name=QUEUE, cluster_queue=QUEUE), ResourceFlavor(name=FLAVOR)


def _workload(request: MigRequest, window_s: int, order: int) -> Workload:
    created = EPOCH + timedelta(seconds=request.arrival * window_s + order)
    pod_set = PodSet(
        name="main",
        count=1,
        request=PodRequest(
            cpu_milli=POD_CPU_MILLI, memory_mib=POD_MEMORY_MIB, extended={resource_name(request.profile): 1}
        ),
    )
    return Workload(
        namespace=NAMESPACE,
        name=workload_name(request),
        queue_name=QUEUE,
        created=created,
        pod_sets=(pod_set,),
    )


def pool_snapshot(pool: MigPool, pending: list[MigRequest], window_s: int) -> Snapshot:
    """The pool as it stands and the pending requests, as the planner reads a cluster."""
    by_node: dict[str, list[int]] = {}
    for pos, gpu in enumerate(pool.gpus):
        by_node.setdefault(gpu.node, []).append(pos)
    nodes: list[Node] = []
    usage: dict[str, NodeUsage] = {}
    for name, positions in by_node.items():
        node, used = _node(pool, name, positions)
        nodes.append(node)
        if used.pods:
            usage[name] = used
    cq, lq, flavor = _queue(pool)
    return Snapshot(
        nodes=tuple(nodes),
        usage=usage,
        workloads=tuple(_workload(r, window_s, n) for n, r in enumerate(pending)),
        cluster_queues=(cq,),
        local_queues=(lq,),
        flavors=(flavor,),
        source=f"bench mig: {len(pool.gpus)} {pool.model.name}, {len(pending)} pending",
    )
