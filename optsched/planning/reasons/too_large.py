"""``PodTooLarge``: one pod asks for more than any node its filters allow has at all.

Such a workload can never run on this cluster, whatever finishes: it is
deferred with a permanent reason, and the rest of the queue is planned as if
it were not there. The nodes its filters allow are those its selectors,
affinity, flavor and taints accept, ready or not (a node that is down now may
come back; a node it may never use is no measure). The reason names the
resource, what one pod needs, the largest such node and what that node has.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from optsched.capacity.eligibility import Candidates, placement_verdict, size_verdict
from optsched.capacity.mig_room import mig_ceiling
from optsched.model.names import GPU_MEM_RESOURCE, GPU_RESOURCE
from optsched.model.reasons import Reason, ReasonCode
from optsched.model.snapshot import Node, PodSet, Snapshot
from optsched.planning.reasons.shortfall import memory_text, number_text


@dataclass(frozen=True)
class _Check:
    """One resource a pod asks for: how much, and what a node has of it."""

    resource: str
    """The Kubernetes resource name (``cpu``, ``nvidia.com/gpu``, ...), or ``NVLink island``."""
    need: int
    has: Callable[[Node], int]

    @property
    def unit(self) -> str:
        return _UNITS.get(self.resource, "MIG slices")

    def figure(self, value: int) -> float:
        """A value in :attr:`unit` (millicores as cores)."""
        return value / 1000 if self.resource == "cpu" else value

    def say(self, value: int) -> str:
        """A figure in words: ``16 GPUs``, ``300 CPUs``, ``2 TiB of memory``, ``8 mig-1g.10gb slices``."""
        if self.resource == "cpu":
            return f"{number_text(value / 1000)} CPUs"
        if self.resource == "memory":
            return f"{memory_text(value)} of memory"
        if self.resource == GPU_MEM_RESOURCE:
            return f"{memory_text(value)} of memory per GPU"
        if self.resource == "pods":
            return f"{value} pod slot" + ("" if value == 1 else "s")
        if self.resource == GPU_RESOURCE:
            return f"{value} GPU" + ("" if value == 1 else "s")
        if self.resource == NVLINK_ISLAND:
            return f"{value} GPUs in one NVLink island"
        return f"{value} {self.resource.rsplit('/', 1)[-1]} slices"


NVLINK_ISLAND = "NVLink island"
_UNITS = {
    "cpu": "cores",
    "memory": "MiB",
    "pods": "pods",
    GPU_RESOURCE: "GPUs",
    GPU_MEM_RESOURCE: "MiB",
    NVLINK_ISLAND: "GPUs",
}


def too_large(snapshot: Snapshot, ps: PodSet, cands: list[Candidates]) -> Reason | None:
    """The reason when every node the filters allow is too small for one pod, else None."""
    allowed = [n for n in snapshot.nodes if any(placement_verdict(n, ps, c.flavor).ok for c in cands)]
    if not allowed or any(size_verdict(n, ps).ok for n in allowed):
        return None
    over = []
    for check in _checks(ps):
        largest = max(allowed, key=check.has)
        if check.has(largest) < check.need:
            over.append((check, largest))
    if not over:
        return _no_room_at_once(ps, allowed)
    check, largest = over[0]
    have = check.has(largest)
    message = (
        f"pod set {ps.name}: a pod needs {check.say(check.need)}; the largest node its filters allow "
        f"({largest.name}) has {check.say(have)}, so it can never fit"
    )
    also = [c.resource for c, _ in over[1:]]
    if also:
        message += f" (it also asks for more {', '.join(also)} than any of them has)"
    return Reason(
        code=ReasonCode.POD_TOO_LARGE,
        message=message,
        pod_set=ps.name,
        needed=check.figure(check.need),
        available=check.figure(have),
        unit=check.unit,
        scope="node",
        resource=check.resource,
        permanent=True,
    )


def _checks(ps: PodSet) -> list[_Check]:
    """Per resource of one pod, in the order a reason names them: GPUs first, pod slots last."""
    req = ps.request
    checks: list[_Check] = []
    if req.gpus:
        checks.append(_Check(GPU_RESOURCE, req.gpus, _healthy_gpus))
        if req.gpu_mem_mib:
            # A node that does not publish its GPU memory is not measured by it.
            checks.append(
                _Check(GPU_MEM_RESOURCE, req.gpu_mem_mib, partial(_gpu_memory, unknown=req.gpu_mem_mib))
            )
        if ps.nvlink_required and req.gpus > 1:
            checks.append(_Check(NVLINK_ISLAND, req.gpus, _largest_island))
    for name, amount in sorted(req.extended.items()):
        if amount > 0:
            checks.append(_Check(name, amount, partial(_extended, name=name)))
    if req.cpu_milli:
        checks.append(_Check("cpu", req.cpu_milli, _cpu))
    if req.memory_mib:
        checks.append(_Check("memory", req.memory_mib, _memory))
    checks.append(_Check("pods", 1, _pod_slots))
    return checks


def _healthy_gpus(node: Node) -> int:
    return len(node.healthy_gpus)


def _gpu_memory(node: Node, *, unknown: int) -> int:
    return node.gpu_memory_mib or unknown


def _largest_island(node: Node) -> int:
    return node.largest_island


def _extended(node: Node, *, name: str) -> int:
    # MIG GPUs count with the instances a new layout could give them.
    return mig_ceiling(node).get(name, 0)


def _cpu(node: Node) -> int:
    return node.cpu_milli


def _memory(node: Node) -> int:
    return node.memory_mib


def _pod_slots(node: Node) -> int:
    return node.max_pods


def _no_room_at_once(ps: PodSet, allowed: list[Node]) -> Reason:
    """Every resource fits some node, but none has them all: count what each node lacks."""
    lacks: dict[str, int] = {}
    for node in allowed:
        why = size_verdict(node, ps).reason
        lacks[why] = lacks.get(why, 0) + 1
    ranked = ", ".join(
        f"{count} fail {why}" for why, count in sorted(lacks.items(), key=lambda kv: (-kv[1], kv[0]))
    )
    return Reason(
        code=ReasonCode.POD_TOO_LARGE,
        message=f"pod set {ps.name}: no node its filters allow has room for one pod at all ({ranked}), "
        "so it can never fit",
        pod_set=ps.name,
        scope="node",
        permanent=True,
        excluded=lacks,
    )
