"""The planning window: which part of the queue is planned jointly.

The joint model grows with the number of workloads times their candidate
nodes, so only the head of the queue is planned: workloads in Kueue order
(priority, then age) until their GPU demand reaches ``window_factor`` times the
free GPUs, at least ``min_window`` of them, plus every workload the greedy plan
or the previous plan admitted (so the optimizer can always reproduce them).
The greedy plan's and the previous plan's nodes are kept as candidates.
Workloads that no node could ever take are not planned at all.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from optsched.capacity.state import ClusterState
from optsched.model.placement import Placement
from optsched.model.plan import Plan
from optsched.model.snapshot import FULL_GPU_MILLI, Snapshot, Workload
from optsched.settings import Settings


@dataclass(frozen=True)
class Window:
    workloads: tuple[Workload, ...]
    """Workloads planned jointly, in queue order (priority desc, creation asc)."""
    beyond: tuple[Workload, ...]
    """Workloads past the window, deferred without being planned."""
    forced: Mapping[tuple[str, str], frozenset[int]]
    """(workload key, PodSet name) -> nodes that must stay candidates (greedy and previous plan)."""


def choose_window(
    snapshot: Snapshot,
    settings: Settings,
    state: ClusterState,
    greedy: Placement,
    previous: Plan | None,
    unplaceable: Collection[str] = (),
) -> Window:
    """The queue head whose GPU demand reaches window_factor x free GPUs, plus greedy/previous admissions.

    ``unplaceable`` workloads (a PodSet no node can ever take) are left out of
    both: they cost the model nothing and never push others beyond the window.
    """
    must = set(greedy.admitted)
    if previous is not None:
        must |= {d.name for d in previous.workloads if d.decision == "admit"}
    free = max(0.0, state.free_gpu_milli / FULL_GPU_MILLI)
    limit = settings.window_factor * free
    demand = 0.0
    inside_window: list[Workload] = []
    beyond: list[Workload] = []
    for workload in sorted(snapshot.workloads, key=lambda w: w.queue_key):
        if workload.key in unplaceable:
            continue
        inside = demand < limit or len(inside_window) < settings.min_window
        if inside or workload.key in must:
            inside_window.append(workload)
            demand += workload.gpu_demand if inside else 0.0
        else:
            beyond.append(workload)
    return Window(tuple(inside_window), tuple(beyond), _forced(snapshot, greedy, previous))


def _forced(
    snapshot: Snapshot, greedy: Placement, previous: Plan | None
) -> dict[tuple[str, str], frozenset[int]]:
    index = {node.name: i for i, node in enumerate(snapshot.nodes)}
    sources: list[dict[tuple[str, str], set[str]]] = [
        {
            (key, ps): {p.node for p in pods}
            for key, a in greedy.admitted.items()
            for ps, pods in a.pods.items()
        }
    ]
    if previous is not None:
        sources.append(
            {
                (d.name, ps.name): {p.node for p in ps.pods}
                for d in previous.workloads
                if d.decision == "admit"
                for ps in d.pod_sets
            }
        )
    forced: dict[tuple[str, str], set[int]] = {}
    for source in sources:
        for key, names in source.items():
            forced.setdefault(key, set()).update(index[n] for n in names if n in index)
    return {key: frozenset(nodes) for key, nodes in forced.items()}
