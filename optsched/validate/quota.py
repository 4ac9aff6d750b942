"""Quota, checked independently: what the plan charges each ClusterQueue against its limits.

The rules are Kueue's, written here again on purpose (the planners' ledger is
not reused): a queue without a cohort stays within nominal quota; in a cohort
it stays within nominal plus its borrowing limit, and the cohort's members
never borrow more than the others leave unused and lendable (or, if the
snapshot was already over-committed, not more than before the plan).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from optsched.model.names import GPU_CORES_RESOURCE, GPU_MEM_PERCENT_RESOURCE, GPU_MEM_RESOURCE, GPU_RESOURCE
from optsched.model.snapshot import ClusterQueue, PodSet, ResourceQuota, Snapshot

Charges = dict[tuple[str, str, str], int]
"""(ClusterQueue, flavor, resource) -> what the plan adds there."""


def charge(charges: Charges, cq_name: str, flavor: str, ps: PodSet, pods: int) -> None:
    """Add what ``pods`` pods of ``ps`` count against quota, per Kueue resource name."""
    for resource, amount in _quota_amounts(ps, pods).items():
        key = (cq_name, flavor, resource)
        charges[key] = charges.get(key, 0) + amount


def check_quota(snapshot: Snapshot, charges: Mapping[tuple[str, str, str], int]) -> list[str]:
    """Every quota the plan's charges break, in words."""
    queues = {cq.name: cq for cq in snapshot.cluster_queues}
    violations: list[str] = []
    cohort_keys: set[tuple[str, str, str]] = set()
    for (cq_name, flavor, resource), added in sorted(charges.items()):
        cq = queues.get(cq_name)
        quota = _quota(cq, flavor, resource) if cq is not None and added > 0 else None
        if cq is None or quota is None:
            continue
        after = cq.usage.get(flavor, {}).get(resource, 0) + added
        where = f"ClusterQueue {cq_name} flavor {flavor} {resource}"
        if cq.cohort is None:
            if after > quota.nominal:
                violations.append(
                    f"{where}: plan admits {added} more, usage {after} exceeds nominal {quota.nominal} "
                    "(no cohort to borrow from)"
                )
            continue
        if quota.borrowing_limit is not None and after > quota.nominal + quota.borrowing_limit:
            violations.append(
                f"{where}: plan admits {added} more, usage {after} exceeds nominal {quota.nominal} "
                f"+ borrowing limit {quota.borrowing_limit}"
            )
        cohort_keys.add((cq.cohort, flavor, resource))
    for cohort, flavor, resource in sorted(cohort_keys):
        members = [cq for cq in queues.values() if cq.cohort == cohort]
        slack_before = _cohort_slack(members, flavor, resource, None)
        slack_after = _cohort_slack(members, flavor, resource, charges)
        if slack_after < min(0, slack_before):
            violations.append(
                f"cohort {cohort} flavor {flavor} {resource}: members borrow {-slack_after} more than "
                "the cohort's unused lendable quota after the plan"
            )
    return violations


def _cohort_slack(
    members: Iterable[ClusterQueue],
    flavor: str,
    resource: str,
    charges: Mapping[tuple[str, str, str], int] | None,
) -> int:
    """Unused lendable quota minus borrowing over the members (after ``charges`` when given)."""
    slack = 0
    for cq in members:
        quota = _quota(cq, flavor, resource)
        if quota is None:
            continue
        used = cq.usage.get(flavor, {}).get(resource, 0)
        if charges is not None:
            used += charges.get((cq.name, flavor, resource), 0)
        lendable = quota.lending_limit if quota.lending_limit is not None else quota.nominal
        slack += max(0, min(lendable, quota.nominal - used)) - max(0, used - quota.nominal)
    return slack


def offered(cq: ClusterQueue, resource: str) -> list[str]:
    """Flavors the queue offers for ``resource`` (its resource group's flavors)."""
    for group in cq.resource_groups:
        if resource in group.covered_resources:
            return [f.name for f in group.flavors]
    return []


def _quota(cq: ClusterQueue, flavor: str, resource: str) -> ResourceQuota | None:
    for group in cq.resource_groups:
        if resource not in group.covered_resources:
            continue
        for flavor_quota in group.flavors:
            if flavor_quota.name == flavor:
                return next((r for r in flavor_quota.resources if r.name == resource), None)
    return None


def _quota_amounts(ps: PodSet, pods: int) -> dict[str, int]:
    """What ``pods`` pods of ``ps`` count against quota, per Kueue resource name."""
    req = ps.request
    out = {"cpu": req.cpu_milli * pods, "memory": req.memory_mib * pods, "pods": pods}
    # As Kueue counts them: the containers' requests as written, not per device.
    listed = dict(req.listed)
    if req.gpus:
        out[GPU_RESOURCE] = req.gpus * pods
        if not listed and req.is_share:
            listed = {GPU_MEM_RESOURCE: req.gpu_mem_mib, GPU_MEM_PERCENT_RESOURCE: req.gpu_mem_percent}
            listed[GPU_CORES_RESOURCE] = req.gpu_milli // 10
    out.update({name: amount * pods for name, amount in listed.items() if amount})
    for name, amount in req.extended.items():
        out[name] = out.get(name, 0) + amount * pods
    return out
