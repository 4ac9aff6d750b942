"""The MIG part of a ``NodeGPUs`` object: each MIG-enabled GPU's instances, and whether it may change.

The agent reports per GPU ``mig: {capable, enabled, instances: [{profile,
start, uuid, inUse}]}``; ``spec.migLayout`` is the layout asked of it (by the
controller or a person) and ``status.migLayout`` the state of that request.
The planner may give a GPU a new layout only when its layout is settled and
legal, so each GPU gets a :attr:`~optsched.model.mig.MigGpu.hold` naming why
it may not:

- its product matches no model of the profile table, or its instances break
  the table's rules (a layout optsched cannot reason about is left alone);
- the spec asks it for another layout and the agent has not answered that
  generation with ``Success``: the change is in flight (``Pending`` or
  ``Applying``), or it ``Failed`` (the planner then leaves it alone and plans
  around it; the failure message is the hold).

Fields of the wrong type are an :class:`~optsched.errors.InputError` naming
the field, like the rest of the object.
"""

from __future__ import annotations

from typing import Any

from optsched.errors import InputError
from optsched.mig.layout import MigSlot, layout_problems
from optsched.mig.profiles import model_for
from optsched.model.mig import MigGpu, MigInstanceState
from optsched.model.names import MIG_PREFIX
from optsched.model.snapshot import Node
from optsched.snapshot.fields import as_list, as_map, as_str, describe, get_int, get_list, get_map

MAX_START = 7


def _instance(entry: Any, *, obj: dict[str, Any], where: str) -> MigInstanceState:
    item = as_map(entry, obj=obj, field=where)
    profile = as_str(item.get("profile"), obj=obj, field=f"{where}.profile")
    start = item.get("start")
    if not profile:
        raise InputError(
            "expected a MIG profile name such as 1g.10gb", obj=describe(obj), field=f"{where}.profile"
        )
    if isinstance(start, bool) or not isinstance(start, int) or not 0 <= start <= MAX_START:
        raise InputError(
            f"expected a memory slice 0..{MAX_START}, got {start!r}",
            obj=describe(obj),
            field=f"{where}.start",
        )
    in_use = item.get("inUse", False)
    if not isinstance(in_use, bool):
        raise InputError(f"expected true or false, got {in_use!r}", obj=describe(obj), field=f"{where}.inUse")
    return MigInstanceState(
        profile=profile,
        start=start,
        uuid=as_str(item.get("uuid"), obj=obj, field=f"{where}.uuid"),
        in_use=in_use,
    )


def _desired(obj: dict[str, Any]) -> dict[int, tuple[tuple[str, int], ...]]:
    """``spec.migLayout`` as GPU index -> sorted ``(profile, start)``; unreadable entries are skipped.

    The agent refuses a malformed spec itself (``Failed`` with the field); here
    it only tells which GPUs are asked to change.
    """
    out: dict[int, tuple[tuple[str, int], ...]] = {}
    for entry in get_list(obj, "spec.migLayout"):
        if not isinstance(entry, dict) or not isinstance(entry.get("gpu"), int):
            continue
        instances = entry.get("instances") or []
        pairs = [
            (str(i.get("profile", "")), i.get("start"))
            for i in (instances if isinstance(instances, list) else [])
            if isinstance(i, dict)
        ]
        out[entry["gpu"]] = tuple(sorted((p, s) for p, s in pairs if isinstance(s, int)))
    return out


def _change_hold(obj: dict[str, Any], index: int, current: tuple[tuple[str, int], ...]) -> tuple[str, bool]:
    """Why a GPU the spec asks to change is held ("" when it is not asked or already there), and
    whether the change is still in flight (not failed)."""
    desired = _desired(obj)
    if index not in desired or desired[index] == current:
        return "", False
    status = get_map(obj, "status.migLayout")
    generation = get_int(obj, "metadata.generation", default=0) or 0
    state = str(status.get("state", ""))
    observed = status.get("observedGeneration")
    if state == "Failed" and observed == generation:
        message = str(status.get("message", ""))[:300]
        why = (
            f"its last MIG layout change failed ({message}); it keeps its layout until spec.migLayout changes"
        )
        return why, False
    answered = f"{state or 'no state'}" + (
        f", generation {observed} of {generation}" if observed != generation else ""
    )
    return f"a MIG layout change is in flight ({answered})", True


def read_mig_gpu(
    entry: dict[str, Any], *, obj: dict[str, Any], where: str, index: int, uuid: str
) -> MigGpu | None:
    """The MIG state of one ``status.gpus[i]`` entry; None where MIG is not enabled on it."""
    mig = as_map(entry.get("mig"), obj=obj, field=f"{where}.mig")
    if mig.get("enabled") is not True:
        return None
    raw = as_list(mig.get("instances"), obj=obj, field=f"{where}.mig.instances")
    instances = tuple(
        _instance(item, obj=obj, where=f"{where}.mig.instances[{n}]") for n, item in enumerate(raw)
    )
    product = as_str(entry.get("product"), obj=obj, field=f"{where}.product")
    memory = entry.get("memoryMiB")
    model = model_for(product, memory if isinstance(memory, int) and not isinstance(memory, bool) else 0)
    gpu = MigGpu(index=index, uuid=uuid, model=model.name if model else "", instances=instances)
    if model is None:
        hold = f"its product {product!r} matches no model of optsched's MIG profile table"
    else:
        problems = layout_problems(model, [MigSlot(i.profile, i.start) for i in instances])
        hold = f"its current layout breaks the placement rules ({'; '.join(problems)})" if problems else ""
    change, changing = _change_hold(obj, index, gpu.layout)
    if hold or change:
        return gpu.model_copy(update={"hold": hold or change, "changing": changing})
    return gpu


def advertised_as_reported(node: Node) -> Node:
    """The node with its MIG allocatable no higher than the instances its NodeGPUs reports.

    After a layout change NVIDIA's device plugin advertises the new instances
    only once it has restarted: until then the Node's ``nvidia.com/mig-*``
    counts and the GPUs' instances disagree. Each profile then counts the
    smaller of the two (a pod is never promised an instance that is gone or
    not yet advertised), and no MIG GPU of the node gets a new layout until
    they agree, so changes are not stacked on one the node has not taken up.
    """
    if not node.mig_gpus:
        return node
    reported: dict[str, int] = {}
    for gpu in node.mig_gpus:
        for name, count in gpu.resources().items():
            reported[name] = reported.get(name, 0) + count
    advertised = {k: v for k, v in node.extended.items() if k.startswith(MIG_PREFIX)}
    if advertised == reported:
        return node
    extended = {k: v for k, v in node.extended.items() if not k.startswith(MIG_PREFIX)}
    extended.update({k: min(v, reported.get(k, 0)) for k, v in advertised.items()})
    differ = ", ".join(
        f"{k.removeprefix(MIG_PREFIX)} {advertised.get(k, 0)} advertised / {reported.get(k, 0)} reported"
        for k in sorted(set(advertised) | set(reported))
        if advertised.get(k, 0) != reported.get(k, 0)
    )
    why = f"the node does not advertise its GPUs' MIG instances yet ({differ})"
    gpus = tuple(g.held(why) for g in node.mig_gpus)
    return node.model_copy(update={"extended": extended, "mig_gpus": gpus})
