"""What the plan reports about the solve: stage values, bound, gap, and comparisons with a placement."""

from __future__ import annotations

from optsched.model.placement import Placement
from optsched.model.snapshot import FULL_GPU_MILLI, Snapshot, Workload
from optsched.settings import Settings
from optsched.solver.objective import pod_value, priority_stage
from optsched.solver.problem import Problem
from optsched.solver.stages import StagesOutcome


def admitted_vector(snapshot: Snapshot, settings: Settings, placement: Placement) -> dict[int, int]:
    """Admission objective per priority level, evaluated on a placement."""
    newest = max(w.created for w in snapshot.workloads)
    out: dict[int, int] = {}
    for workload in snapshot.workloads:
        assignment = placement.admitted.get(workload.key)
        if assignment is None:
            continue
        age = max(0.0, (newest - workload.created).total_seconds() / 3600)
        total = 0
        for ps in workload.pod_sets:
            total += len(assignment.pods.get(ps.name, [])) * pod_value(ps.request, age, settings.ageing)
        out[workload.priority] = out.get(workload.priority, 0) + total
    return out


def lex_less(a: dict[int, int], b: dict[int, int]) -> bool:
    for level in sorted(set(a) | set(b), reverse=True):
        if a.get(level, 0) != b.get(level, 0):
            return a.get(level, 0) < b.get(level, 0)
    return False


def gpus_admitted(snapshot: Snapshot, placement: Placement) -> float:
    total = 0.0
    by_key: dict[str, Workload] = {w.key: w for w in snapshot.workloads}
    for key, assignment in placement.admitted.items():
        workload = by_key.get(key)
        if workload is None:
            continue
        for ps in workload.pod_sets:
            total += len(assignment.pods.get(ps.name, [])) * ps.request.gpu_equivalent
    return total


def capacity_bounds(problem: Problem, outcome: StagesOutcome) -> dict[str, float]:
    """A second upper bound per admission stage: fractional knapsack over free GPU capacity.

    CP-SAT's bound comes from its LP, which a short time limit on a large model
    may not reach. This one is cheap and valid: a level's admitted pods use GPU
    compute (milli) that is free and not used by the levels above it (which
    need at least the compute of their best-valued pods that reaches their pinned value),
    and no pod is worth more than its value per milli. Filling that capacity
    with the best-valued pods first, fractionally, bounds the stage.
    """
    free: float = max(0, problem.state.free_gpu_milli)
    by_level: dict[int, list[tuple[float, int, int]]] = {}
    for entry in problem.workloads:
        for ps in entry.pod_sets:
            req = ps.request
            base = req.gpu_milli_total if req.is_share else req.gpus * FULL_GPU_MILLI
            value = pod_value(req, entry.age_hours, problem.settings.ageing)
            by_level.setdefault(entry.workload.priority, []).append((value, base, ps.pod_set.count))
    out: dict[str, float] = {}
    results = {r.name: r for r in outcome.results if r.admission}
    for priority in sorted(by_level, reverse=True):
        name = priority_stage(priority)
        items = by_level[priority]
        free_value = sum(v * c for v, b, c in items if b == 0)
        left, total = free, float(free_value)
        for worth, base, count in sorted((i for i in items if i[1] > 0), key=lambda i: -i[0] / i[1]):
            take = min(float(count), left / base)
            total += take * worth
            left -= take * base
            if left <= 0:
                break
        out[name] = total / FULL_GPU_MILLI
        achieved = results.get(name)
        if achieved is None:
            break
        # The least compute that reaches the achieved value: best value per milli first.
        need = max(0.0, achieved.value * FULL_GPU_MILLI - free_value)
        used = 0.0
        for worth, base, count in sorted((i for i in items if i[1] > 0), key=lambda i: -i[0] / i[1]):
            if need <= 0:
                break
            take = min(float(count), need / worth)
            used += take * base
            need -= take * worth
        free = max(0.0, free - used)
    return out


def report(
    outcome: StagesOutcome, capacity: dict[str, float]
) -> tuple[dict[str, float], float | None, float | None]:
    """Objective per stage, and bound and gap of the admitted work (the admission stages summed).

    Each admission stage's bound (the tighter of CP-SAT's and
    :func:`capacity_bounds`) holds given the levels above it at their achieved
    values, so the summed bound is the most GPU-weighted work the lexicographic
    order could admit within the model; the gap is relative to it.
    """
    objective = {r.name: round(r.value, 3) for r in outcome.results}
    admission = [r for r in outcome.results if r.admission]
    if not admission:
        return objective, None, None
    value = sum(r.value for r in admission)
    bound = sum(max(min(r.bound, capacity.get(r.name, r.bound)), r.value) for r in admission)
    gap = (bound - value) / bound if bound > 0 else 0.0
    return objective, round(bound, 3), round(gap, 6)
