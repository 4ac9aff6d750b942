"""Kueue ClusterQueue quota as a running ledger, for greedy admission and deferral reasons.

A workload that does not yet hold a quota reservation may be admitted only if
its ClusterQueue can still take it: nominal quota minus usage, plus borrowing
from the cohort within the queue's ``borrowingLimit``. The cohort rule used
here is "total borrowing never exceeds the unused lendable quota of the
cohort": for every member, borrowing = max(0, usage - nominal) and unused
lendable = max(0, min(lendingLimit or nominal, nominal - usage)); the cohort's
slack is the sum of the latter minus the sum of the former. Admissions may not
push the slack below zero (or below where the snapshot already had it, if the
cluster was over-committed before). Resources a ClusterQueue does not cover
for the chosen flavor are not limited.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from optsched.model.names import GPU_CORES_RESOURCE, GPU_MEM_PERCENT_RESOURCE, GPU_MEM_RESOURCE, GPU_RESOURCE
from optsched.model.snapshot import ClusterQueue, PodRequest, ResourceQuota, Snapshot

UNLIMITED = 1 << 62


def pod_quota_amounts(req: PodRequest) -> dict[str, int]:
    """What one pod counts against ClusterQueue quota, per Kueue resource name (solver units).

    Kueue counts what the containers request, as written: ``nvidia.com/gpu: 2``
    with ``nvidia.com/gpumem: 4000`` is 2 GPUs and 4000 gpumem, though HAMi
    gives each of the two devices 4000 MiB. A request built without a pod spec
    counts as one container asking for its per-device figures.
    """
    out = {"cpu": req.cpu_milli, "memory": req.memory_mib, "pods": 1, **req.listed}
    if req.gpus:
        out[GPU_RESOURCE] = req.gpus
        if not req.listed and req.is_share:
            if req.gpu_mem_mib:
                out[GPU_MEM_RESOURCE] = req.gpu_mem_mib
            if req.gpu_mem_percent:
                out[GPU_MEM_PERCENT_RESOURCE] = req.gpu_mem_percent
            out[GPU_CORES_RESOURCE] = req.gpu_milli // 10
    for name, amount in req.extended.items():
        out[name] = out.get(name, 0) + amount
    return out


def scaled(amounts: Mapping[str, int], pods: int) -> dict[str, int]:
    return {name: amount * pods for name, amount in amounts.items()}


def quota_of(cq: ClusterQueue, flavor: str, resource: str) -> ResourceQuota | None:
    """The quota of ``resource`` in ``flavor``, or None where the queue does not limit it."""
    for flavor_quota in cq.flavors_for(resource):
        if flavor_quota.name == flavor:
            return flavor_quota.resource(resource)
    return None


@dataclass(frozen=True)
class Shortfall:
    """Why a request does not fit a ClusterQueue's quota, for a deferral reason."""

    cluster_queue: str
    flavor: str
    resource: str
    needed: int
    left: int
    nominal: int
    borrowing_limit: int | None
    cohort: str | None

    def describe(self) -> str:
        what = _RESOURCE_WORDS.get(self.resource, self.resource)
        if self.cohort is None:
            borrowing = ", no cohort to borrow from"
        elif self.borrowing_limit is None:
            borrowing = f", cohort {self.cohort}, no borrowing limit"
        else:
            borrowing = f", cohort {self.cohort}, borrowing limit {self.borrowing_limit}"
        return (
            f"ClusterQueue {self.cluster_queue} {what} quota (flavor {self.flavor}): needs "
            f"{_fmt(self.resource, self.needed)}, {_fmt(self.resource, max(0, self.left))} left "
            f"(nominal {_fmt(self.resource, self.nominal)}{borrowing})"
        )


_RESOURCE_WORDS = {GPU_RESOURCE: "GPU", "cpu": "CPU", "memory": "memory", "pods": "pod"}


def _fmt(resource: str, amount: int) -> str:
    if resource == "cpu":
        return f"{amount / 1000:g} cores"
    if resource in ("memory", GPU_MEM_RESOURCE):
        return f"{amount} MiB"
    return str(amount)


@dataclass
class QuotaLedger:
    """Usage per (ClusterQueue, flavor, resource), updated as a policy admits workloads."""

    queues: dict[str, ClusterQueue]
    used: dict[tuple[str, str, str], int] = field(default_factory=dict)
    floor: dict[str, int] = field(default_factory=dict)
    """Per cohort, flavor and resource: the lowest slack admissions may leave (0, or less if the
    snapshot was already over-committed)."""

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot) -> QuotaLedger:
        ledger = cls({cq.name: cq for cq in snapshot.cluster_queues})
        for cq in snapshot.cluster_queues:
            for flavor, resources in cq.usage.items():
                for resource, amount in resources.items():
                    ledger.used[(cq.name, flavor, resource)] = amount
        for cq in snapshot.cluster_queues:
            if cq.cohort is None:
                continue
            for group in cq.resource_groups:
                for flavor_quota in group.flavors:
                    for quota in flavor_quota.resources:
                        key = _cohort_key(cq.cohort, flavor_quota.name, quota.name)
                        if key not in ledger.floor:
                            slack = ledger.cohort_slack(cq.cohort, flavor_quota.name, quota.name)
                            ledger.floor[key] = min(0, slack)
        return ledger

    def copy(self) -> QuotaLedger:
        return QuotaLedger(self.queues, dict(self.used), self.floor)

    def members(self, cohort: str) -> list[ClusterQueue]:
        return [cq for cq in self.queues.values() if cq.cohort == cohort]

    def cohort_slack(self, cohort: str, flavor: str, resource: str, *, skip: str = "") -> int:
        """Unused lendable quota minus borrowing over the cohort's members (except ``skip``)."""
        slack = 0
        for member in self.members(cohort):
            if member.name == skip:
                continue
            quota = quota_of(member, flavor, resource)
            if quota is None:
                continue
            used = self.used.get((member.name, flavor, resource), 0)
            lendable = quota.lending_limit if quota.lending_limit is not None else quota.nominal
            slack += max(0, min(lendable, quota.nominal - used)) - max(0, used - quota.nominal)
        return slack

    def available(self, cq_name: str, flavor: str, resource: str) -> int:
        """How much more of ``resource`` the queue may take in ``flavor`` (UNLIMITED if not limited)."""
        cq = self.queues.get(cq_name)
        if cq is None:
            return UNLIMITED
        quota = quota_of(cq, flavor, resource)
        if quota is None:
            return UNLIMITED
        used = self.used.get((cq_name, flavor, resource), 0)
        if cq.cohort is None:
            return max(0, quota.nominal - used)
        borrow_cap = (
            UNLIMITED if quota.borrowing_limit is None else quota.nominal + quota.borrowing_limit - used
        )
        # The queue's own slack is L - max(0, u - (N - L)); the cohort's must stay >= floor.
        lendable = quota.lending_limit if quota.lending_limit is not None else quota.nominal
        floor = self.floor.get(_cohort_key(cq.cohort, flavor, resource), 0)
        need_own = floor - self.cohort_slack(cq.cohort, flavor, resource, skip=cq_name)
        slack_cap = 0 if need_own > lendable else quota.nominal - need_own - used
        return max(0, min(borrow_cap, slack_cap))

    def shortfall(self, cq_name: str, flavor: str, amounts: Mapping[str, int]) -> Shortfall | None:
        """The first resource ``amounts`` does not fit, or None when it fits."""
        cq = self.queues.get(cq_name)
        if cq is None:
            return None
        for resource, amount in sorted(amounts.items(), key=lambda kv: (kv[0] != GPU_RESOURCE, kv[0])):
            if amount <= 0:
                continue
            left = self.available(cq_name, flavor, resource)
            if amount > left:
                quota = quota_of(cq, flavor, resource)
                assert quota is not None
                return Shortfall(
                    cq_name, flavor, resource, amount, left, quota.nominal, quota.borrowing_limit, cq.cohort
                )
        return None

    def max_pods(self, cq_name: str, flavor: str, per_pod: Mapping[str, int]) -> int:
        """How many pods of one shape the queue can still take in ``flavor``."""
        best = UNLIMITED
        for resource, amount in per_pod.items():
            if amount > 0:
                best = min(best, self.available(cq_name, flavor, resource) // amount)
        return best

    def charge(self, cq_name: str, flavor: str, amounts: Mapping[str, int]) -> None:
        for resource, amount in amounts.items():
            key = (cq_name, flavor, resource)
            self.used[key] = self.used.get(key, 0) + amount

    def charge_all(self, charges: Iterable[tuple[str, str, Mapping[str, int]]]) -> None:
        for cq_name, flavor, amounts in charges:
            self.charge(cq_name, flavor, amounts)


def _cohort_key(cohort: str, flavor: str, resource: str) -> str:
    return f"{cohort}\x00{flavor}\x00{resource}"
