"""Most instances of one profile a GPU could hold around the instances it keeps."""

from __future__ import annotations

from itertools import combinations

import pytest

from optsched.mig.layout import MigSlot, layout_problems
from optsched.mig.profiles import MigModel, models
from optsched.mig.room import model_named, most_instances


def _h100() -> MigModel:
    model = model_named("H100-80GB")
    assert model is not None
    return model


def test_an_idle_gpu_holds_each_profile_up_to_its_cap() -> None:
    model = _h100()
    expected = {"1g.10gb": 7, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1}
    for name, count in expected.items():
        profile = model.profile(name)
        assert profile is not None and most_instances(model, profile, []) == count, name


def test_kept_instances_take_their_slices_and_compute() -> None:
    model = _h100()
    three, one = model.profile("3g.40gb"), model.profile("1g.10gb")
    assert three is not None and one is not None
    assert most_instances(model, three, [MigSlot("1g.10gb", 3)]) == 1  # only start 4 is left
    assert most_instances(model, three, [MigSlot("1g.10gb", 3), MigSlot("1g.10gb", 5)]) == 0
    # Kept: 4g at 0 (compute 4); 1g at 4, 5, 6 would fit the memory, and the compute allows 3.
    assert most_instances(model, one, [MigSlot("4g.40gb", 0)]) == 3
    assert most_instances(model, one, [MigSlot("1g.10gb", 0)]) == 7  # the kept one counts


@pytest.mark.parametrize("model", models(), ids=lambda m: m.name)
def test_the_count_is_exact_against_brute_force(model: MigModel) -> None:
    # Every kept set of up to two placements, every profile: the most legal instances by enumeration.
    placements = [MigSlot(p.name, s) for p in model.profiles for s in p.starts]
    kept_sets = [list(c) for k in (0, 1, 2) for c in combinations(placements, k)]
    for kept in kept_sets[:: max(1, len(kept_sets) // 120)]:
        if layout_problems(model, kept):
            continue
        for profile in model.profiles:
            extra = [MigSlot(profile.name, s) for s in profile.starts if MigSlot(profile.name, s) not in kept]
            best = 0
            for k in range(len(extra), -1, -1):
                if any(not layout_problems(model, [*kept, *c]) for c in combinations(extra, k)):
                    best = k
                    break
            own = sum(1 for s in kept if s.profile == profile.name)
            assert most_instances(model, profile, kept) == own + best, (model.name, profile.name, kept)
