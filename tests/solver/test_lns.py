"""Neighbourhood search: a few racks are re-solved with everything else held where it is."""

from __future__ import annotations

from ortools.sat.python import cp_model

from optsched.settings import Settings
from optsched.solver.clock import SearchClock
from optsched.solver.lns import Racks, improve, neighbourhoods

A, B, C = ("a",), ("b",), ("c",)


def _split_gang() -> tuple[cp_model.CpModel, list[cp_model.IntVar], cp_model.LinearExprT, Racks]:
    """A two-pod gang (counts on racks a, b, c) admitted with one pod on a and one on b."""
    model = cp_model.CpModel()
    admit = model.new_bool_var("admit")
    ys = [model.new_int_var(0, 2, f"y_{r[0]}") for r in (A, B, C)]
    used = [model.new_bool_var(f"used_{r[0]}") for r in (A, B, C)]
    model.add(sum(ys) == 2 * admit)
    model.add(admit == 1)
    for y, u in zip(ys, used, strict=True):
        model.add(y <= 2 * u)
    racks_used = cp_model.LinearExpr.sum(used)
    layout = Racks(
        decisions=(admit.index, *(y.index for y in ys)),
        by_rack={rack: (y.index,) for rack, y in zip((A, B, C), ys, strict=True)},
        rack_of_var={y.index: rack for rack, y in zip((A, B, C), ys, strict=True)},
        gangs=(tuple(y.index for y in ys),),
        admit_of={y.index: admit.index for y in ys},
        counts_of={admit.index: tuple(y.index for y in ys)},
    )
    return model, ys, racks_used, layout


def _start(ys: list[cp_model.IntVar], size: int) -> list[int]:
    solution = [0] * size
    solution[0] = 1  # admitted
    solution[ys[0].index], solution[ys[1].index] = 1, 1
    solution[ys[-1].index + 1], solution[ys[-1].index + 2] = 1, 1  # used_a, used_b
    return solution


def test_the_racks_a_split_gang_spans_come_first() -> None:
    model, ys, _, layout = _split_gang()
    start = _start(ys, len(model.proto.variables))
    assert next(neighbourhoods(layout, start)) == (A, B)


def test_a_split_gang_is_brought_into_one_rack() -> None:
    model, ys, racks_used, layout = _split_gang()
    start = _start(ys, len(model.proto.variables))
    clock = SearchClock(deterministic=True)
    best, tried, improved = improve(
        model, racks_used, False, start, layout, Settings(workers=1), clock, clock.now() + 1.0
    )
    assert tried >= 1 and improved >= 1
    assert sorted(best[y.index] for y in ys) == [0, 0, 2]


def test_a_neighbourhood_frees_waiting_work_but_not_work_placed_outside_it() -> None:
    _, ys, _, layout = _split_gang()
    size = ys[-1].index + 4
    start = _start(ys, size)
    # The gang has a pod on b, outside a neighbourhood of rack a alone: its admission stays fixed.
    assert 0 not in layout.freed((A,), start)
    # Both its racks freed: it may move (or leave) as a whole.
    assert 0 in layout.freed((A, B), start)
    waiting = [0] * size
    assert 0 in layout.freed((C,), waiting)
