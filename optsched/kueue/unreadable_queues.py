"""Workloads whose LocalQueue or ClusterQueue could not be read wait until it can.

The snapshot builder leaves an unreadable queue object out with a warning.
Planning the workloads of a ClusterQueue whose quota is unknown would admit
them without any quota at all, so they are held instead, with a reason that
names the object and what is wrong with it; the rest of the queue is planned.
"""

from __future__ import annotations

from optsched.kueue.admissibility import hold_where
from optsched.model.reasons import Reason, ReasonCode
from optsched.model.snapshot import LeftOut, Snapshot, Workload


def _unreadable(snapshot: Snapshot, kind: str) -> dict[tuple[str, str], LeftOut]:
    return {(item.namespace, item.name): item for item in snapshot.left_out if item.kind == kind}


def _reason(kind: str, key: str, item: LeftOut) -> Reason:
    return Reason(
        code=ReasonCode.QUEUE_UNREADABLE,
        message=f"{kind} {key} could not be read, so its state and quota are unknown: {item.message}",
        scope=f"{kind} {key}",
    )


def _blocking(
    workload: Workload,
    snapshot: Snapshot,
    local_queues: dict[tuple[str, str], LeftOut],
    cluster_queues: dict[tuple[str, str], LeftOut],
) -> Reason | None:
    local = local_queues.get((workload.namespace, workload.queue_name))
    if local is not None:
        return _reason("LocalQueue", f"{workload.namespace}/{workload.queue_name}", local)
    names = {
        lq.cluster_queue
        for lq in snapshot.local_queues
        if (lq.namespace, lq.name)
        == (
            workload.namespace,
            workload.queue_name,
        )
    }
    if workload.reservation is not None:
        names.add(workload.reservation.cluster_queue)
    for name in sorted(names):
        if ("", name) in cluster_queues:
            return _reason("ClusterQueue", name, cluster_queues[("", name)])
    return None


def hold_unreadable_queues(snapshot: Snapshot) -> Snapshot:
    """``snapshot`` with the pending Workloads of unreadable queues moved to ``held``."""
    local_queues = _unreadable(snapshot, "LocalQueue")
    cluster_queues = _unreadable(snapshot, "ClusterQueue")
    if not local_queues and not cluster_queues:
        return snapshot
    return hold_where(snapshot, lambda workload: _blocking(workload, snapshot, local_queues, cluster_queues))
