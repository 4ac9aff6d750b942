"""The planning window: which part of the queue is planned jointly.

The joint model grows with the number of workloads times their candidate
nodes, so only the head of the queue is planned: workloads in Kueue order
(priority, then age) until their GPU demand reaches ``window_factor`` times the
free GPUs, at least ``min_window`` of them, plus every workload the greedy plan
or the previous plan admitted (so the optimizer can always reproduce them).
The greedy plan's and the previous plan's nodes are kept as candidates.
"""

from __future__ import annotations

from optsched.model.placement import Placement
from optsched.model.snapshot import FULL_GPU_MILLI
from optsched.solver.context import SolverContext


def choose_window(ctx: SolverContext, greedy: Placement) -> None:
    """The queue head whose GPU demand reaches window_factor x free GPUs, plus greedy/previous admissions."""
    snapshot = ctx.snapshot
    must = set(greedy.admitted)
    if ctx.previous is not None:
        must |= {d.name for d in ctx.previous.workloads if d.decision == "admit"}
    free = max(0.0, ctx.state.free_gpu_milli / FULL_GPU_MILLI)
    limit = ctx.settings.window_factor * free
    demand = 0.0
    for workload in sorted(snapshot.workloads, key=lambda w: w.queue_key):
        inside = demand < limit or len(ctx.window) < ctx.settings.min_window
        if inside or workload.key in must:
            ctx.window.append(workload)
            demand += workload.gpu_demand if inside else 0.0
        else:
            ctx.beyond_window.append(workload)
    index = {node.name: i for i, node in enumerate(snapshot.nodes)}
    sources: list[dict[tuple[str, str], set[str]]] = [
        {
            (key, ps): {p.node for p in pods}
            for key, a in greedy.admitted.items()
            for ps, pods in a.pods.items()
        }
    ]
    if ctx.previous is not None:
        sources.append(
            {
                (d.name, ps.name): {p.node for p in ps.pods}
                for d in ctx.previous.workloads
                if d.decision == "admit"
                for ps in d.pod_sets
            }
        )
    for source in sources:
        for key, names in source.items():
            ctx.forced.setdefault(key, set()).update(index[n] for n in names if n in index)
