"""The MIG part of a plan: the layout changes as values, and which admissions wait for them.

A placement names the new layout of every GPU it changes
(:attr:`Placement.mig_layouts`); the plan says it as ``migChanges`` (what
each GPU has now and what it gets) and books the instances a change adds or
removes before the pods, so summaries and reasons see the new capacity. An
admitted workload whose MIG pods need instances that do not exist yet waits
for the layout: its pods start once the node advertises them. Instances that
exist go to the workloads first in the queue, so the rest of the admission
proceeds at once.
"""

from __future__ import annotations

from collections import Counter

from optsched.capacity.state import ClusterState
from optsched.mig.layout import resource_name
from optsched.model.mig import MigChange, MigGpu, slots
from optsched.model.names import MIG_PREFIX
from optsched.model.placement import Placement
from optsched.model.snapshot import Snapshot, Workload


def _gpu(snapshot: Snapshot, node: str, index: int) -> MigGpu | None:
    found = snapshot.node(node)
    return next((g for g in found.mig_gpus if g.index == index), None) if found is not None else None


def mig_changes(snapshot: Snapshot, placement: Placement) -> list[MigChange]:
    """One change per GPU the placement re-lays out, by node and GPU index."""
    out = []
    for (node, index), layout in sorted(placement.mig_layouts.items()):
        gpu = _gpu(snapshot, node, index)
        before = gpu.layout if gpu is not None else ()
        uuid = gpu.uuid if gpu is not None else ""
        out.append(MigChange(node=node, gpu=index, uuid=uuid, from_=slots(before), to=slots(layout)))
    return out


def layout_deltas(snapshot: Snapshot, placement: Placement) -> dict[str, Counter[str]]:
    """Node -> MIG resource -> instances the changes add (negative: remove)."""
    out: dict[str, Counter[str]] = {}
    for (node, index), layout in placement.mig_layouts.items():
        gpu = _gpu(snapshot, node, index)
        delta = out.setdefault(node, Counter())
        delta.update(resource_name(p) for p, _ in layout)
        delta.subtract(resource_name(p) for p, _ in (gpu.layout if gpu is not None else ()))
    return out


def apply_layouts(snapshot: Snapshot, placement: Placement, state: ClusterState) -> None:
    """Count the changed layouts' instances in ``state`` (before the pods are booked on it)."""
    for node, delta in layout_deltas(snapshot, placement).items():
        found = state.by_name.get(node)
        if found is None:
            continue
        for name, amount in delta.items():
            found.ext[name] = found.ext.get(name, 0) + amount


def waiting_for_layouts(
    snapshot: Snapshot, placement: Placement, before: ClusterState
) -> dict[str, list[str]]:
    """Workload key -> nodes whose new instances its pods need (the others use instances that exist).

    The instances free now on each node go to admitted workloads in queue
    order; a workload whose MIG pods there need more than remain waits for
    that node's changes. A profile of which a change on the node destroys a
    free instance is not handed out at all until the change is made: NVIDIA's
    device plugin picks any free instance of the resource, and a pod on an
    instance the change removes would stall the change.
    """
    if not placement.mig_layouts:
        return {}
    changed = {node for node, _ in placement.mig_layouts}
    free = {node: Counter(before.by_name[node].ext) for node in changed if node in before.by_name}
    for (node, index), layout in placement.mig_layouts.items():
        gpu = _gpu(snapshot, node, index)
        if gpu is None or node not in free:
            continue
        for instance in gpu.instances:
            if not instance.in_use and (instance.profile, instance.start) not in layout:
                # The device plugin could hand out an instance the change destroys: none is offered.
                free[node][resource_name(instance.profile)] = -(1 << 30)
    out: dict[str, list[str]] = {}
    ordered: list[Workload] = sorted(snapshot.workloads, key=lambda w: w.queue_key)
    for workload in ordered:
        assignment = placement.admitted.get(workload.key)
        if assignment is None:
            continue
        needs: dict[str, Counter[str]] = {}
        for ps in workload.pod_sets:
            mig = {k: v for k, v in ps.request.extended.items() if k.startswith(MIG_PREFIX) and v > 0}
            for pod in assignment.pods.get(ps.name, []):
                if mig and pod.node in free:
                    needs.setdefault(pod.node, Counter()).update(mig)
        for node, need in sorted(needs.items()):
            if all(free[node][k] >= v for k, v in need.items()):
                free[node].subtract(need)
            else:
                out.setdefault(workload.key, []).append(node)
    return out
