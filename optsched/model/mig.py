"""MIG state the planner reads and the layout changes it decides, as plain values.

A MIG-enabled GPU is its instances: each a profile at a start on the 8-slice
memory axis, some held by running pods. The planner may give such a GPU a new
layout when nothing would be destroyed that a pod holds (instances in use stay
where they are) and nothing else is changing it; :attr:`MigGpu.hold` says why
it may not. The placement rules live in :mod:`optsched.mig`; these types only
carry facts and decisions, so the snapshot, the solver, the plan and
``check_plan`` share them.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from optsched.model.names import MIG_PREFIX
from optsched.model.scheduling import Frozen

_COMPUTE = re.compile(re.escape(MIG_PREFIX) + r"([1-9])g\.")


def compute_slices(resource: str) -> int:
    """Compute slices a ``nvidia.com/mig-<N>g.<M>gb`` resource names (N); 0 for any other name."""
    found = _COMPUTE.match(resource)
    return int(found.group(1)) if found else 0


def mig_resource(profile: str) -> str:
    """The extended resource of a profile under NVIDIA's mixed strategy (``+`` becomes ``.``)."""
    return MIG_PREFIX + profile.replace("+", ".")


class MigInstanceState(Frozen):
    """One GPU instance as the node agent reports it."""

    profile: str = Field(min_length=1)
    """NVIDIA's profile name: ``1g.10gb``, ``3g.40gb``, ``1g.10gb+me``."""
    start: int = Field(ge=0, le=7)
    """First memory slice it occupies."""
    uuid: str = ""
    in_use: bool = False
    """A container holds it (kubelet's PodResources, or a pod bound to it)."""


class MigGpu(Frozen):
    """One MIG-enabled GPU of a node: its model, its instances, and whether its layout may change."""

    index: int = Field(ge=0)
    uuid: str = ""
    model: str = ""
    """The MIG model in optsched's profile table (``A100-80GB``); empty where the GPU matches none."""
    instances: tuple[MigInstanceState, ...] = ()
    hold: str = ""
    """Why the planner must leave this layout as it is ("" = it may change): a change in flight, a
    failed change, an unknown model, a layout the table refuses."""
    changing: bool = False
    """A layout change is in flight: the agent may destroy its free instances at any moment, so none
    of them is handed out."""

    @property
    def in_use(self) -> tuple[MigInstanceState, ...]:
        return tuple(i for i in self.instances if i.in_use)

    def resources(self, *, free_only: bool = False) -> dict[str, int]:
        """Per MIG resource: its instances (only those no pod uses, with ``free_only``)."""
        out: dict[str, int] = {}
        for instance in self.instances:
            if not (free_only and instance.in_use):
                name = mig_resource(instance.profile)
                out[name] = out.get(name, 0) + 1
        return out

    @property
    def unavailable(self) -> dict[str, int]:
        """Per MIG resource: free instances no pod may be given (those of a GPU that is changing)."""
        return self.resources(free_only=True) if self.changing else {}

    def held(self, why: str) -> MigGpu:
        """This GPU with its layout held for ``why``, unless it is held already (the first reason stays)."""
        return self if self.hold else self.model_copy(update={"hold": why})

    @property
    def layout(self) -> tuple[tuple[str, int], ...]:
        """``(profile, start)`` of every instance, in start order: the value a change compares."""
        return tuple(sorted((i.profile, i.start) for i in self.instances))


class _PlanValue(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid")


class MigSlotView(_PlanValue):
    """One instance of a layout in the plan: ``{"profile", "start"}``."""

    profile: str = Field(min_length=1)
    start: int = Field(ge=0, le=7)


class MigChange(_PlanValue):
    """One GPU whose MIG layout the plan changes: what is there now and what it becomes.

    Serialises as ``{"node", "gpu", "uuid", "from": [...], "to": [...]}``; the
    agent applies ``to`` through ``NodeGPUs.spec.migLayout``.
    """

    node: str = Field(min_length=1)
    gpu: int = Field(ge=0)
    uuid: str = ""
    from_: tuple[MigSlotView, ...] = Field(default=(), alias="from")
    to: tuple[MigSlotView, ...] = ()

    @property
    def destroyed(self) -> tuple[MigSlotView, ...]:
        """Instances in ``from`` the change removes."""
        return tuple(s for s in self.from_ if s not in self.to)

    @property
    def resource_delta(self) -> dict[str, int]:
        """Per MIG resource: instances the change adds (negative: removes); zeros left out."""
        out: dict[str, int] = {}
        for slot, step in [*((s, 1) for s in self.to), *((s, -1) for s in self.from_)]:
            name = mig_resource(slot.profile)
            out[name] = out.get(name, 0) + step
        return {name: delta for name, delta in sorted(out.items()) if delta}


def slots(layout: tuple[tuple[str, int], ...] | list[tuple[str, int]]) -> tuple[MigSlotView, ...]:
    """Plan views of ``(profile, start)`` pairs, in start order."""
    return tuple(MigSlotView(profile=p, start=s) for p, s in sorted(layout, key=lambda x: (x[1], x[0])))
