"""Whether a waiting workload fits in the GPUs free right now: the "capacity is free" of the stuck rule.

Deliberately simple and conservative, so that "it fits" is never claimed
wrongly: only whole free GPUs count; a node counts only when it is Ready,
schedulable and has GPUs; GPUs held by live bound pods (terminating ones
too) and GPUs promised to admitted workloads whose pods have not bound yet
(the slots of their placement records) are taken; a gang must fit on one GPU
product (optsched's default, unless it allows mixing) and, with a required topology level, inside one
domain of that level.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from e2e.chaos.facts import NodeFact, Observation, WorkloadFact


@dataclass(frozen=True)
class Demand:
    """What one workload asks for: ``pods`` pods of ``gpus`` GPUs each (at least ``min_pods`` of them)."""

    pods: int
    gpus: int
    product: str | None = None
    level: str | None = None
    """A node label all pods must share (a required topology level), or None."""
    min_pods: int | None = None
    mixed: bool = False
    """The pods may run on different GPU products (``optsched.io/allow-mixed-gpu-products``)."""

    @property
    def least(self) -> int:
        return self.min_pods if self.min_pods is not None else self.pods

    @property
    def total(self) -> int:
        return self.least * self.gpus


def promised(workload: WorkloadFact, obs: Observation) -> dict[str, int]:
    """GPUs per node the record of a Ready workload still holds for pods that have not bound there."""
    if workload.record is None or workload.check_state != "Ready" or workload.finished:
        return {}
    bound: dict[str, int] = defaultdict(int)
    for pod in obs.pods:
        if pod.bound and pod.plan_id == workload.record.plan_id and pod.namespace == workload.namespace:
            bound[pod.node or ""] += 1
    out: dict[str, int] = defaultdict(int)
    slots: dict[str, list[int]] = defaultdict(list)
    for slot in workload.record.slots:
        slots[slot.node].append(len(slot.gpus) if slot.gpus is not None else 1)
    for node, sizes in slots.items():
        waiting = sorted(sizes, reverse=True)[: max(0, len(sizes) - bound[node])]
        out[node] += sum(waiting)
    return dict(out)


def free_gpus(obs: Observation) -> dict[str, int]:
    """Whole GPUs free for a new pod on each usable node."""
    free = {
        name: node.usable
        for name, node in obs.nodes.items()
        if node.ready and node.schedulable and node.capacity > 0
    }
    for pod in obs.pods:
        if pod.bound and pod.node in free:
            free[pod.node] -= pod.gpus
    for workload in obs.workloads:
        for node, gpus in promised(workload, obs).items():
            if node in free:
                free[node] -= gpus
    return {name: max(0, gpus) for name, gpus in free.items()}


def _domains(nodes: Iterable[NodeFact], demand: Demand) -> list[list[str]]:
    """Groups of nodes one gang may use: one product, and one domain of the required level."""
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    for node in nodes:
        product = node.product or ""
        if demand.product is not None and product != demand.product:
            continue
        if demand.mixed:
            product = "*"
        domain = node.labels.get(demand.level, "") if demand.level else ""
        if demand.level and not domain:
            continue
        groups[(product, domain)].append(node.name)
    return list(groups.values())


def fits(demand: Demand, nodes: Mapping[str, NodeFact], free: Mapping[str, int]) -> bool:
    """At least ``demand.least`` pods of ``demand.gpus`` GPUs fit in ``free`` inside one allowed group."""
    if demand.gpus <= 0 or demand.least <= 0:
        return False
    usable = [nodes[name] for name in free if name in nodes]
    for group in _domains(usable, demand):
        if sum(free[name] // demand.gpus for name in group) >= demand.least:
            return True
    return False
