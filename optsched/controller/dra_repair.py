"""DRA nodes: a planned GPU its pod's claim can no longer get, found before the pod waits Pending forever.

A pod on a DRA node is enforced by its ResourceClaim, which selects exactly
the UUIDs of its slot: kube-scheduler's allocator fails closed, so a planned
device that is gone leaves the pod Pending until someone notices. Two ways
that happens between plan and bind:

* the device is no longer published in the node's ``gpu.nvidia.com``
  ResourceSlice (NVIDIA's driver leaves unhealthy GPUs out, a GPU removed);
* another claim's allocation holds it (a pod placed around optsched).

:func:`unavailable_slot` finds the first such device of a Ready workload's
not-yet-bound slots and says why, in one line; the repair rules re-plan the
workload at once. Only slots whose pod names an optsched claim are judged
(a pod node-pinned only gets whatever devices kube-scheduler picks, so
nothing about its UUIDs is promised), and a device held by that pod's own
claim is its own. A node whose slices cannot be read, or a read with no
ResourceSlice at all (DRA not served, or not readable), judges nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from optsched.controller.views import PodView, WorkloadView, pod_set_in
from optsched.snapshot.dra import DraNode, InUse, allocated, dra_nodes, is_dra_kind, unavailable


@dataclass(frozen=True)
class DraState:
    """The DRA facts of one cluster read: the nodes' published GPUs and the devices claims hold."""

    nodes: Mapping[str, DraNode] = field(default_factory=dict)
    in_use: Mapping[str, Mapping[str, InUse]] = field(default_factory=dict)
    slices_read: bool = False
    """Some ResourceSlice was read: only then does a device missing from a slice mean it is gone."""

    @classmethod
    def of(cls, objects: Iterable[Mapping[str, Any]]) -> DraState:
        """Read from the raw objects of a cycle (unreadable slices and claims are left out here; the
        snapshot builder reports them)."""
        kinds = ("ResourceSlice", "ResourceClaim")
        kept = [dict(o) for o in objects if o.get("kind") in kinds and is_dra_kind(o)]
        nodes = dra_nodes(kept, [])
        read = any(o.get("kind") == "ResourceSlice" for o in kept)
        return cls(nodes=nodes, in_use=allocated(kept, nodes, []), slices_read=read)


def _slot_pods(view: WorkloadView, pods: Iterable[PodView]) -> dict[tuple[str, int], PodView]:
    """Live pods of the workload by the slot they were pinned to (or their completion index, gated)."""
    record = view.record
    out: dict[tuple[str, int], PodView] = {}
    if record is None:
        return out
    for pod in pods:
        pod_set = pod_set_in(pod, record)
        index = pod.slot_index if pod.slot_index is not None else pod.completion_index
        if pod.live and pod_set is not None and index is not None:
            out.setdefault((pod_set, index), pod)
    return out


def unavailable_slot(view: WorkloadView, pods: Iterable[PodView], state: DraState) -> str | None:
    """Why a not-yet-bound slot's claim cannot get its planned GPUs (naming the GPU and why), or None."""
    record = view.record
    if record is None or not state.slices_read:
        return None
    by_slot = _slot_pods(view, pods)
    for pod_set, slots in sorted(record.pod_sets.items()):
        for slot in slots:
            pod = by_slot.get((pod_set, slot.index))
            if pod is None or pod.node is not None or not pod.claim_name or not slot.gpu_uuids:
                continue
            dra = state.nodes.get(slot.node)
            if dra is not None and dra.problem:
                continue
            missing = unavailable(
                slot.gpu_uuids,
                node=slot.node,
                nodes=state.nodes,
                in_use=state.in_use,
                claim=f"{pod.namespace}/{pod.claim_name}",
            )
            if missing:
                uuid, why = sorted(missing.items())[0]
                return (
                    f"optsched: GPU {uuid} planned for {pod_set}[{slot.index}] (pod {pod.key}) "
                    f"on {slot.node}: {why}, so claim {pod.claim_name} cannot be allocated; re-planning"
                )
    return None
