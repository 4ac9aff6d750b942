"""Large-neighbourhood search: improve a stage a few racks at a time once the full model stalls.

On a cluster of a thousand nodes the whole model is too large for CP-SAT to
move far from its start in a few seconds: each search step touches every
variable. Most of a plan is fine where it is, though; what can improve is a
gang split over racks, or a rack packed badly. So after a stage's solve of
the whole model, the rest of its share goes to small solves that keep every
pod outside a few racks where it is and let CP-SAT rearrange the pods inside
them (CP-SAT's ``fix_variables_to_their_hinted_value``: the placement
outside is the hint and is fixed, presolve removes it, the rest is a small
problem). A neighbourhood is the racks one gang spans (at most four), then pairs of
racks in name order; a solve that improves the stage's objective becomes the
new solution. The split gangs are read from the solution the search starts
from.

Only pod counts and admissions are fixed; auxiliary variables (islands,
domains used, shares) stay free and follow from the counts, so every
neighbourhood keeps the current solution feasible and a solve can only end
at least as good as it started.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from optsched.model.names import HOSTNAME_LABEL
from optsched.settings import Settings
from optsched.solver.clock import SearchClock
from optsched.solver.expressions import evaluate
from optsched.solver.variables import Variables
from optsched.topology.domains import domain_of, rack_level

LinearExpr = cp_model.LinearExprT
MAX_RACKS = 4
"""Racks freed together at most: beyond this a neighbourhood is no longer small."""
MIN_CHARGE_PER_VARIABLE = 2e-6
"""Deterministic time one neighbourhood solve costs at least, per model variable (0.06 at 30,000).

CP-SAT does not count loading the whole model and presolving its fixed part,
which grows with the model; charging it keeps a deterministic budget close to
the wall time it takes on a quiet machine.
"""
WALL_FLOOR_SECONDS = 10.0
"""Under a deterministic budget, no neighbourhood solve is cut by the wall clock before this."""
STEP_SHARE = 0.2
"""Each neighbourhood's solve may use at most this share of the search left."""


@dataclass(frozen=True)
class Racks:
    """Which decision variables sit on which rack, to free a few racks at a time."""

    decisions: tuple[int, ...]
    """Indices of every pod count and admission variable: what a neighbourhood fixes outside it."""
    by_rack: dict[tuple[str, ...], tuple[int, ...]]
    """Rack -> indices of the pod counts on its nodes (and of admissions wholly inside it)."""
    rack_of_var: dict[int, tuple[str, ...]] = field(default_factory=dict)
    """Pod count variable -> the rack of its node."""
    gangs: tuple[tuple[int, ...], ...] = ()
    """Each multi-pod PodSet's count variables, to find the racks a gang spans."""
    admit_of: dict[int, int] = field(default_factory=dict)
    """Pod count variable -> its workload's admission variable."""
    counts_of: dict[int, tuple[int, ...]] = field(default_factory=dict)
    """Admission variable -> every pod count variable of the workload."""

    def freed(self, group: tuple[tuple[str, ...], ...], solution: list[int]) -> set[int]:
        """The variables a neighbourhood frees: pod counts on its racks, and the admissions they decide.

        A workload waiting now may be admitted inside the racks (its counts outside stay 0); an
        admitted one may leave only if all its pods are inside.
        """
        free = {i for rack in group for i in self.by_rack.get(rack, ())}
        for admit in {self.admit_of[i] for i in free}:
            counts = self.counts_of[admit]
            if not solution[admit] or all(i in free or not solution[i] for i in counts):
                free.add(admit)
        return free


def racks(variables: Variables) -> Racks | None:
    """The rack map of the modelled pod sets; None without a rack level."""
    problem = variables.problem
    levels = problem.snapshot.topology_levels_for(None)
    level = rack_level(levels)
    if level is None or level == HOSTNAME_LABEL:
        return None
    nodes = problem.snapshot.nodes
    rack_of_node = {i: domain_of(node, levels, level) for i, node in enumerate(nodes)}
    by_rack: dict[tuple[str, ...], list[int]] = {}
    rack_of_var: dict[int, tuple[str, ...]] = {}
    decisions: list[int] = []
    gangs: list[tuple[int, ...]] = []
    admit_of: dict[int, int] = {}
    counts_of: dict[int, tuple[int, ...]] = {}
    for entry in variables.workloads:
        decisions.append(entry.admit.index)
        counts_of[entry.admit.index] = tuple(c.y.index for ps in entry.pod_sets for c in ps.candidates)
        for ps in entry.pod_sets:
            ys = []
            for c in ps.candidates:
                decisions.append(c.y.index)
                admit_of[c.y.index] = entry.admit.index
                rack = rack_of_node.get(c.node)
                if rack is not None:
                    by_rack.setdefault(rack, []).append(c.y.index)
                    rack_of_var[c.y.index] = rack
                ys.append(c.y.index)
            if ps.pod_set.count > 1:
                gangs.append(tuple(ys))
    return Racks(
        tuple(decisions),
        {k: tuple(v) for k, v in by_rack.items()},
        rack_of_var,
        tuple(gangs),
        admit_of,
        counts_of,
    )


def neighbourhoods(layout: Racks, solution: list[int]) -> Iterator[tuple[tuple[str, ...], ...]]:
    """Groups of racks to free, most promising first: the racks of gangs split over racks, then pairs."""
    seen: set[tuple[tuple[str, ...], ...]] = set()
    spans = []
    for ys in layout.gangs:
        used = sorted({layout.rack_of_var[i] for i in ys if solution[i] > 0 and i in layout.rack_of_var})
        if len(used) > 1:
            spans.append(tuple(used[:MAX_RACKS]))
    for group in sorted(spans, key=lambda g: (-len(g), g)):
        if group not in seen:
            seen.add(group)
            yield group
    yield from itertools.pairwise(sorted(layout.by_rack))


def improve(
    model: cp_model.CpModel,
    objective: LinearExpr,
    maximize: bool,
    solution: list[int],
    layout: Racks,
    settings: Settings,
    clock: SearchClock,
    deadline: float,
) -> tuple[list[int], int, int]:
    """Neighbourhood solves of ``objective`` until ``deadline``: the best solution, solves made, improving.

    ``model`` holds every constraint and earlier stages' pins; its hint and
    objective are replaced here and left as the caller must set them again.
    """
    best = list(solution)
    best_value = evaluate(objective, best)
    improved = tried = 0
    for group in neighbourhoods(layout, best):
        left = deadline - clock.now()
        if left <= 0.01:
            break
        tried += 1
        free = layout.freed(group, best)
        found = _solve_around(model, objective, maximize, best, layout, free, settings, clock, left)
        if found is None:
            continue
        value = evaluate(objective, found)
        if (value > best_value) if maximize else (value < best_value):
            best, best_value, improved = found, value, improved + 1
    return best, tried, improved


def _solve_around(
    model: cp_model.CpModel,
    objective: LinearExpr,
    maximize: bool,
    solution: list[int],
    layout: Racks,
    free: set[int],
    settings: Settings,
    clock: SearchClock,
    left: float,
) -> list[int] | None:
    """One solve with every decision outside ``free`` fixed at ``solution``; its solution or None."""
    model.clear_hints()  # type: ignore[no-untyped-call]
    hint = model.proto.solution_hint
    fixed = [i for i in layout.decisions if i not in free]
    hint.vars.extend(fixed)
    hint.values.extend(solution[i] for i in fixed)
    model.clear_objective()  # type: ignore[no-untyped-call]
    if maximize:
        model.maximize(objective)
    else:
        model.minimize(objective)
    solver = cp_model.CpSolver()
    least = MIN_CHARGE_PER_VARIABLE * len(model.proto.variables)
    clock.limit(solver, max(least, 0.02, min(left, STEP_SHARE * left + 0.05)), WALL_FLOOR_SECONDS)
    params = solver.parameters
    params.fix_variables_to_their_hinted_value = True
    # Presolve removes the fixed part; one light pass is all a small neighbourhood needs.
    params.max_presolve_iterations = 1
    params.cp_model_probing_level = 0
    params.symmetry_level = 0
    params.num_workers = settings.workers or (os.cpu_count() or 1)
    params.random_seed = settings.random_seed
    status = solver.solve(model)
    clock.charge(solver, minimum=least)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    return list(solver.response_proto.solution)
