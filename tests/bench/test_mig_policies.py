"""The bench mig baselines on hand-checked cases, and no baseline ever destroys a running instance."""

from __future__ import annotations

import random

import pytest

from optsched.bench.mig_policies import (
    PLACERS,
    STATIC_POLICIES,
    create_and_bind,
    place_bestfit,
    place_firstfit,
    place_static,
    static_layout,
)
from optsched.bench.mig_state import Instance, MigPool
from optsched.bench.mig_trace import MigRequest
from optsched.mig.layout import MigSlot, layout_problems
from optsched.mig.profiles import MigModel, models


def _model(name: str = "A100-80GB") -> MigModel:
    return next(m for m in models() if m.name == name)


def _request(rid: int, profile: str) -> MigRequest:
    return MigRequest(id=rid, task=f"t{rid}", share_milli=100, profile=profile, arrival=0, duration=1)


def _pool(gpus: int = 2) -> MigPool:
    return MigPool(_model(), 1, gpus_per_node=gpus)


@pytest.mark.parametrize("model", ["A100-80GB", "H100-80GB"])
def test_static_layouts_are_the_operator_counts_at_legal_starts(model: str) -> None:
    mig = _model(model)
    assert static_layout(mig, "all-1g.10gb") == tuple(("1g.10gb", s) for s in range(7))
    assert static_layout(mig, "all-3g.40gb") == (("3g.40gb", 0), ("3g.40gb", 4))
    # 3g at 0 would leave only slice 7 for the second 1g.10gb, which cannot start there.
    assert static_layout(mig, "all-balanced") == (
        ("2g.20gb", 0),
        ("1g.10gb", 2),
        ("1g.10gb", 3),
        ("3g.40gb", 4),
    )
    for name in STATIC_POLICIES:
        assert not layout_problems(mig, [MigSlot(p, s) for p, s in static_layout(mig, name)])


def _busy(pool: MigPool, pos: int, profile: str, start: int, task: int) -> None:
    pool.gpus[pos].instances.append(Instance(profile, start, task))
    pool.where[task] = (pos, start)


def test_first_fit_takes_the_first_gpu_best_fit_the_fullest() -> None:
    first, best = _pool(), _pool()
    for pool in (first, best):
        _busy(pool, 0, "1g.10gb", 0, 100)
        _busy(pool, 1, "3g.40gb", 0, 101)
    assert place_firstfit(first, _request(1, "3g.40gb"))
    assert place_bestfit(best, _request(1, "3g.40gb"))
    # First fit: GPU 0, the lowest start the 1g leaves free (4); best fit: GPU 1, no room left after.
    assert first.where[1] == (0, 4)
    assert best.where[1] == (1, 4)
    assert first.gpus[0].layout == (("1g.10gb", 0), ("3g.40gb", 4))


def test_best_fit_reuses_a_free_instance_before_creating_one() -> None:
    pool = _pool()
    pool.gpus[1].instances.append(Instance("1g.20gb", 6))
    before = pool.layouts()
    assert place_bestfit(pool, _request(1, "1g.20gb"))
    assert pool.where[1] == (1, 6) and pool.layouts() == before


def test_first_fit_uses_the_lowest_legal_start_even_past_a_free_instance() -> None:
    pool = _pool(1)
    pool.gpus[0].instances.append(Instance("1g.20gb", 6))
    assert place_firstfit(pool, _request(1, "1g.20gb"))
    assert pool.where[1] == (0, 0)
    assert pool.gpus[0].layout == (("1g.20gb", 0), ("1g.20gb", 6))


def test_creating_an_instance_destroys_free_ones_in_the_way_only() -> None:
    pool = _pool(1)
    pool.gpus[0].instances.append(Instance("7g.80gb", 0))
    assert create_and_bind(pool, 0, _request(1, "3g.40gb"), 0)
    assert pool.gpus[0].layout == (("3g.40gb", 0),) and pool.moved == 0


def test_static_takes_a_free_instance_on_the_gpu_with_most_slices_in_use() -> None:
    pool = _pool()
    for pos in range(2):
        pool.gpus[pos].instances.extend([Instance("3g.40gb", 0), Instance("3g.40gb", 4)])
    pool.gpus[1].instances[0].task = 100
    pool.where[100] = (1, 0)
    assert place_static(pool, _request(1, "3g.40gb"))
    assert pool.where[1] == (1, 4)
    assert not place_static(pool, _request(2, "1g.10gb"))
    assert not place_bestfit(_full(), _request(3, "1g.10gb"))


def _full() -> MigPool:
    pool = _pool(1)
    _busy(pool, 0, "7g.80gb", 0, 100)
    return pool


@pytest.mark.parametrize("policy", ["bestfit", "firstfit", "all-balanced"])
def test_no_running_instance_is_ever_destroyed_and_layouts_stay_legal(policy: str) -> None:
    model = _model()
    pool = MigPool(model, 1, gpus_per_node=4)
    if policy in STATIC_POLICIES:
        for pos in range(4):
            pool.set_layout(pos, static_layout(model, policy))
    rng = random.Random(7)
    profiles = ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"]
    running: list[int] = []
    placed = 0
    for rid in range(400):
        if running and rng.random() < 0.45:
            pool.depart([running.pop(rng.randrange(len(running)))])
        held = {t: pool.where[t] for t in running}
        if PLACERS[policy](pool, _request(rid, rng.choice(profiles))):
            running.append(rid)
            placed += 1
        assert all(pool.where[t] == seat for t, seat in held.items())
        for gpu in pool.gpus:
            assert not layout_problems(model, [MigSlot(p, s) for p, s in gpu.layout])
    assert pool.moved == 0 and pool.illegal == 0 and placed > 100
