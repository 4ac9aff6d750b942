"""The contended instance of ``optsched bench scale``: a live-looking cluster whose queue does not fit.

A benchmark can only tell policies apart where they must choose. Here every
seed draws:

- the machines of the topology benchmark (:func:`optsched.bench.topology_cluster.synthetic_cluster`):
  racks of one kind each, H100 and H200 NVSwitch boards (one NVLink island of
  8), A100 PCIe boxes (four NVLink pairs, 40 GB) and NVL72-style GB200 racks of
  18 four-GPU nodes that form one NVLink clique (``nvidia.com/gpu.clique``),
  4-8 racks per block;
- a running population: 30-60% of the nodes partly used (scattered GPU
  indices; a quarter of them by pods that do not say which indices they hold;
  some with a GPU shared by a fractional pod) and 3-8% of the nodes full, so
  free capacity is fragmented as in a live cluster;
- a pending queue whose GPU demand is 1.2-1.5x the free GPUs: fractional pods
  (a quarter or half of one GPU), single pods of 1/2/4/8 GPUs, and gangs of
  2-64 pods of 1-8 GPUs each (at most a quarter of the free GPUs, so every
  gang could run on its own); gangs of up to 64 GPUs often require one rack,
  larger ones up to 256 GPUs sometimes one block, and the others prefer a
  rack or a block (Kueue TAS ``podset-required-topology`` /
  ``podset-preferred-topology``); a quarter of the workloads select one GPU
  product; three priority levels.

The queue is brought to the drawn ratio by turning some gangs into single pods
(or growing every gang) and then adding or removing single pods of gangs; where the
queue is too small or too large for the cluster to reach it (a few workloads on
many nodes, or the reverse) the ratio lands outside the range, and
:func:`demand_ratio` says where. Everything depends on the seed alone.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from optsched.bench.topology_cluster import BLOCK, RACK
from optsched.bench.topology_cluster import synthetic_cluster as topology_nodes
from optsched.capacity.state import ClusterState
from optsched.model.names import CLIQUE_LABEL, PRODUCT_LABEL
from optsched.model.snapshot import FULL_GPU_MILLI, Node, NodeUsage, PodRequest, PodSet, Snapshot, Workload

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
GB200 = "NVIDIA-GB200"
A100 = "NVIDIA-A100-PCIE-40GB"
MIN_GANG, MAX_GANG = 2, 64
PRIORITIES = (0, 100, 1000)
_POD_SIZES = (2, 4, 8, 16, 32, 64)


@dataclass(frozen=True)
class _Shape:
    """One pending workload before it becomes a :class:`Workload`: pods, their request, a product."""

    pods: int
    gpus: int
    milli: int = FULL_GPU_MILLI
    product: str | None = None

    @property
    def demand(self) -> float:
        return self.pods * self.gpus * self.milli / FULL_GPU_MILLI

    @property
    def gang(self) -> bool:
        return self.pods > 1


def contended_cluster(nodes: int, workloads: int, seed: int) -> Snapshot:
    """A seeded contended snapshot as described in the module docstring."""
    rng = random.Random(seed)
    node_list = [_machine(n) for n in topology_nodes(nodes, seed)]
    usage = _running(rng, node_list)
    free = _free_gpus(node_list, usage)
    ratio = rng.uniform(1.22, 1.48)
    cap = max(2 * 8, free / 4)
    drawn = [_draw_shape(rng, node_list, cap) for _ in range(workloads)]
    shapes = _fit_demand(rng, drawn, ratio * free, cap)
    queue = tuple(_workload(rng, j, shape, workloads) for j, shape in enumerate(shapes))
    return Snapshot(nodes=tuple(node_list), usage=usage, workloads=queue, source=f"contended seed {seed}")


def demand_ratio(snapshot: Snapshot) -> float:
    """Pending GPU demand (shares by fraction) over free GPUs; 0 for a cluster with none free."""
    free = _free_gpus(list(snapshot.nodes), snapshot.usage)
    demand = sum(w.gpu_demand for w in snapshot.workloads)
    return demand / free if free > 0 else 0.0


def _machine(node: Node) -> Node:
    """The topology benchmark's node with what this benchmark adds: A100 memory, GB200 cliques."""
    if node.product == A100:
        return node.model_copy(update={"gpu_memory_mib": 40_960})
    if node.product == GB200:
        return node.model_copy(update={"labels": {**node.labels, CLIQUE_LABEL: node.labels[RACK]}})
    return node


def _running(rng: random.Random, nodes: list[Node]) -> dict[str, NodeUsage]:
    """Usage of the running population: some nodes full, many partly used, the rest idle."""
    partly, full = rng.uniform(0.3, 0.6), rng.uniform(0.03, 0.08)
    usage: dict[str, NodeUsage] = {}
    for node in nodes:
        draw = rng.random()
        if draw < full:
            usage[node.name] = _usage(rng, node, node.gpu_count)
        elif draw < full + partly:
            usage[node.name] = _usage(rng, node, rng.randint(1, node.gpu_count - 1))
    return usage


def _usage(rng: random.Random, node: Node, used: int) -> NodeUsage:
    """``used`` whole GPUs taken; a quarter of such nodes do not say which; some share one more GPU."""
    cpu, mem = 8_000 * used, 65_536 * used
    if rng.random() < 0.25:
        return NodeUsage(cpu_milli=cpu, memory_mib=mem, pods=used, unknown_index_gpus=used)
    taken = set(rng.sample(range(node.gpu_count), used))
    milli = [FULL_GPU_MILLI if g in taken else 0 for g in range(node.gpu_count)]
    mem_used = [node.gpu_memory_mib if g in taken else 0 for g in range(node.gpu_count)]
    pods = used
    spare = [g for g in range(node.gpu_count) if g not in taken]
    if spare and rng.random() < 0.2:
        shared = rng.choice(spare)
        milli[shared], mem_used[shared], pods = 500, node.gpu_memory_mib // 2, pods + 1
    return NodeUsage(
        cpu_milli=cpu, memory_mib=mem, pods=pods, gpu_milli=tuple(milli), gpu_mem_mib=tuple(mem_used)
    )


def _free_gpus(nodes: list[Node], usage: dict[str, NodeUsage]) -> float:
    """Free GPUs as the plan summary counts them (shares by fraction, no node below zero)."""
    state = ClusterState.from_snapshot(Snapshot(nodes=tuple(nodes), usage=usage))
    return sum(max(0, n.free_gpu_milli) for n in state.nodes) / FULL_GPU_MILLI


def _draw_shape(rng: random.Random, nodes: list[Node], cap: float) -> _Shape:
    """A fractional pod (15%), a single pod (40%) or a gang (45%) of at most ``cap`` GPUs (beyond two pods).

    A quarter of them select one product.
    """
    product = rng.choice(nodes).product if rng.random() < 0.25 else None
    most = 4 if product == GB200 else 8
    kind = rng.random()
    if kind < 0.15:
        return _Shape(pods=1, gpus=1, milli=rng.choice((250, 500)), product=product)
    gpus = min(most, rng.choices((1, 2, 4, 8), weights=(4, 3, 3, 1) if kind < 0.55 else (1, 2, 3, 4))[0])
    if kind < 0.55:
        return _Shape(pods=1, gpus=gpus, product=product)
    sizes = [(p, w) for p, w in zip(_POD_SIZES, (8, 6, 4, 2, 1, 1), strict=True) if p * gpus <= cap]
    pods = rng.choices([p for p, _ in sizes], weights=[w for _, w in sizes])[0] if sizes else MIN_GANG
    return _Shape(pods=pods, gpus=gpus, product=product)


def _fit_demand(rng: random.Random, shapes: list[_Shape], target: float, cap: float) -> list[_Shape]:
    """Bring the queue's demand close to ``target``, keeping every gang within 2-64 pods and ``cap`` GPUs.

    Too much demand: random gangs become single pods of the same request (so the
    gangs that stay keep their drawn sizes); too little: every gang grows by
    one factor. Then single pods are added to or taken from random gangs.
    """
    out = list(shapes)
    total = sum(s.demand for s in out)
    gangs = [i for i, s in enumerate(out) if s.gang]
    rng.shuffle(gangs)
    while total > target and len(gangs) > 1:
        i = gangs.pop()
        total -= out[i].demand - out[i].gpus
        out[i] = replace(out[i], pods=1)
    if total < target and gangs:
        gang_demand = sum(out[i].demand for i in gangs)
        factor = 1 + (target - total) / gang_demand
        for i in gangs:
            pods = min(_most_pods(out[i], cap), round(out[i].pods * factor))
            out[i] = replace(out[i], pods=max(MIN_GANG, pods))
        total = sum(s.demand for s in out)
    for _ in range(50 * len(gangs)):
        if abs(total - target) <= 0.005 * target:
            break
        i = rng.choice(gangs)
        step = 1 if total < target else -1
        pods = out[i].pods + step
        if MIN_GANG <= pods <= max(out[i].pods, _most_pods(out[i], cap)):
            total += step * out[i].gpus
            out[i] = replace(out[i], pods=pods)
    return out


def _most_pods(shape: _Shape, cap: float) -> int:
    return max(MIN_GANG, min(MAX_GANG, int(cap // shape.gpus)))


def _workload(rng: random.Random, j: int, shape: _Shape, workloads: int) -> Workload:
    """Job ``j``: its pods, priority, product selector and topology request, created over four hours."""
    request = _request(shape)
    required, preferred = _topology(rng, shape)
    pod_set = PodSet(
        name="workers",
        count=shape.pods,
        request=request,
        node_selector={PRODUCT_LABEL: shape.product} if shape.product else {},
        required_topology=required,
        preferred_topology=preferred,
    )
    return Workload(
        namespace="bench",
        name=f"job-{j:05d}",
        priority=rng.choices(PRIORITIES, weights=(70, 20, 10))[0],
        created=EPOCH + timedelta(seconds=int(j * 4 * 3600 / max(1, workloads))),
        pod_sets=(pod_set,),
    )


def _request(shape: _Shape) -> PodRequest:
    if shape.milli < FULL_GPU_MILLI:
        return PodRequest(cpu_milli=2_000, memory_mib=16_384, gpus=1, gpu_milli=shape.milli)
    return PodRequest(cpu_milli=8_000 * shape.gpus, memory_mib=65_536 * shape.gpus, gpus=shape.gpus)


def _topology(rng: random.Random, shape: _Shape) -> tuple[str | None, str | None]:
    """Required and preferred level of a gang: small ones often need a rack, large ones a block."""
    if not shape.gang:
        return None, None
    gpus = shape.pods * shape.gpus
    draw = rng.random()
    if gpus <= 64 and draw < 0.35:
        return RACK, None
    if 64 < gpus <= 256 and draw < 0.3:
        return BLOCK, None
    if draw < 0.75:
        return None, RACK
    return (None, BLOCK) if draw < 0.9 else (None, None)
