"""Drift on a device-plugin node: the GPUs predicted for a pod that has not started are held by another.

When NVIDIA's device plugin picked other GPUs than the plan predicted (a pod
placed around optsched, a pod that got its devices out of order), the node
agent's read-back shows it, and the plan of every pod still to come on that
node rests on a wrong free set. Most of the time only the indices differ and
the count still fits; the device plugin hands those pods other free GPUs and
the drift is only reported. It matters where the plan promised a pod one
NVLink island: its planned GPUs held by another pod, the plugin can only give
it GPUs elsewhere, possibly across islands. Such a workload is planned again,
but only while none of its pods is bound (a running job is never killed for a
wrong prediction).
"""

from __future__ import annotations

from optsched.controller.actions import Facts
from optsched.controller.views import WorkloadView, pods_of
from optsched.model.placement import Enforcement
from optsched.model.snapshot import Node


def _in_one_island(node: Node, gpus: tuple[int, ...]) -> bool:
    return any(set(gpus) <= set(island) for island in node.nvlink_islands)


def taken_island_promise(view: WorkloadView, facts: Facts) -> str | None:
    """Why the workload must be planned again (predicted island GPUs held by another pod), or None."""
    record = view.record
    if record is None:
        return None
    pods = pods_of(view, facts.pods)
    if any(p.node is not None and p.live for p in pods):
        return None
    own = [(p.namespace, p.name) for p in pods]
    for pod_set, slots in sorted(record.pod_sets.items()):
        for slot in slots:
            if slot.enforcement != Enforcement.PREDICTED or not slot.gpus or len(slot.gpus) < 2:
                continue
            node = facts.nodes.get(slot.node)
            if node is None or not _in_one_island(node, slot.gpus):
                continue
            taken = facts.read_back.holding(slot.node, slot.gpus, besides=own)
            if taken:
                holders = ", ".join(
                    f"{ns}/{name} holds GPU {','.join(map(str, sorted(gpus)))}"
                    for (ns, name), gpus in sorted(taken.items())
                )
                return (
                    f"optsched: NVIDIA's device plugin on {slot.node} handed out other GPUs than predicted "
                    f"({holders}), so {pod_set}[{slot.index}] can no longer get its NVLink island "
                    f"{','.join(map(str, slot.gpus))}; re-planning"
                )
    return None
