"""The lexicographic order: one list, priority levels first and highest first."""

from __future__ import annotations

from ortools.sat.python import cp_model

from optsched.solver.objective import ORDER, ObjectiveTerm, Phase, Stage

X = cp_model.CpModel().new_int_var(0, 1, "x")


def test_every_stage_has_one_place_in_the_order() -> None:
    assert sorted(ORDER) == sorted(Stage) and len(set(ORDER)) == len(ORDER)
    assert ORDER[0] is Stage.PRIORITY and ORDER[-1] is Stage.STABILITY


def test_terms_sort_by_stage_then_priority_level_highest_first() -> None:
    terms = [
        ObjectiveTerm(Stage.STABILITY, X),
        ObjectiveTerm(Stage.PRIORITY, X, maximize=True, priority=0),
        ObjectiveTerm(Stage.NVLINK_FIT, X),
        ObjectiveTerm(Stage.TOPOLOGY, X),
        ObjectiveTerm(Stage.PRIORITY, X, maximize=True, priority=1000),
        ObjectiveTerm(Stage.PACKING, X),
    ]
    names = [t.name for t in sorted(terms, key=lambda t: t.order)]
    assert names == ["priority:1000", "priority:0", "topology", "packing", "nvlink-fit", "stability"]


def test_only_priority_stages_decide_admission() -> None:
    assert [s for s in Stage if s.phase is Phase.ADMISSION] == [Stage.PRIORITY]
