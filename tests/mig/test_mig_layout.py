"""MIG layout rules on every model: what fits on the 8-slice memory axis, and why the rest does not."""

from __future__ import annotations

import re

import pytest

from optsched.mig.layout import MigSlot, layout_problems, mixed_strategy_resources, resource_name
from optsched.mig.profiles import MigModel, MigProfile, models

MODELS = models()


def _name(model: MigModel, compute: int, slices: int, me: bool = False) -> str:
    """The model's profile with that shape (so one test reads the same on every model)."""
    [profile] = [
        p
        for p in model.profiles
        if p.compute == compute and p.memory_slices == slices and p.name.endswith("+me") == me
    ]
    return profile.name


def _slots(model: MigModel, *shapes: tuple[int, int, int]) -> list[MigSlot]:
    """Slots from (compute, memory slices, start) shapes."""
    return [MigSlot(_name(model, c, m), s) for c, m, s in shapes]


VALID = {
    "seven 1g": [(1, 1, s) for s in range(7)],
    "four 1g with two memory slices": [(1, 2, s) for s in (0, 2, 4, 6)],
    "4g@0 + 3g@4": [(4, 4, 0), (3, 4, 4)],
    "3g@0 + 3g@4": [(3, 4, 0), (3, 4, 4)],
    "2g@0 + 2g@2 + 3g@4": [(2, 2, 0), (2, 2, 2), (3, 4, 4)],
    "3g@0 + 2g@4 + 1g(2 slices)@6": [(3, 4, 0), (2, 2, 4), (1, 2, 6)],
    "three 2g + 1g@6": [(2, 2, 0), (2, 2, 2), (2, 2, 4), (1, 1, 6)],
    "7g": [(7, 8, 0)],
    "nothing": [],
}


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.name)
@pytest.mark.parametrize("layout", VALID, ids=str)
def test_valid_layouts_have_no_problems(model: MigModel, layout: str) -> None:
    assert layout_problems(model, _slots(model, *VALID[layout])) == []


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.name)
def test_one_media_extension_1g_fits_beside_six_plain_ones(model: MigModel) -> None:
    slots = [MigSlot(_name(model, 1, 1, me=True), 0), *_slots(model, *[(1, 1, s) for s in range(1, 7)])]
    assert layout_problems(model, slots) == []


INVALID = {
    "2g@6": ([(2, 2, 6)], ["cannot start at memory slice 6", "(allowed starts: 0, 2, 4)"]),
    "4g@4": ([(4, 4, 4)], ["cannot start at memory slice 4", "(allowed starts: 0)"]),
    "3g@2": ([(3, 4, 2)], ["cannot start at memory slice 2", "(allowed starts: 0, 4)"]),
    "1g(2 slices)@1": ([(1, 2, 1)], ["cannot start at memory slice 1", "(allowed starts: 0, 2, 4, 6)"]),
    "1g(2 slices)@5": ([(1, 2, 5)], ["(allowed starts: 0, 2, 4, 6)"]),
    "1g@7": ([(1, 1, 7)], ["cannot start at memory slice 7", "(allowed starts: 0, 1, 2, 3, 4, 5, 6)"]),
    "2g@7 runs past slice 7": ([(2, 2, 7)], ["would occupy memory slices 7..8, outside slices 0..7"]),
    "a negative start": ([(1, 1, -1)], ["would occupy memory slices -1..-1, outside slices 0..7"]),
    "4g@0 + 2g@2": ([(4, 4, 0), (2, 2, 2)], ["overlap on memory slices 2..3"]),
    "3g@4 + 1g@6": ([(3, 4, 4), (1, 1, 6)], ["overlap on memory slice 6"]),
    "two 1g at one start": ([(1, 1, 3), (1, 1, 3)], ["overlap on memory slice 3"]),
    "7g + 1g": ([(7, 8, 0), (1, 1, 5)], ["overlap on memory slice 5", "need 8 compute slices", "has 7"]),
    "eight 1g": ([*[(1, 1, s) for s in range(7)], (1, 1, 6)], ["8 instances of", "at most 7 fit"]),
    "three 3g": ([(3, 4, 0), (3, 4, 4), (3, 4, 4)], ["3 instances of", "at most 2 fit"]),
    "five 1g(2 slices)": ([(1, 2, s) for s in (0, 2, 4, 6, 6)], ["5 instances of", "at most 4 fit"]),
}


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.name)
@pytest.mark.parametrize("layout", INVALID, ids=str)
def test_invalid_layouts_say_why(model: MigModel, layout: str) -> None:
    shapes, expected = INVALID[layout]
    problems = layout_problems(model, _slots(model, *shapes))
    assert problems, layout
    text = " | ".join(problems)
    for fragment in expected:
        assert fragment in text


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.name)
def test_two_media_extension_instances_are_refused(model: MigModel) -> None:
    me = _name(model, 1, 1, me=True)
    problems = layout_problems(model, [MigSlot(me, 0), MigSlot(me, 1)])
    assert problems == [f"2 instances of {me}: at most 1 fit on one {model.name}"]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.name)
def test_an_unknown_profile_lists_the_models_profiles(model: MigModel) -> None:
    problems = layout_problems(model, [MigSlot("5g.50gb", 0)])
    assert len(problems) == 1
    assert "5g.50gb at start 0" in problems[0]
    assert f"{model.name} has no MIG profile '5g.50gb'" in problems[0]
    assert all(p.name in problems[0] for p in model.profiles)


def test_an_overlap_names_both_slots() -> None:
    h100 = next(m for m in MODELS if m.name == "H100-80GB")
    problems = layout_problems(h100, [MigSlot("4g.40gb", 0), MigSlot("1g.20gb", 2)])
    assert problems == ["4g.40gb at start 0 and 1g.20gb at start 2 overlap on memory slices 2..3"]


def test_another_models_profile_name_is_unknown_here() -> None:
    a100_40 = next(m for m in MODELS if m.name == "A100-40GB")
    problems = layout_problems(a100_40, [MigSlot("3g.40gb", 0)])
    assert len(problems) == 1 and "has no MIG profile '3g.40gb'" in problems[0]


def test_every_problem_is_reported_at_once() -> None:
    a100 = next(m for m in MODELS if m.name == "A100-80GB")
    slots = [MigSlot("2g.20gb", 6), MigSlot("9g.90gb", 0), MigSlot("4g.40gb", 0), MigSlot("3g.40gb", 2)]
    problems = layout_problems(a100, slots)
    assert len(problems) == 5, problems
    assert sum("cannot start" in p for p in problems) == 2  # 2g@6 and 3g@2
    assert sum("overlap" in p for p in problems) == 1  # 4g@0 with 3g@2
    assert sum("no MIG profile" in p for p in problems) == 1
    assert sum("compute slices" in p for p in problems) == 1  # 2 + 4 + 3 = 9


def test_the_compute_limit_holds_without_any_overlap() -> None:
    wide = MigProfile("2g.1gb", 2, 1, 8, tuple(range(8)), 1024, "NVML_GPU_INSTANCE_PROFILE_2_SLICE", 14)
    toy = MigModel("toy", ("toy",), (wide,))
    assert layout_problems(toy, [MigSlot("2g.1gb", s) for s in range(3)]) == []
    assert layout_problems(toy, [MigSlot("2g.1gb", s) for s in range(4)]) == [
        "the instances need 8 compute slices; toy has 7"
    ]


def test_mixed_strategy_counts_each_profile_across_gpus() -> None:
    resources = mixed_strategy_resources(
        {0: ["1g.10gb", "1g.10gb", "3g.40gb"], 1: ["1g.10gb+me", "1g.10gb"], 2: []}
    )
    assert resources == {
        "nvidia.com/mig-1g.10gb": 3,
        "nvidia.com/mig-1g.10gb.me": 1,
        "nvidia.com/mig-3g.40gb": 1,
    }
    assert mixed_strategy_resources({}) == {}


def test_resource_names_are_valid_kubernetes_resource_names() -> None:
    grammar = re.compile(r"^nvidia\.com/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
    for model in MODELS:
        for profile in model.profiles:
            assert grammar.match(resource_name(profile.name)), profile.name
