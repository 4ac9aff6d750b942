"""The MIG trace: a task's share asks for the smallest profile holding it; arrivals are seeded and scaled."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from optsched.bench.mig_trace import (
    NEVER,
    TaskDraw,
    TaskPopulation,
    build_trace,
    lifetime_windows,
    load_tasks,
    profile_for_share,
    whole_profile,
)
from optsched.bench.trace_data import pod_file
from optsched.errors import InputError
from optsched.mig.profiles import MigModel, models
from tests.bench.conftest import POD_HEADER


def _model(name: str) -> MigModel:
    return next(m for m in models() if m.name == name)


@pytest.mark.parametrize(
    ("share", "profile"),
    [
        (50, "1g.10gb"),
        (110, "1g.10gb"),
        (230, "1g.20gb"),
        (320, "3g.40gb"),
        (470, "3g.40gb"),
        (500, "7g.80gb"),
        (550, "7g.80gb"),
        (810, "7g.80gb"),
        (1000, "7g.80gb"),
    ],
)
@pytest.mark.parametrize("model", ["A100-80GB", "H100-80GB"])
def test_trace_shares_map_to_the_expected_profile(model: str, share: int, profile: str) -> None:
    # Half the GPU needs 7g: a 3g.40gb instance holds a little less than half the 7g instance's memory.
    assert profile_for_share(_model(model), share).name == profile


@pytest.mark.parametrize("model", ["A100-80GB", "H100-80GB", "A100-40GB", "H200-141GB"])
def test_every_share_gets_the_smallest_profile_that_holds_it(model: str) -> None:
    mig = _model(model)
    whole = whole_profile(mig).memory_mib
    for share in range(1, 1001):
        needed = share * whole / 1000
        chosen = profile_for_share(mig, share)
        assert chosen.memory_mib >= needed and "+" not in chosen.name
        smaller = [p for p in mig.profiles if p.memory_mib < chosen.memory_mib and "+" not in p.name]
        assert all(p.memory_mib < needed for p in smaller), (share, chosen.name)
        same = [p for p in mig.profiles if p.memory_mib == chosen.memory_mib and "+" not in p.name]
        assert chosen.compute == min(p.compute for p in same)


def test_the_boundary_of_the_smallest_profile_is_exact() -> None:
    mig = _model("A100-80GB")
    small = mig.profile("1g.10gb")
    assert small is not None
    whole = whole_profile(mig).memory_mib
    last = max(s for s in range(1, 1001) if s * whole <= small.memory_mib * 1000)
    assert profile_for_share(mig, last).name == "1g.10gb"
    assert profile_for_share(mig, last + 1).name == "1g.20gb"


def test_a_share_out_of_range_is_refused() -> None:
    with pytest.raises(InputError, match=r"1\.\.1000"):
        profile_for_share(_model("A100-80GB"), 0)


def _write(directory: Path, rows: list[list[object]]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / pod_file("default")).open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(POD_HEADER)
        writer.writerows(rows)
    return directory


def _row(name: str, gpus: int, milli: int, created: int = 0, deleted: object = 600) -> list[object]:
    return [name, 1000, 1024, gpus, milli, "", "LS", "Running", created, deleted, created]


def test_only_fractional_tasks_enter_by_default_with_their_lifetimes(tmp_path: Path) -> None:
    trace = _write(
        tmp_path,
        [
            _row("a", 1, 470, 100, 1000),
            _row("b", 1, 1000),
            _row("c", 4, 1000),
            _row("d", 0, 0),
            _row("e", 1, 230, 5, ""),
        ],
    )
    population = load_tasks(trace)
    assert [(t.name, t.share_milli, t.duration_s) for t in population.tasks] == [
        ("a", 470, 900),
        ("e", 230, None),
    ]
    assert population.left_out == {"cpu-only": 1, "multi-GPU": 1, "whole-GPU": 1}
    whole = load_tasks(trace, whole_gpu=True)
    assert [t.name for t in whole.tasks] == ["a", "b", "e"] and whole.left_out["whole-GPU"] == 0


def test_a_task_leaving_before_it_came_is_an_input_error(tmp_path: Path) -> None:
    trace = _write(tmp_path, [_row("a", 1, 470, 900, 100)])
    with pytest.raises(InputError, match="deletion_time") as info:
        load_tasks(trace)
    assert "row 2" in str(info.value)


def test_lifetimes_round_up_to_whole_windows() -> None:
    assert [lifetime_windows(d, 900) for d in (0, 1, 900, 901)] == [1, 1, 1, 2]
    assert lifetime_windows(None, 900) == NEVER


def _population() -> TaskPopulation:
    tasks = (TaskDraw("a", 470, 1800), TaskDraw("b", 230, 600), TaskDraw("c", 810, 5400))
    return TaskPopulation(tasks, {})


def test_a_trace_is_seeded_and_grows_with_the_load() -> None:
    model = _model("A100-80GB")
    one = build_trace(_population(), model, 16, 3, windows=10, window_s=900, load=1.0)
    again = build_trace(_population(), model, 16, 3, windows=10, window_s=900, load=1.0)
    other = build_trace(_population(), model, 16, 4, windows=10, window_s=900, load=1.0)
    double = build_trace(_population(), model, 16, 3, windows=10, window_s=900, load=2.0)
    assert one == again and one.requests != other.requests
    assert len(double.requests) > 1.5 * len(one.requests)
    assert all(0 <= r.arrival < 10 for r in one.requests)
    assert [r.arrival for r in one.requests] == sorted(r.arrival for r in one.requests)
    durations = {"a": 2, "b": 1, "c": 6}
    profiles = {"a": "3g.40gb", "b": "1g.20gb", "c": "7g.80gb"}
    assert all(r.duration == durations[r.task] and r.profile == profiles[r.task] for r in one.requests)


def test_offered_load_matches_the_pool() -> None:
    model = _model("A100-80GB")
    trace = build_trace(_population(), model, 64, 1, windows=200, window_s=900, load=1.0)
    size = {p.name: p.memory_slices for p in model.profiles}
    offered = sum(size[r.profile] * r.duration for r in trace.requests)
    assert 0.85 < offered / (64 * 8 * 200) < 1.15
