"""The quota reason: which ClusterQueue, flavor and resource is short, by how much, and who used it."""

from __future__ import annotations

from optsched.kueue.quota import Shortfall, pod_quota_amounts, quota_of, scaled
from optsched.model.names import GPU_MEM_RESOURCE, GPU_RESOURCE
from optsched.model.reasons import Reason, ReasonCode
from optsched.model.snapshot import Snapshot, Workload
from optsched.planning.reasons.context import PlanContext
from optsched.planning.reasons.shared import PerPodSet, names


def quota_reason(
    snapshot: Snapshot, workload: Workload, per_pod_set: PerPodSet, context: PlanContext
) -> Reason | None:
    """The first flavor's quota shortfall, if no usable flavor has room for the whole workload."""
    if workload.reservation is not None:
        return None
    cq = snapshot.cluster_queue_of(workload)
    if cq is None:
        return None
    before = context.quota_before(snapshot)
    ledger = context.ledger_after or before
    first: Reason | None = None
    for flavor_name in _usable_flavors(per_pod_set):
        amounts = _amounts_on(flavor_name, per_pod_set)
        short = ledger.shortfall(cq.name, flavor_name, amounts)
        if short is None:
            return None
        if first is None:
            users: list[Workload] = []
            if context.ledger_after is not None and before.shortfall(cq.name, flavor_name, amounts) is None:
                users = _quota_users(snapshot, cq.name, flavor_name, short.resource, context)
            first = _reason(short, users)
    return first


def _usable_flavors(per_pod_set: PerPodSet) -> list[str]:
    options: list[str] = []
    for _, cands in per_pod_set:
        for cand in cands:
            if cand.flavor is not None and cand.nodes and cand.flavor.name not in options:
                options.append(cand.flavor.name)
    return options


def _amounts_on(flavor_name: str, per_pod_set: PerPodSet) -> dict[str, int]:
    """What the workload charges: every PodSet on this flavor where it may use it."""
    amounts: dict[str, int] = {}
    for ps, cands in per_pod_set:
        usable = [c.flavor.name for c in cands if c.flavor is not None and c.nodes]
        if flavor_name not in usable:
            continue
        for resource, amount in scaled(pod_quota_amounts(ps.request), ps.needed).items():
            amounts[resource] = amounts.get(resource, 0) + amount
    return amounts


def _reason(short: Shortfall, users: list[Workload]) -> Reason:
    message = short.describe()
    if users:
        message += f"; used by work admitted in this plan ({names(users)})"
    unit, scale = _UNITS.get(short.resource, (short.resource, 1.0))
    return Reason(
        code=ReasonCode.QUOTA_EXHAUSTED,
        message=message,
        needed=short.needed / scale,
        available=max(0, short.left) / scale,
        unit=unit,
        scope=f"ClusterQueue {short.cluster_queue}",
        cluster_queue=short.cluster_queue,
        flavor=short.flavor,
        resource=short.resource,
        cohort=short.cohort,
        nominal=short.nominal / scale,
        borrowing_limit=None if short.borrowing_limit is None else short.borrowing_limit / scale,
        workloads=tuple(w.key for w in users),
    )


_UNITS = {
    GPU_RESOURCE: ("GPUs", 1.0),
    "cpu": ("cores", 1000.0),
    "memory": ("MiB", 1.0),
    GPU_MEM_RESOURCE: ("MiB", 1.0),
}
"""Kueue resource -> the unit a person reads and the divisor from the ledger's units."""


def _quota_users(
    snapshot: Snapshot, cq_name: str, flavor: str, resource: str, context: PlanContext
) -> list[Workload]:
    """Admitted workloads without a reservation whose quota use left this queue short.

    Those of the same ClusterQueue, and those of cohort members that borrow after
    the plan, or of any member if this queue could have borrowed their quota.
    """

    def find() -> list[Workload]:
        mine = snapshot.cluster_queue(cq_name)
        if mine is None:
            return []
        own = quota_of(mine, flavor, resource)
        can_borrow = own is not None and (own.borrowing_limit is None or own.borrowing_limit > 0)
        ledger = context.ledger_after
        out = []
        for w, _ in context.admitted:
            theirs = snapshot.cluster_queue_of(w)
            if w.reservation is not None or theirs is None:
                continue
            if flavor not in context.admitted_flavors.get(w.key, frozenset({flavor})):
                continue
            if theirs.name != mine.name:
                if mine.cohort is None or theirs.cohort != mine.cohort:
                    continue
                quota = quota_of(theirs, flavor, resource)
                used = ledger.used.get((theirs.name, flavor, resource), 0) if ledger is not None else 0
                if not can_borrow and (quota is None or used <= quota.nominal):
                    continue
            out.append(w)
        return out

    context.memo.keep(context.admitted)
    return context.memo.remember(("quota-users", id(context.admitted), cq_name, flavor, resource), find)
