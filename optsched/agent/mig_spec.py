"""The desired MIG layout (``NodeGPUs.spec.migLayout``) and its apply state, read tolerantly.

The spec is written by the controller or a person: anything there is checked
before the agent acts on it. A malformed spec never reaches the hardware; it
becomes a ``Failed`` state whose message names the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from optsched.mig.layout import MigSlot

MAX_INSTANCES_PER_GPU = 8


class MigSpecError(ValueError):
    """``spec.migLayout`` cannot be read; the message names the field and what was expected."""


@dataclass(frozen=True)
class MigStatus:
    """``status.migLayout``: Pending | Applying | Success | Failed, with the generation it answers."""

    state: str
    message: str
    observed_generation: int

    def as_dict(self) -> dict[str, Any]:
        return {"state": self.state, "message": self.message, "observedGeneration": self.observed_generation}


def _int(value: object, field: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise MigSpecError(f"{field}: expected an integer {low}..{high}, got {value!r}")
    return value


def _slots(raw: object, field: str) -> list[MigSlot]:
    if not isinstance(raw, list) or len(raw) > MAX_INSTANCES_PER_GPU:
        raise MigSpecError(f"{field}: expected a list of at most {MAX_INSTANCES_PER_GPU} instances")
    slots = []
    for number, item in enumerate(raw):
        where = f"{field}[{number}]"
        if not isinstance(item, dict) or set(item) - {"profile", "start"}:
            raise MigSpecError(f"{where}: expected {{profile, start}}, got {item!r}")
        profile = item.get("profile")
        if not isinstance(profile, str) or not 0 < len(profile) <= 32:
            raise MigSpecError(f"{where}.profile: expected a MIG profile name such as 1g.10gb")
        slots.append(MigSlot(profile, _int(item.get("start"), f"{where}.start", 0, 7)))
    return slots


def desired_layout(spec: Mapping[str, Any], gpu_count: int) -> dict[int, list[MigSlot]] | None:
    """GPU index -> the instances wanted on it; None when the spec asks nothing of MIG."""
    raw = spec.get("migLayout")
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise MigSpecError("spec.migLayout: expected a list of {gpu, instances}")
    out: dict[int, list[MigSlot]] = {}
    for number, entry in enumerate(raw):
        where = f"spec.migLayout[{number}]"
        if gpu_count == 0:
            raise MigSpecError(f"{where}: the node has no GPUs")
        if not isinstance(entry, dict) or set(entry) - {"gpu", "instances"}:
            raise MigSpecError(f"{where}: expected {{gpu, instances}}, got {entry!r}")
        gpu = _int(entry.get("gpu"), f"{where}.gpu", 0, max(gpu_count - 1, 0))
        if gpu in out:
            raise MigSpecError(f"{where}.gpu: GPU {gpu} is listed twice")
        out[gpu] = _slots(entry.get("instances", []), f"{where}.instances")
    return out


def previous_status(status: Mapping[str, Any]) -> MigStatus | None:
    raw = status.get("migLayout")
    if not isinstance(raw, dict):
        return None
    generation = raw.get("observedGeneration")
    return MigStatus(
        str(raw.get("state", "")),
        str(raw.get("message", "")),
        generation if isinstance(generation, int) and not isinstance(generation, bool) else 0,
    )
