"""The classic queue of ``optsched bench scale --queue classic``: a mostly idle cluster, a simple queue.

N nodes of 8 GPUs, mostly H100 on NVSwitch (one NVLink island of 8), some
A100 PCIe boxes with four NVLink pairs; racks of 16-32 nodes grouped into
blocks of 4-8 racks; about a fifth of the nodes partly used (some by pods that
do not say which GPU indices they hold). The queue: single pods of 1/2/4/8
GPUs, gangs of 2-16 pods (some requiring one rack), two priority levels,
created over a few hours. Its demand either oversubscribes the cluster about
threefold or fits whole, so every sensible policy admits the same GPUs; it
stays as the speed benchmark it was, and the contended queue
(:mod:`optsched.bench.scale_cluster`) is the default.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from optsched.model.names import DEFAULT_TOPOLOGY_LEVELS, HOSTNAME_LABEL, PRODUCT_LABEL
from optsched.model.snapshot import Node, NodeUsage, PodRequest, PodSet, Snapshot, Workload

H100 = "NVIDIA-H100-80GB-HBM3"
A100 = "NVIDIA-A100-PCIE-40GB"
BLOCK, RACK = DEFAULT_TOPOLOGY_LEVELS[0], DEFAULT_TOPOLOGY_LEVELS[1]
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def synthetic_cluster(nodes: int, workloads: int, seed: int) -> Snapshot:
    """A seeded cluster and pending queue as described in the module docstring."""
    rng = random.Random(seed)
    racks = _Racks(rng)
    node_list: list[Node] = []
    usage: dict[str, NodeUsage] = {}
    for i in range(nodes):
        block, rack = racks.next_node()
        node = _node(rng, f"node-{i:05d}", block, rack)
        node_list.append(node)
        if rng.random() < 0.2:
            usage[node.name] = _partial_usage(rng, node)
    queue = [_queued(rng, j, workloads) for j in range(workloads)]
    return Snapshot(
        nodes=tuple(node_list), usage=usage, workloads=tuple(queue), source=f"synthetic seed {seed}"
    )


class _Racks:
    """Rack and block of each next node: racks of 16-32 nodes, 4-8 racks per block, sizes drawn as filled."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.block, self.rack, self.in_rack = 0, 0, 0
        self.rack_size = rng.randint(16, 32)
        self.racks_in_block, self.block_size = 0, rng.randint(4, 8)

    def next_node(self) -> tuple[int, int]:
        """Rack and block of the next node, drawing the next rack's (and block's) size once one fills."""
        if self.in_rack == self.rack_size:
            self.rack, self.in_rack, self.rack_size = self.rack + 1, 0, self.rng.randint(16, 32)
            self.racks_in_block += 1
            if self.racks_in_block == self.block_size:
                self.block, self.racks_in_block, self.block_size = self.block + 1, 0, self.rng.randint(4, 8)
        self.in_rack += 1
        return self.block, self.rack


def _node(rng: random.Random, name: str, block: int, rack: int) -> Node:
    """Mostly H100 on NVSwitch (one island of 8); about one in seven an A100 PCIe box of four pairs."""
    a100 = rng.random() < 0.15
    product = A100 if a100 else H100
    islands = tuple((2 * k, 2 * k + 1) for k in range(4)) if a100 else (tuple(range(8)),)
    return Node(
        name=name,
        labels={
            PRODUCT_LABEL: product,
            BLOCK: f"b{block}",
            RACK: f"b{block}-r{rack}",
            HOSTNAME_LABEL: name,
        },
        cpu_milli=128_000,
        memory_mib=1_048_576,
        gpu_count=8,
        gpu_product=product,
        gpu_memory_mib=40_960 if a100 else 81_920,
        nvlink_islands=islands,
    )


def _partial_usage(rng: random.Random, node: Node) -> NodeUsage:
    """Some GPUs in use; a quarter of such nodes do not say which, as pods without device IDs."""
    used = rng.choice([1, 2, 3, 4, 6])
    if rng.random() < 0.25:
        return NodeUsage(cpu_milli=8_000 * used, memory_mib=65_536 * used, pods=used, unknown_index_gpus=used)
    taken = sorted(rng.sample(range(8), used))
    milli = tuple(1000 if g in taken else 0 for g in range(8))
    mem = tuple(node.gpu_memory_mib if g in taken else 0 for g in range(8))
    return NodeUsage(
        cpu_milli=8_000 * used,
        memory_mib=65_536 * used,
        pods=len(taken),
        gpu_milli=milli,
        gpu_mem_mib=mem,
    )


def _queued(rng: random.Random, j: int, workloads: int) -> Workload:
    """Job ``j`` of the queue: a single pod or a gang (some requiring one rack), created over four hours."""
    priority = 100 if rng.random() < 0.2 else 0
    created = EPOCH + timedelta(seconds=int(j * 4 * 3600 / max(1, workloads)))
    if rng.random() < 0.6:
        gpus = rng.choice([1, 1, 2, 4, 8])
        count, required = 1, None
    else:
        gpus = rng.choice([4, 8, 8])
        count = rng.randint(2, 16)
        required = RACK if rng.random() < 0.3 else None
    request = PodRequest(cpu_milli=8_000 * gpus, memory_mib=65_536 * gpus, gpus=gpus)
    return Workload(
        namespace="bench",
        name=f"job-{j:05d}",
        priority=priority,
        created=created,
        pod_sets=(PodSet(name="workers", count=count, request=request, required_topology=required),),
    )
