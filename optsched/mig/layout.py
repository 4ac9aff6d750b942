"""MIG layouts on one GPU: is a set of instances placeable, and what a node then advertises.

A layout is a list of :class:`MigSlot` (a profile at a start on the 8-slice
memory axis). :func:`layout_problems` checks it against a model's profile
table the way the hardware would refuse it (NVML refuses an unknown profile, a
start it does not list, an overlap with occupied slices, a profile past its
instance count), and says every reason at once, so a person or the controller
can fix a layout in one go. :func:`mixed_strategy_resources` names the
extended resources NVIDIA's device plugin advertises for the instances under
its ``mixed`` MIG strategy.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from optsched.mig.profiles import MigModel, MigProfile
from optsched.model.mig import mig_resource


@dataclass(frozen=True, order=True)
class MigSlot:
    """One GPU instance in a layout: ``profile`` (``3g.40gb``) starting at memory slice ``start``."""

    profile: str
    start: int

    def __str__(self) -> str:
        return f"{self.profile} at start {self.start}"


def layout_problems(model: MigModel, slots: Sequence[MigSlot]) -> list[str]:
    """Every reason ``slots`` cannot sit on one GPU of ``model``, one sentence each; [] when it can."""
    problems: list[str] = []
    placed: list[tuple[MigSlot, MigProfile]] = []
    for slot in slots:
        profile = model.profile(slot.profile)
        if profile is None:
            problems.append(
                f"{slot}: {model.name} has no MIG profile {slot.profile!r} "
                f"(its profiles: {', '.join(model.profile_names)})"
            )
            continue
        problems.extend(_placement_problems(model, slot, profile))
        placed.append((slot, profile))
    problems.extend(_overlaps(placed))
    problems.extend(_over_cap(model, placed))
    compute = sum(profile.compute for _, profile in placed)
    if compute > model.compute_slices:
        problems.append(
            f"the instances need {compute} compute slices; {model.name} has {model.compute_slices}"
        )
    return problems


def _placement_problems(model: MigModel, slot: MigSlot, profile: MigProfile) -> list[str]:
    problems = []
    if slot.start not in profile.starts:
        allowed = ", ".join(str(s) for s in profile.starts)
        problems.append(
            f"{slot}: {profile.name} cannot start at memory slice {slot.start} on {model.name} "
            f"(allowed starts: {allowed})"
        )
    last = slot.start + profile.memory_slices - 1
    if slot.start < 0 or last > model.memory_slices - 1:
        problems.append(
            f"{slot}: it would occupy memory slices {slot.start}..{last}, outside slices "
            f"0..{model.memory_slices - 1}"
        )
    return problems


def _span(slot: MigSlot, profile: MigProfile) -> range:
    return range(slot.start, slot.start + profile.memory_slices)


def _overlaps(placed: Sequence[tuple[MigSlot, MigProfile]]) -> list[str]:
    problems = []
    for i, (a, pa) in enumerate(placed):
        for b, pb in placed[i + 1 :]:
            shared = sorted(set(_span(a, pa)) & set(_span(b, pb)))
            if shared:
                where = f"slice {shared[0]}" if len(shared) == 1 else f"slices {shared[0]}..{shared[-1]}"
                problems.append(f"{a} and {b} overlap on memory {where}")
    return problems


def _over_cap(model: MigModel, placed: Sequence[tuple[MigSlot, MigProfile]]) -> list[str]:
    counts = Counter(profile.name for _, profile in placed)
    problems = []
    for name, count in sorted(counts.items()):
        profile = model.profile(name)
        if profile is not None and count > profile.max_instances:
            problems.append(
                f"{count} instances of {name}: at most {profile.max_instances} fit on one {model.name}"
            )
    return problems


def resource_name(profile: str) -> str:
    """The extended resource for a profile under NVIDIA's mixed strategy (``+`` becomes ``.``)."""
    return mig_resource(profile)


def mixed_strategy_resources(slots_per_gpu: Mapping[int, Sequence[str]]) -> dict[str, int]:
    """How many of each ``nvidia.com/mig-<profile>`` a node advertises, given each GPU's instance profiles.

    Under the ``mixed`` strategy NVIDIA's device plugin advertises every MIG
    device as its own profile's resource: ``nvidia.com/mig-1g.10gb``; a media
    extension profile ``1g.10gb+me`` as ``nvidia.com/mig-1g.10gb.me`` (a
    resource name may not hold ``+``).
    """
    counts = Counter(resource_name(p) for profiles in slots_per_gpu.values() for p in profiles)
    return dict(sorted(counts.items()))
