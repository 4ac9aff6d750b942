"""The MIG part of an agent pass: from ``spec.migLayout`` to a state, applying on the pass after ``Applying``.

The states follow NVIDIA's mig-manager (``pending`` -> ``success``/``failed``)
with one more step: a change is first published as ``Applying`` and made on
the next pass, so the controller sees a GPU leave service before it changes.
``Pending`` means the change waits for pods to leave the GPUs (the controller
drains by no longer planning there); ``Failed`` is not retried until the spec
changes (its ``metadata.generation`` moves). An apply interrupted by a crash
is rolled back on the agent's first pass, then made again.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from optsched.agent.devices import Discovery
from optsched.agent.mig_apply import apply_layout, changed_gpus
from optsched.agent.mig_spec import MigSpecError, MigStatus, desired_layout, previous_status
from optsched.agent.podresources import PodDevices
from optsched.agent.publish import device_index
from optsched.mig.layout import MigSlot, layout_problems
from optsched.mig.profiles import model_for
from optsched.model.events import EventType
from optsched.model.names import MIG_PREFIX

if TYPE_CHECKING:  # the agent holds the backend and journal this step uses; imported for types only
    from optsched.agent.cycle import NodeAgent, NodeView


MAX_INTERRUPTIONS = 3
"""Crashes in the middle of one layout's apply before it is given up as Failed."""


@dataclass(frozen=True)
class MigEvent:
    reason: str
    message: str
    type: EventType = EventType.NORMAL


@dataclass(frozen=True)
class MigOutcome:
    status: MigStatus | None
    events: tuple[MigEvent, ...] = ()
    changed: bool = False


@dataclass
class _Events:
    items: list[MigEvent] = field(default_factory=list)

    def add(self, reason: str, message: str, kind: EventType = EventType.NORMAL) -> None:
        self.items.append(MigEvent(reason, message, kind))


def _slice_users(pods: Sequence[Mapping[str, Any]], discovery: Discovery) -> dict[int, list[str]]:
    """GPUs offering a MIG profile some pod on the node asks for: busy, whichever slice it got.

    A simulated node hands out no MIG devices, so which slice a pod holds is
    unknown there; every GPU with an instance of its profile is kept as it is.
    """
    out: dict[int, list[str]] = {}
    for pod in pods:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        wanted = {
            key.removeprefix(MIG_PREFIX)
            for container in spec.get("containers") or []
            if isinstance(container, dict)
            for part in ("limits", "requests")
            for key in (container.get("resources") or {}).get(part) or {}
            if isinstance(key, str) and key.startswith(MIG_PREFIX)
        }
        for gpu in discovery.gpus:
            if wanted & {m.profile for m in gpu.mig_instances}:
                out.setdefault(gpu.index, []).append(f"{meta.get('namespace', '')}/{meta.get('name', '')}")
    return out


def _busy(
    held: Sequence[PodDevices], discovery: Discovery, pods: Sequence[Mapping[str, Any]]
) -> dict[int, list[str]]:
    """GPU index -> the pods holding it (whole or a slice of it)."""
    index = device_index(discovery)
    out = _slice_users(pods, discovery)
    for pod in held:
        for container in pod.containers:
            for _, ids in container.devices:
                for device in ids:
                    if device in index:
                        out.setdefault(index[device], []).append(f"{pod.namespace}/{pod.name}")
    for gpu in discovery.gpus:
        if any(m.in_use for m in gpu.mig_instances):
            out.setdefault(gpu.index, []).append("a process using one of its MIG instances")
    return out


def _interruptions(agent: NodeAgent, generation: int, rolled_back: bool) -> int:
    """How often an apply of this generation was cut short by a crash (kept beside the journal)."""
    assert agent.journal is not None
    path = agent.journal.with_name("mig-interrupted.json")
    try:
        seen = json.loads(path.read_text())
        count = int(seen["interrupted"]) if seen.get("generation") == generation else 0
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        count = 0
    if rolled_back:
        count += 1
        with contextlib.suppress(OSError):
            path.write_text(json.dumps({"generation": generation, "interrupted": count}))
    return count


def mig_step(
    agent: NodeAgent,
    view: NodeView,
    discovery: Discovery,
    held: Sequence[PodDevices],
    *,
    rolled_back: bool = False,
) -> MigOutcome:
    """This pass's MIG state; ``rolled_back``: an interrupted apply was just undone."""
    events = _Events()
    node_gpus: Mapping[str, Any] = view.node_gpus or {}
    generation = int((node_gpus.get("metadata") or {}).get("generation") or 0)
    raw_status, raw_spec = node_gpus.get("status"), node_gpus.get("spec")
    previous = previous_status(raw_status if isinstance(raw_status, dict) else {})
    spec: Mapping[str, Any] = raw_spec if isinstance(raw_spec, dict) else {}
    try:
        desired = desired_layout(spec, len(discovery.gpus))
    except MigSpecError as exc:
        return _failed(generation, str(exc), previous, events)
    if desired is None:
        return MigOutcome(None, tuple(events.items))
    if previous and previous.observed_generation == generation and previous.state == "Failed":
        return MigOutcome(previous, tuple(events.items))
    changed = list(changed_gpus({g.index: g.mig_instances for g in discovery.gpus}, desired))
    if not changed:
        done = MigStatus("Success", "the layout is applied", generation)
        return MigOutcome(done, tuple(events.items))
    problems = _problems(desired, changed, discovery, simulated=agent.simulated)
    if _interruptions(agent, generation, rolled_back) >= MAX_INTERRUPTIONS:
        problems.append(f"an apply of this layout was interrupted {MAX_INTERRUPTIONS} times; not retried")
    if problems:
        return _failed(generation, "; ".join(problems), previous, events)
    busy = _busy(held, discovery, view.pods)
    waiting = {gpu: busy[gpu] for gpu in changed if gpu in busy}
    if waiting:
        who = "; ".join(f"GPU {g}: {', '.join(sorted(set(p)))}" for g, p in sorted(waiting.items()))
        return MigOutcome(
            MigStatus("Pending", f"waiting for the GPUs to be idle ({who})", generation), tuple(events.items)
        )
    if not (previous and previous.state == "Applying" and previous.observed_generation == generation):
        message = f"changing GPUs {', '.join(str(g) for g in changed)}"
        return MigOutcome(MigStatus("Applying", message, generation), tuple(events.items))
    return _apply(agent, desired, changed, discovery, generation, events)


def _problems(
    desired: Mapping[int, Sequence[MigSlot]], changed: list[int], discovery: Discovery, *, simulated: bool
) -> list[str]:
    """Why the wanted layout cannot be made, found before any GPU leaves service."""
    out = []
    for gpu in changed:
        device = discovery.by_index(gpu)
        model = model_for(device.product, device.memory_mib)
        if model is None or not device.mig_capable:
            out.append(f"GPU {gpu} ({device.product}) does not support MIG")
            continue
        if not simulated and not device.mig_enabled:
            out.append(
                f"GPU {gpu}: MIG mode is off (enabling it needs a GPU reset: nvidia-smi -i {gpu} -mig 1)"
            )
            continue
        out.extend(f"GPU {gpu}: {problem}" for problem in layout_problems(model, desired[gpu]))
    return out


def _apply(
    agent: NodeAgent,
    desired: Mapping[int, Sequence[MigSlot]],
    changed: list[int],
    discovery: Discovery,
    generation: int,
    events: _Events,
) -> MigOutcome:
    assert agent.journal is not None
    models = {g.index: model_for(g.product, g.memory_mib) for g in discovery.gpus}
    wanted = {gpu: list(desired[gpu]) for gpu in changed}
    result = apply_layout(agent.backend.mig, models, wanted, frozenset(), agent.journal)
    if result.state == "Success":
        events.add("MIGLayoutApplied", f"MIG layout applied on GPUs {', '.join(map(str, result.changed))}")
        return MigOutcome(MigStatus("Success", result.message, generation), tuple(events.items), True)
    events.add("MIGLayoutFailed", result.message, EventType.WARNING)
    return MigOutcome(MigStatus("Failed", result.message, generation), tuple(events.items), True)


def _failed(generation: int, message: str, previous: MigStatus | None, events: _Events) -> MigOutcome:
    if not (previous and previous.state == "Failed" and previous.observed_generation == generation):
        events.add("MIGLayoutFailed", message, EventType.WARNING)
    return MigOutcome(MigStatus("Failed", message, generation), tuple(events.items))
