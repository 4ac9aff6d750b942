"""MIG instances a node could gain by re-laying out its GPUs: what makes it a candidate for a slice.

A node advertises the instances that exist (``nvidia.com/mig-<profile>`` in
its allocatable). The planner may also give a MIG GPU a new layout, so for
choosing candidates and upper bounds a node counts, per profile, the
instances a new layout of each GPU it may change could add beyond the ones
there now (:func:`mig_headroom`); the solver's layout module then decides
which layouts are chosen and holds the pods to what they offer. A GPU the
snapshot holds (a change in flight, an unknown model) adds nothing.
"""

from __future__ import annotations

from optsched.mig.layout import MigSlot, resource_name
from optsched.mig.room import model_named, most_instances
from optsched.model.mig import MigGpu
from optsched.model.snapshot import Node


def plannable(node: Node) -> tuple[MigGpu, ...]:
    """The node's MIG GPUs whose layout the planner may change."""
    return tuple(g for g in node.mig_gpus if not g.hold and model_named(g.model) is not None)


def gpu_headroom(gpu: MigGpu) -> dict[str, int]:
    """Per MIG resource: instances a new layout of ``gpu`` could have beyond those it has now."""
    if gpu.hold:
        return {}
    return _room(gpu, [MigSlot(i.profile, i.start) for i in gpu.in_use])


def _room(gpu: MigGpu, kept: list[MigSlot]) -> dict[str, int]:
    """Per MIG resource: instances beyond the current ones a layout keeping ``kept`` could have."""
    model = model_named(gpu.model)
    if model is None:
        return {}
    now = gpu.resources()
    out: dict[str, int] = {}
    for profile in model.profiles:
        name = resource_name(profile.name)
        extra = most_instances(model, profile, kept) - now.get(name, 0)
        if extra > 0:
            out[name] = extra
    return out


def _plus(base: dict[str, int], rooms: list[dict[str, int]]) -> dict[str, int]:
    out = dict(base)
    for room in rooms:
        for name, extra in room.items():
            out[name] = out.get(name, 0) + extra
    return out


def mig_headroom(node: Node) -> dict[str, int]:
    """Per MIG resource: instances the node could gain by re-laying out the GPUs it may change."""
    return _plus({}, [gpu_headroom(gpu) for gpu in plannable(node)])


def potential_extended(node: Node) -> dict[str, int]:
    """The node's extended resources with the MIG headroom added: the most a plan could use."""
    if not node.mig_gpus:
        return node.extended
    return _plus(node.extended, [mig_headroom(node)])


def mig_ceiling(node: Node) -> dict[str, int]:
    """The node's extended resources with every MIG GPU of a known model counted as if re-laid out
    for each profile alone: the most it could ever offer, for judging whether a pod can ever fit."""
    if not node.mig_gpus:
        return node.extended
    return _plus(node.extended, [_room(gpu, []) for gpu in node.mig_gpus])
