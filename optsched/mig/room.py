"""How much of one profile a GPU could hold once re-laid out around the instances it must keep.

The planner asks this before it builds a model: a node is a candidate for a
``nvidia.com/mig-3g.40gb`` pod when one of its GPUs could be given a 3g
instance, not only when one exists. The answer is exact for one profile at a
time (instances of one profile have one size, so taking free starts from the
left is a largest set of non-overlapping ones) and capped by the compute
slices and the profile's instance limit.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

from optsched.mig.layout import MigSlot
from optsched.mig.profiles import MigModel, MigProfile, models


@cache
def model_named(name: str) -> MigModel | None:
    """The profile table's model called ``name`` (``A100-80GB``); None if there is none."""
    return next((m for m in models() if m.name == name), None)


def occupied(model: MigModel, slots: Sequence[MigSlot]) -> set[int]:
    """Memory slices the instances take (unknown profiles take none)."""
    taken: set[int] = set()
    for slot in slots:
        profile = model.profile(slot.profile)
        if profile is not None:
            taken.update(range(slot.start, slot.start + profile.memory_slices))
    return taken


def most_instances(model: MigModel, profile: MigProfile, kept: Sequence[MigSlot]) -> int:
    """Most instances of ``profile`` a legal layout that keeps every instance in ``kept`` can hold.

    The kept instances of ``profile`` count; the others only take their memory
    and compute slices.
    """
    taken = occupied(model, kept)
    own = sum(1 for s in kept if s.profile == profile.name)
    compute_left = model.compute_slices - sum(
        p.compute for p in (model.profile(s.profile) for s in kept) if p is not None
    )
    added = 0
    end = -1
    for start in profile.starts:
        span = range(start, start + profile.memory_slices)
        if start > end and not taken.intersection(span):
            added += 1
            end = span[-1]
    cap = min(added, compute_left // profile.compute, profile.max_instances - own)
    return own + max(0, cap)
