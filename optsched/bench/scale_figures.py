"""One policy's figures on one scale instance, read from its plan, next to the bounds for its admitted set.

The plan summary already counts GPUs admitted, racks per gang and NVLink-island
hits; blocks per gang is counted here the same way (the distinct blocks of the
nodes of each admitted workload of more than one pod). The optimizer's plan
also carries its lexicographic stages in its solver log ("stage NAME: STATUS
value V bound B in Ss"), read back as :class:`Stage` values.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from optsched.bench.scale_bounds import ScaleBounds
from optsched.model.names import DEFAULT_TOPOLOGY_LEVELS
from optsched.model.plan import Plan, WorkloadDecision
from optsched.model.snapshot import Node, Snapshot
from optsched.topology.domains import block_level

_STAGE = re.compile(
    r"^stage (?P<name>\S+): (?P<status>\S+) value (?P<value>\S+) bound (?P<bound>\S+) in (?P<s>\S+)s"
)


@dataclass(frozen=True)
class Stage:
    """One lexicographic stage of the optimizer: its value, CP-SAT's bound and their relative gap."""

    name: str
    status: str
    value: float
    bound: float
    seconds: float

    @property
    def gap(self) -> float | None:
        """|value - bound| over the larger magnitude (0 when both are 0), whichever way it optimises.

        None where the stage has no bound (it ran out of time before a first solution).
        """
        if not math.isfinite(self.bound):
            return None
        scale = max(abs(self.value), abs(self.bound))
        return abs(self.value - self.bound) / scale if scale else 0.0


@dataclass(frozen=True)
class Figures:
    """A policy's quality figures on one instance; None where the figure has nothing to count."""

    policy: str
    gpus_admitted: float
    workloads_admitted: int
    racks_per_gang: float | None
    blocks_per_gang: float | None
    nvlink_hit: float | None
    wall_seconds: float
    solve_seconds: float
    status: str
    gap: float | None
    invalid: int
    racks_bound: float | None
    """Lower bound on ``racks_per_gang`` for this plan's admitted gangs."""
    blocks_bound: float | None
    nvlink_bound: float | None
    """Upper bound on ``nvlink_hit`` for this plan's admitted pods."""
    stages: tuple[Stage, ...] = ()
    warnings: tuple[str, ...] = ()
    """The plan's warnings (for the optimizer: stages cut short, a fallback to the greedy plan)."""


def figures(
    snapshot: Snapshot, plan: Plan, bounds: ScaleBounds, *, wall_seconds: float, invalid: int
) -> Figures:
    """The figures of ``plan`` (made by ``plan.policy``) and the bounds that hold for its admitted set."""
    summary = plan.summary
    admitted = [w.name for w in plan.admitted]
    gangs = [w for w in plan.admitted if sum(len(ps.pods) for ps in w.pod_sets) > 1]
    by_name = {n.name: n for n in snapshot.nodes}
    blocks = [_blocks(snapshot, by_name, w) for w in gangs]
    return Figures(
        policy=plan.policy,
        gpus_admitted=summary.gpus_admitted,
        workloads_admitted=summary.workloads_admitted,
        racks_per_gang=summary.racks_per_gang if gangs else None,
        blocks_per_gang=round(sum(blocks) / len(blocks), 3) if blocks else None,
        nvlink_hit=summary.multi_gpu_pods_in_one_island / summary.multi_gpu_pods
        if summary.multi_gpu_pods
        else None,
        wall_seconds=wall_seconds,
        solve_seconds=plan.solve_seconds,
        status=plan.status.value,
        gap=plan.gap,
        invalid=invalid,
        racks_bound=bounds.racks_per_gang(admitted),
        blocks_bound=bounds.blocks_per_gang(admitted),
        nvlink_bound=bounds.nvlink_hit(admitted),
        stages=stages(plan),
        warnings=tuple(plan.warnings),
    )


def _blocks(snapshot: Snapshot, by_name: dict[str, Node], decision: WorkloadDecision) -> int:
    flavor = next((ps.flavor for ps in decision.pod_sets if ps.flavor), None)
    level = block_level(snapshot.topology_levels_for(snapshot.flavor(flavor))) or DEFAULT_TOPOLOGY_LEVELS[0]
    values = set()
    for ps in decision.pod_sets:
        for pod in ps.pods:
            node = by_name.get(pod.node)
            values.add(node.labels.get(level, "") if node is not None else "")
    return len(values)


def stages(plan: Plan) -> tuple[Stage, ...]:
    """The optimizer's stages as its solver log reports them (none for a greedy policy)."""
    out = []
    for line in plan.solver_log:
        match = _STAGE.match(line)
        if match is None:
            continue
        try:
            value, bound, seconds = float(match["value"]), float(match["bound"]), float(match["s"])
        except ValueError:
            continue
        out.append(Stage(match["name"], match["status"], value, bound, seconds))
    return tuple(out)
