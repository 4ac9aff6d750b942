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
    return found.mig_gpu(index) if found is not None else None


def mig_changes(snapshot: Snapshot, placement: Placement) -> list[MigChange]:
    """One change per GPU the placement re-lays out, by node and GPU index."""
    out = []
    for (node, index), layout in sorted(placement.mig_layouts.items()):
        gpu = _gpu(snapshot, node, index)
        before = gpu.layout if gpu is not None else ()
        uuid = gpu.uuid if gpu is not None else ""
        out.append(MigChange(node=node, gpu=index, uuid=uuid, from_=slots(before), to=slots(layout)))
    return out


def apply_layouts(changes: list[MigChange], state: ClusterState) -> None:
    """Count the changed layouts' instances in ``state`` (before the pods are booked on it)."""
    for change in changes:
        found = state.by_name.get(change.node)
        if found is None:
            continue
        for name, amount in change.resource_delta.items():
            found.ext[name] = found.ext.get(name, 0) + amount


def waiting_for_layouts(
    snapshot: Snapshot, placement: Placement, changes: list[MigChange], before: ClusterState
) -> dict[str, list[str]]:
    """Workload key -> nodes whose new instances its pods need (the others use instances that exist).

    The instances free now on each node go to admitted workloads in queue
    order; a workload whose MIG pods there need more than remain waits for
    that node's changes. A profile of which a change on the node destroys a
    free instance is not handed out at all until the change is made: NVIDIA's
    device plugin picks any free instance of the resource, and a pod on an
    instance the change removes would stall the change.
    """
    if not changes:
        return {}
    free = {c.node: Counter(before.by_name[c.node].ext) for c in changes if c.node in before.by_name}
    for change in changes:
        gpu = _gpu(snapshot, change.node, change.gpu)
        if gpu is None or change.node not in free:
            continue
        in_use = {(i.profile, i.start) for i in gpu.in_use}
        for slot in change.destroyed:
            if (slot.profile, slot.start) not in in_use:
                # The device plugin could hand out an instance the change destroys: none is offered.
                free[change.node][resource_name(slot.profile)] = -(1 << 30)
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


def book_layouts(
    snapshot: Snapshot, placement: Placement, before: ClusterState, after: ClusterState
) -> tuple[list[MigChange], dict[str, list[str]]]:
    """The placement's layout changes, counted in ``after`` (before its pods are booked there), and
    the admissions that wait for them, judged on ``before``."""
    changes = mig_changes(snapshot, placement)
    apply_layouts(changes, after)
    return changes, waiting_for_layouts(snapshot, placement, changes, before)
