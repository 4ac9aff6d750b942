"""Admission objectives: one maximised stage per priority level, GPUs weighted by waiting time."""

from __future__ import annotations

from optsched.model.snapshot import FULL_GPU_MILLI
from optsched.solver.modules.admission import Admission
from optsched.solver.objective import Stage, pod_value
from tests.builders import node, pods, snapshot, workload
from tests.solver.helpers import FAST
from tests.solver.modules.helpers import apply, cheapest, context, fix


def test_one_stage_per_priority_level_highest_first() -> None:
    snap = snapshot(
        [node("n1")], [workload("low", pods(1, 2), priority=0), workload("high", pods(1, 2), priority=1000)]
    )
    terms = apply(context(snap), Admission())
    assert [(t.stage, t.name, t.maximize) for t in terms] == [
        (Stage.PRIORITY, "priority:1000", True),
        (Stage.PRIORITY, "priority:0", True),
    ]
    assert all(t.scale == FULL_GPU_MILLI for t in terms)


def test_a_level_counts_milli_gpus_with_the_ageing_bonus() -> None:
    waited = workload("old", pods(2, 4), age=10 * 3600)
    snap = snapshot([node("n1"), node("n2")], [waited, workload("new", pods(1, 2), age=0)])
    ctx = context(snap)
    (term,) = apply(ctx, Admission())
    fix(ctx, admit={"old": True, "new": True}, pods={("old", "main"): {"n1": 2}, ("new", "main"): {"n2": 1}})
    old = pod_value(waited.pod_sets[0].request, 10.0, FAST.ageing)
    assert old == round(4 * FULL_GPU_MILLI * 1.5)  # 5%/hour for 10 hours, capped at 50%
    assert cheapest(ctx, [term]) == 2 * old + 2 * FULL_GPU_MILLI


def test_a_cpu_only_pod_counts_one_milli() -> None:
    ctx = context(snapshot([node("n1")], [workload("cpu", pods(1, 0))]))
    (term,) = apply(ctx, Admission())
    fix(ctx, admit={"cpu": True}, pods={("cpu", "main"): {"n1": 1}})
    assert cheapest(ctx, [term]) == 1
