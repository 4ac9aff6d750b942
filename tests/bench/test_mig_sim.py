"""The bench mig figures on a hand-checked trace: acceptance, GPUs in use, reconfigurations, pods moved."""

from __future__ import annotations

from optsched.bench.mig_report import notes, rows, table, targets
from optsched.bench.mig_sim import simulate
from optsched.bench.mig_state import MigPool
from optsched.bench.mig_trace import MigRequest, MigTrace
from optsched.mig.profiles import MigModel, models
from optsched.settings import Settings

SETTINGS = Settings(time_limit_s=0.5, deterministic_time=True, workers=1)


def _model() -> MigModel:
    return next(m for m in models() if m.name == "H100-80GB")


def _trace() -> MigTrace:
    """Two 7g for one window, then one 3g for one window, on one eight-GPU node."""
    requests = (
        MigRequest(0, "a", 810, "7g.80gb", arrival=0, duration=1),
        MigRequest(1, "b", 810, "7g.80gb", arrival=0, duration=1),
        MigRequest(2, "c", 470, "3g.40gb", arrival=1, duration=1),
    )
    return MigTrace("H100-80GB", 8, windows=3, window_s=900, load=1.0, requests=requests)


def test_a_static_layout_rejects_what_it_has_no_instance_for() -> None:
    run = simulate(_trace(), _model(), 1, "all-3g.40gb", SETTINGS)
    assert (run.arrived, run.placed) == (3, 1)
    assert run.acceptance_series == (0.0, 1 / 3, 1 / 3)
    assert run.in_use_series == (0, 1, 0)
    assert run.reconfigured == 0 and run.moved == 0


def test_best_fit_counts_each_gpu_whose_layout_changed_in_a_window() -> None:
    run = simulate(_trace(), _model(), 1, "bestfit", SETTINGS)
    assert run.acceptance == 1.0
    # Window 0 creates a 7g on GPUs 0 and 1; window 1 turns GPU 0's free 7g into a 3g.
    assert run.reconfigured == 3 and run.reconfigured_per_1000 == 1000.0
    assert run.in_use_series == (2, 1, 0)
    assert run.in_use_mean == 1.0 and run.in_use_end == 0
    assert run.moved == 0


def test_the_report_gives_mean_and_sd_over_seeds_and_the_targets() -> None:
    runs = [
        simulate(_trace(), _model(), 1, p, SETTINGS, seed=s)
        for s in (1, 2)
        for p in ("all-3g.40gb", "bestfit")
    ]
    grouped = rows(runs)
    assert [(r.policy, len(r.runs)) for r in grouped] == [("all-3g.40gb", 2), ("bestfit", 2)]
    lines = table(runs)
    assert "| H100-80GB (8 GPUs) | all-3g.40gb | 33.3 ± 0.0 |" in lines[2]
    assert targets(runs) == [] and notes(runs) == []


def test_moving_a_running_instance_is_counted_not_assumed_away() -> None:
    pool = MigPool(_model(), 1, gpus_per_node=1)
    assert not pool.set_layout(0, (("3g.40gb", 0), ("3g.40gb", 4)))
    assert pool.bind(7, 0, "3g.40gb", 4)
    assert not pool.set_layout(0, (("3g.40gb", 4), ("1g.10gb", 0)))
    assert pool.moved == 0 and pool.where[7] == (0, 4)
    assert not pool.set_layout(0, (("7g.80gb", 0),))
    assert pool.moved == 1 and 7 not in pool.where
    assert pool.set_layout(0, (("3g.40gb", 0), ("3g.40gb", 2))) and pool.illegal == 1
    assert pool.gpus[0].layout == (("7g.80gb", 0),)
