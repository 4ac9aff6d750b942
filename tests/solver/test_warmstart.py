"""Warm starts: every module's hint rules complete the greedy placement to a feasible assignment."""

from __future__ import annotations

from ortools.sat.python import cp_model

from optsched.model.snapshot import FULL_GPU_MILLI, LocalQueue, NodeUsage, ResourceFlavor, Snapshot
from optsched.policies.choosers import BestFit
from optsched.policies.greedy import greedy_placement
from optsched.solver.context import ModelContext
from optsched.solver.modules import applied, default_modules
from optsched.solver.objective import ObjectiveTerm, Phase, priority_stage
from optsched.solver.warmstart import hint_greedy, known_optima, quality_start
from tests.builders import A100, RACK, gpu_queue, node, pods, snapshot, workload
from tests.solver.helpers import FAST
from tests.solver.modules.helpers import admit_only, context

PAIRS = [[0, 1], [2, 3], [4, 5], [6, 7]]


def mixed() -> Snapshot:
    """Shares, NVLink pairs, a required rack, a preferred rack and a quota cohort, all at once."""
    usage = {
        "h1": NodeUsage(gpu_milli=(500,) + (0,) * 7, gpu_mem_mib=(20_000,) + (0,) * 7, pods=1),
        "a1": NodeUsage(gpu_milli=(0, FULL_GPU_MILLI) + (0,) * 6, gpu_mem_mib=(0, 40_960) + (0,) * 6, pods=1),
    }
    queue = [
        workload("gang", pods(2, 4, preferred_topology=RACK), queue="lq"),
        workload("pair", pods(1, 2, nvlink_required=True), queue="lq"),
        workload("racked", pods(2, 8, required_topology=RACK), queue="lq", priority=100),
        workload("shares", pods(3, 1, gpu_milli=500, gpu_mem=10_000), queue="lq"),
        workload("cpu", pods(1, 0), queue="lq"),
    ]
    return snapshot(
        [
            node("h1", rack="r1"),
            node("a1", product=A100, islands=PAIRS, gpu_mem=40_960, rack="r1"),
            node("h2", rack="r2"),
            node("h3", rack="r2"),
        ],
        queue,
        usage=usage,
        cluster_queues=[gpu_queue(name, gpus=16, cohort="pool") for name in ("team-a", "team-b")],
        local_queues=[LocalQueue(namespace="default", name="lq", cluster_queue="team-a")],
        flavors=[ResourceFlavor(name="default")],
    )


def _hint_is_feasible(ctx: ModelContext) -> bool:
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.fix_variables_to_their_hinted_value = True
    return solver.solve(ctx.model) in (cp_model.OPTIMAL, cp_model.FEASIBLE)


def _apply(ctx: ModelContext, phase: Phase) -> list[ObjectiveTerm]:
    terms: list[ObjectiveTerm] = []
    for module, weight in applied(default_modules(), FAST, phase):
        terms += module.apply(ctx, weight)
    return terms


def test_the_greedy_placement_completes_to_a_feasible_hint_of_the_admission_model() -> None:
    snap = mixed()
    greedy = greedy_placement(snap, BestFit())
    assert "default/gang" not in greedy.admitted and len(greedy.admitted) == 4
    ctx = context(snap, greedy=greedy)
    _apply(ctx, Phase.ADMISSION)
    hint_greedy(ctx, greedy)
    assert len(ctx.model.proto.solution_hint.vars) == len(ctx.model.proto.variables)
    assert _hint_is_feasible(ctx)


def test_the_quality_start_is_a_feasible_hint_of_the_quality_model() -> None:
    snap = mixed()
    greedy = greedy_placement(snap, BestFit())
    ctx = context(snap, greedy=greedy)
    _apply(ctx, Phase.ADMISSION)
    hint = hint_greedy(ctx, greedy)
    admit_only(ctx, *(key.split("/", 1)[1] for key in greedy.admitted))
    terms = _apply(ctx, Phase.QUALITY)
    size = len(ctx.model.proto.variables)
    start = quality_start(ctx, terms, [hint.get(i, 0) for i in range(size)], greedy, hint)
    assert len(start) == size
    assert _hint_is_feasible(ctx)


def test_leading_levels_the_greedy_plan_admits_whole_have_a_known_optimum() -> None:
    snap = mixed()
    greedy = greedy_placement(snap, BestFit())
    ctx = context(snap, greedy=greedy)
    # Level 100 is admitted whole; level 0 is not (the gang waits), so its optimum is not known.
    assert known_optima(ctx.vars, greedy) == {priority_stage(100): 2 * 8 * FULL_GPU_MILLI}
