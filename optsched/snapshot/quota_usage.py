"""ClusterQueue usage computed from the admitted Workloads, with the ClusterQueue's status as a cross-check.

Usage is what the reservations of the quota-holding Workloads take
(:mod:`optsched.snapshot.admitted`), summed per ClusterQueue, flavor and
resource in base units and converted once, the way the status is converted
(CPU millicores and memory MiB rounded down), so equal sums compare equal.

The status (``flavorsReservation``, else ``flavorsUsage``) is Kueue's published
copy of the same figure. Where both exist and differ, a warning names the
ClusterQueue, flavor, resource and both figures, and the plan uses the
**larger**: the status lags the Workloads (an admission a moment ago is not in
it yet), and the Workloads in a dump may be only part of the cluster (one
namespace's), so each source can be short in its own way, and the larger
never promises quota that either one says is taken. A dump without a single
quota-holding Workload is planned from the status alone, without warnings (a
dump of ClusterQueues and pending Workloads is still quota-correct).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal

from optsched.model.admitted import AdmittedWorkload
from optsched.model.names import GPU_MEM_RESOURCE
from optsched.model.snapshot import ClusterQueue
from optsched.snapshot.quantity import MIB

Usage = dict[str, dict[str, int]]
"""Flavor -> resource -> amount in the solver's units (as ``ClusterQueue.usage``)."""


MAX_USAGE = 2**40
"""Usage beyond this (far more than any quota optsched reads) is counted as this: the quota is used up."""


def solver_amount(resource: str, total: Decimal) -> int:
    """A total in base units in the solver's units, rounded like the ClusterQueue status is read."""
    if not total.is_finite() or total.adjusted() > 30:
        return MAX_USAGE
    if resource == "cpu":
        amount = math.floor(total * 1000)
    elif resource == "memory":
        amount = math.floor(total / MIB)
    else:
        amount = math.ceil(total)
    return max(0, min(MAX_USAGE, amount))


def workload_usage(admitted: Sequence[AdmittedWorkload]) -> dict[str, Usage]:
    """ClusterQueue -> flavor -> resource -> what its admitted Workloads take."""
    totals: dict[tuple[str, str, str], Decimal] = {}
    for workload in admitted:
        for pod_set in workload.pod_sets:
            for resource, amount in pod_set.usage.items():
                flavor = pod_set.flavors.get(resource)
                if flavor is None:
                    continue
                key = (workload.cluster_queue, flavor, resource)
                totals[key] = totals.get(key, Decimal(0)) + amount
    out: dict[str, Usage] = {}
    for (cq, flavor, resource), total in totals.items():
        out.setdefault(cq, {}).setdefault(flavor, {})[resource] = solver_amount(resource, total)
    return out


def with_workload_usage(
    cluster_queues: Sequence[ClusterQueue], admitted: Sequence[AdmittedWorkload]
) -> tuple[list[ClusterQueue], list[str]]:
    """The ClusterQueues with usage from their Workloads (the larger where the status differs)."""
    if not admitted:
        return list(cluster_queues), []
    derived = workload_usage(admitted)
    out: list[ClusterQueue] = []
    warnings: list[str] = []
    for cq in cluster_queues:
        merged, notes = _merge(cq, derived.get(cq.name, {}))
        out.append(cq.model_copy(update={"usage": merged}))
        warnings += notes
    return out, warnings


def _merge(cq: ClusterQueue, from_workloads: Usage) -> tuple[Usage, list[str]]:
    """Per flavor and resource the larger figure; a warning per disagreement with a status that exists."""
    status = cq.usage
    merged: Usage = {}
    notes: list[str] = []
    keys = {(f, r) for f, per in status.items() for r in per} | {
        (f, r) for f, per in from_workloads.items() for r in per
    }
    for flavor, resource in sorted(keys):
        ours = from_workloads.get(flavor, {}).get(resource, 0)
        theirs = status.get(flavor, {}).get(resource, 0)
        merged.setdefault(flavor, {})[resource] = max(ours, theirs)
        if status and ours != theirs:
            notes.append(
                f"ClusterQueue {cq.name}: flavor {flavor} {resource} in use is {_fmt(resource, ours)} by "
                f"its admitted Workloads but {_fmt(resource, theirs)} by its status; planning with the "
                f"larger, {_fmt(resource, max(ours, theirs))}"
            )
    return merged, notes


def _fmt(resource: str, amount: int) -> str:
    if resource == "cpu":
        return f"{amount / 1000:g} cores"
    if resource in ("memory", GPU_MEM_RESOURCE):
        return f"{amount} MiB"
    return str(amount)
