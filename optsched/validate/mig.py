"""MIG layout changes, checked independently of the code that chose them.

A plan may give a MIG-enabled GPU a new layout. Each change is re-read against
the snapshot: the GPU exists and is MIG-enabled, nothing else is changing it
(no hold), ``from`` is what the GPU has now, ``to`` is a layout the profile
table allows on that model, and every instance a running pod holds stays at
its start. Workloads that wait for a layout must name nodes the plan changes.
What a change adds to or takes from a node's ``nvidia.com/mig-<profile>``
allocatable (:func:`layout_deltas`) is what the capacity check in
:mod:`~optsched.validate.devices` counts against the pods placed there; pods
that take slices only a change creates must belong to a workload that says it
waits for that change.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from optsched.mig.layout import MigSlot, layout_problems
from optsched.mig.profiles import MigModel, models
from optsched.model.mig import MigChange, MigGpu, MigSlotView
from optsched.model.names import MIG_PREFIX
from optsched.model.plan import Plan
from optsched.model.snapshot import Snapshot

LayoutDeltas = dict[str, dict[str, int]]
"""Node -> ``nvidia.com/mig-<profile>`` -> instances the plan's changes add (negative: remove)."""


def layout_text(slots: Sequence[MigSlotView] | Sequence[tuple[str, int]]) -> str:
    """``[3g.40gb@4, 1g.10gb@0]`` for messages: each instance as ``profile@start``, in start order."""
    pairs = [(s.profile, s.start) if isinstance(s, MigSlotView) else s for s in slots]
    shown = ", ".join(f"{p}@{s}" for p, s in sorted(pairs, key=lambda x: (x[1], x[0])))
    return f"[{shown}]"


def _pairs(slots: Sequence[MigSlotView]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((s.profile, s.start) for s in slots))


def _model(name: str) -> MigModel | None:
    return next((m for m in models() if m.name == name), None)


def check_mig_changes(snapshot: Snapshot, plan: Plan) -> list[str]:
    """Every way the plan's MIG layout changes, and the workloads waiting on them, break the rules."""
    nodes = {n.name: n for n in snapshot.nodes}
    violations: list[str] = []
    seen: set[tuple[str, int]] = set()
    for change in plan.mig_changes:
        where = f"MIG change on node {change.node} GPU {change.gpu}"
        key = (change.node, change.gpu)
        if key in seen:
            violations.append(f"{where}: the plan changes this GPU more than once")
            continue
        seen.add(key)
        node = nodes.get(change.node)
        if node is None:
            violations.append(f"{where}: no such node")
            continue
        gpu = node.mig_gpu(change.gpu)
        if gpu is None:
            enabled = ", ".join(str(g.index) for g in node.mig_gpus) or "none"
            violations.append(f"{where}: not a MIG-enabled GPU of the node (MIG-enabled GPUs: {enabled})")
            continue
        violations += _check_change(where, gpu, change)
    violations += _check_waiting(plan, {c.node for c in plan.mig_changes})
    violations += _check_unmarked(snapshot, plan)
    return violations


def _check_change(where: str, gpu: MigGpu, change: MigChange) -> list[str]:
    violations = []
    if gpu.hold:
        violations.append(f"{where}: its layout may not change now: {gpu.hold}")
    if change.uuid != gpu.uuid:
        violations.append(
            f"{where}: plan names GPU UUID {change.uuid!r}, the node's GPU {gpu.index} is {gpu.uuid!r}"
        )
    if _pairs(change.from_) != gpu.layout:
        violations.append(
            f"{where}: 'from' is {layout_text(change.from_)}, but the GPU has {layout_text(gpu.layout)}"
        )
    if _pairs(change.to) == _pairs(change.from_):
        violations.append(f"{where}: 'to' equals 'from' {layout_text(change.to)}: nothing changes")
    target = set(_pairs(change.to))
    for instance in gpu.in_use:
        if (instance.profile, instance.start) not in target:
            violations.append(
                f"{where}: destroys or moves {instance.profile}@{instance.start}, which a running pod holds "
                f"(to: {layout_text(change.to)})"
            )
    model = _model(gpu.model)
    if model is None:
        known = ", ".join(m.name for m in models())
        violations.append(f"{where}: GPU model {gpu.model!r} is not in the MIG profile table ({known})")
        return violations
    slots = [MigSlot(s.profile, s.start) for s in change.to]
    violations += [
        f"{where}: 'to' is not a legal {model.name} layout: {p}" for p in layout_problems(model, slots)
    ]
    return violations


def _check_waiting(plan: Plan, changed: set[str]) -> list[str]:
    violations = []
    for decision in plan.workloads:
        placed = {pod.node for ps in decision.pod_sets for pod in ps.pods}
        for name in decision.waits_for_layout:
            where = f"workload {decision.name}: waits for a MIG layout on node {name}"
            if name not in changed:
                violations.append(f"{where}, but the plan changes no layout there")
            if name not in placed:
                violations.append(f"{where}, but none of its pods is placed there")
    return violations


def _check_unmarked(snapshot: Snapshot, plan: Plan) -> list[str]:
    """Slices only a change creates are taken by some workload that says it waits for that change.

    Where the plan's pods take more of a profile on a node than is free there
    now, and the node's changes add instances of it, the pods cannot all start
    before the new layout exists: at least one of the workloads taking the
    profile there must list the node in ``waits_for_layout``.
    """
    taken, takers = _mig_taken(snapshot, plan)
    waits = {(d.name, n) for d in plan.admitted for n in d.waits_for_layout}
    deltas = layout_deltas(snapshot, plan)
    nodes = {n.name: n for n in snapshot.nodes}
    violations = []
    for (node, resource), amount in sorted(taken.items()):
        if node not in nodes or deltas.get(node, {}).get(resource, 0) <= 0:
            continue
        free = nodes[node].extended.get(resource, 0) - snapshot.usage_of(node).extended.get(resource, 0)
        names = sorted(takers[(node, resource)])
        if amount > max(0, free) and not any((name, node) in waits for name in names):
            violations.append(
                f"node {node}: the plan's pods take {amount} {resource} ({', '.join(names)}), "
                f"{max(0, free)} free now, but none of these workloads waits for the node's MIG layout change"
            )
    return violations


def _mig_taken(
    snapshot: Snapshot, plan: Plan
) -> tuple[Counter[tuple[str, str]], dict[tuple[str, str], set[str]]]:
    """Per (node, MIG resource): what the admitted pods take, and which workloads take it."""
    pending = {w.key: w for w in snapshot.workloads}
    taken: Counter[tuple[str, str]] = Counter()
    takers: dict[tuple[str, str], set[str]] = {}
    for decision in plan.admitted:
        workload = pending.get(decision.name)
        if workload is None:
            continue
        requests = {ps.name: ps.request for ps in workload.pod_sets}
        for placement in decision.pod_sets:
            request = requests.get(placement.name)
            mig = (
                {r: a for r, a in request.extended.items() if r.startswith(MIG_PREFIX) and a > 0}
                if request
                else {}
            )
            for pod in placement.pods:
                for resource, amount in mig.items():
                    taken[(pod.node, resource)] += amount
                    takers.setdefault((pod.node, resource), set()).add(decision.name)
    return taken, takers


def layout_deltas(snapshot: Snapshot, plan: Plan) -> LayoutDeltas:
    """Per node of the snapshot, how each MIG resource's allocatable moves once the changes apply.

    Only the first change of a GPU counts (a repeated one is a violation of its own).
    """
    nodes = {n.name for n in snapshot.nodes}
    deltas: LayoutDeltas = {}
    seen: set[tuple[str, int]] = set()
    for change in plan.mig_changes:
        if change.node not in nodes or (change.node, change.gpu) in seen:
            continue
        seen.add((change.node, change.gpu))
        node = deltas.setdefault(change.node, {})
        for resource, delta in change.resource_delta.items():
            node[resource] = node.get(resource, 0) + delta
    return {n: {r: d for r, d in sorted(res.items()) if d} for n, res in deltas.items()}
