"""Which resource binds a gang on a group of nodes, with the figures a reason states.

The pods of a PodSet are identical, so on each node every resource they ask
for leaves room for some number of them: free CPU over a pod's CPU, free
memory, pod slots, each MIG profile's free slices, the free whole GPUs over the
GPUs per pod (inside one NVLink island where that is required), or the shares
its GPUs hold. Counting each resource alone over the group says which one is
short: the one with room for the fewest pods binds. Whole GPUs that suffice in
total but not on enough nodes bind as "GPUs per node". When every resource
alone has room but no node has them all at once, nothing single binds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from optsched.capacity.fit import gpu_room
from optsched.capacity.state import NodeState
from optsched.model.names import GPU_RESOURCE
from optsched.model.snapshot import FULL_GPU_MILLI, PodSet


class Kind:
    """What a :class:`Limit` counts, as the reasons name it."""

    GPUS = "GPUs"
    GPUS_PER_NODE = "GPUs per node"
    NVLINK = "NVLink islands"
    SHARES = "GPU shares"
    CPU = "CPU"
    MEMORY = "memory"
    PODS = "pod slots"
    MIG = "MIG slices"

    GPU_KINDS = frozenset({GPUS, GPUS_PER_NODE, NVLINK, SHARES})


@dataclass(frozen=True)
class Limit:
    """How many pods of a gang one resource leaves room for on a group of nodes, with its figures."""

    kind: str
    """One of :class:`Kind`."""
    resource: str
    """The Kubernetes resource name: ``cpu``, ``memory``, ``pods``, ``nvidia.com/gpu``, a MIG resource."""
    pods: int
    """Pods this resource alone leaves room for (at most the gang's size)."""
    needed: float
    """What the gang needs of it, in ``unit``."""
    available: float
    """What is free of it on the group, in ``unit``."""
    most_on_one_node: float
    unit: str
    nodes_with_room: int = 0
    """Nodes where it leaves room for at least one pod."""
    unknown_index_nodes: int = 0
    """Nodes whose in-use GPUs include some of unknown index (GPU limits only)."""

    @property
    def words(self) -> str:
        """The resource as a person names it: ``CPU``, ``mig-1g.10gb MIG slices``, ``GPUs per node``."""
        if self.kind == Kind.MIG:
            return f"{self.resource.rsplit('/', 1)[-1]} MIG slices"
        return self.kind


def limits(ps: PodSet, states: Sequence[NodeState]) -> list[Limit]:
    """One :class:`Limit` per resource the pods ask for: GPUs, MIG slices, CPU, memory, pod slots."""
    req = ps.request
    need = ps.needed
    out: list[Limit] = []
    if req.gpus:
        out.append(_gpu_limit(ps, states))
    for name, amount in sorted(req.extended.items()):
        if amount > 0:
            free = [max(0, s.ext.get(name, 0)) for s in states]
            out.append(_counted(Kind.MIG, name, free, amount, need, "MIG slices"))
    if req.cpu_milli:
        cpu = _counted(Kind.CPU, "cpu", [max(0, s.cpu) for s in states], req.cpu_milli, need, "cores")
        out.append(_scaled(cpu, 1000))
    if req.memory_mib:
        free = [max(0, s.mem) for s in states]
        out.append(_counted(Kind.MEMORY, "memory", free, req.memory_mib, need, "MiB"))
    out.append(_counted(Kind.PODS, "pods", [max(0, s.pods) for s in states], 1, need, "pods"))
    return out


def binding(found: Sequence[Limit], needed: int) -> Limit | None:
    """The resource with room for the fewest pods, if it has room for fewer than ``needed``."""
    short = [limit for limit in found if limit.pods < needed]
    return min(short, key=lambda limit: limit.pods) if short else None


def _counted(kind: str, resource: str, free: list[int], per_pod: int, need: int, unit: str) -> Limit:
    room = [min(need, f // per_pod) for f in free]
    return Limit(
        kind=kind,
        resource=resource,
        pods=min(need, sum(room)),
        needed=float(need * per_pod),
        available=float(sum(free)),
        most_on_one_node=float(max(free, default=0)),
        unit=unit,
        nodes_with_room=sum(1 for r in room if r > 0),
    )


def _scaled(limit: Limit, divisor: int) -> Limit:
    """The same limit in a larger unit (millicores as cores)."""
    return Limit(
        kind=limit.kind,
        resource=limit.resource,
        pods=limit.pods,
        needed=limit.needed / divisor,
        available=limit.available / divisor,
        most_on_one_node=limit.most_on_one_node / divisor,
        unit=limit.unit,
        nodes_with_room=limit.nodes_with_room,
    )


def _gpu_limit(ps: PodSet, states: Sequence[NodeState]) -> Limit:
    req = ps.request
    need = ps.needed
    if req.is_share:
        room = [min(need, gpu_room(s, req)) for s in states]
        free = [max(0, s.free_gpu_milli) / FULL_GPU_MILLI for s in states]
        return Limit(
            Kind.SHARES,
            GPU_RESOURCE,
            min(need, sum(room)),
            round(need * req.gpu_equivalent, 3),
            round(sum(free), 3),
            max(free, default=0.0),
            "GPUs",
            sum(1 for r in room if r > 0),
            sum(1 for s in states if not s.indices_known),
        )
    whole = [s.whole_free for s in states]
    room = [min(need, w // req.gpus) for w in whole]
    kind = Kind.GPUS if sum(whole) < need * req.gpus else Kind.GPUS_PER_NODE
    if ps.nvlink_required and req.gpus > 1 and sum(room) >= need:
        room = [min(need, gpu_room(s, req, nvlink_required=True)) for s in states]
        kind = Kind.NVLINK
    return Limit(
        kind,
        GPU_RESOURCE,
        min(need, sum(room)),
        float(need * req.gpus),
        float(sum(whole)),
        float(max(whole, default=0)),
        "GPUs",
        sum(1 for r in room if r > 0),
        sum(1 for s in states if not s.indices_known),
    )
