"""Which LocalQueues optsched decides: those whose ClusterQueue requires one of our admission checks.

Pods of pod-based integrations (plain pods, pod groups, LeaderWorkerSet,
StatefulSet) exist before Kueue admits them and carry only the
``kueue.x-k8s.io/queue-name`` label at creation; whether optsched must gate
them depends on where that queue leads. The answer is three-valued, because
a LocalQueue or ClusterQueue not seen yet must not be mistaken for one that
is not ours: the webhook gates on ``None`` (fail closed) and the controller
lifts its gate only on ``False``.

Tolerant like the rest of the Kueue readers: a field of the wrong type reads
as absent, never as an exception.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from optsched.kueue.workload_status import local_queue_index, map_or_empty, meta


def _checks_of(cluster_queue: Mapping[str, Any]) -> set[str]:
    """Every admission check a ClusterQueue requires, listed plainly or through the strategy."""
    spec = map_or_empty(cluster_queue.get("spec"))
    listed = spec.get("admissionChecks")
    names = {c for c in listed if isinstance(c, str)} if isinstance(listed, list) else set()
    strategy = map_or_empty(spec.get("admissionChecksStrategy")).get("admissionChecks")
    if isinstance(strategy, list):
        names |= {str(e["name"]) for e in strategy if isinstance(e, dict) and isinstance(e.get("name"), str)}
    return names


@dataclass(frozen=True)
class ManagedQueues:
    """LocalQueues by ``(namespace, name)``: True where optsched decides, False where it does not."""

    local_queues: Mapping[tuple[str, str], bool] = field(default_factory=dict)

    def verdict(self, namespace: str, local_queue: str) -> bool | None:
        """True: ours; False: known and not ours; None: LocalQueue or its ClusterQueue not seen."""
        return self.local_queues.get((namespace, local_queue))


def managed_local_queues(objects: Iterable[Mapping[str, Any]], check_names: Iterable[str]) -> ManagedQueues:
    """The verdict for every LocalQueue in ``objects`` whose ClusterQueue is in ``objects`` too."""
    listed = list(objects)
    ours = set(check_names)
    cluster_queues = {
        str(meta(o).get("name", "")): bool(ours & _checks_of(o))
        for o in listed
        if o.get("kind") == "ClusterQueue"
    }
    return ManagedQueues(
        {key: cluster_queues[cq] for key, cq in local_queue_index(listed).items() if cq in cluster_queues}
    )
