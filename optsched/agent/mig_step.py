"""The MIG part of an agent pass: from ``spec.migLayout`` to a state, applying on the pass after ``Applying``.

The states follow NVIDIA's mig-manager (``pending`` -> ``success``/``failed``)
with one more step: a change is first published as ``Applying`` and made on
the next pass, so the controller sees a GPU leave service before it changes.
A change may go ahead while pods use other instances of the GPU: only the
instances it removes must be free (``optsched.agent.mig_users``), and the
instances it keeps are never touched. ``Pending`` means the change waits for
a removed instance (or a whole-GPU pod) to be given up, and names who holds
it; ``Failed`` is not retried until the spec changes (its
``metadata.generation`` moves). An apply interrupted by a crash is rolled
back on the agent's first pass, then made again.
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
from optsched.agent.mig_users import Holders, holders
from optsched.agent.podresources import PodDevices
from optsched.mig.layout import MigSlot, layout_problems
from optsched.mig.profiles import model_for
from optsched.model.events import EventType

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
    who = holders(held, discovery, view.pods)
    blocked = [
        reason
        for gpu in changed
        for reason in who.blocking(gpu, discovery.by_index(gpu).mig_instances, desired[gpu])
    ]
    if blocked:
        message = f"waiting until nothing uses what the change removes ({'; '.join(blocked)})"
        return MigOutcome(MigStatus("Pending", message, generation), tuple(events.items))
    if not (previous and previous.state == "Applying" and previous.observed_generation == generation):
        message = f"changing GPUs {', '.join(str(g) for g in changed)}"
        return MigOutcome(MigStatus("Applying", message, generation), tuple(events.items))
    return _apply(agent, desired, changed, discovery, who, generation, events)


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
    who: Holders,
    generation: int,
    events: _Events,
) -> MigOutcome:
    assert agent.journal is not None
    models = {g.index: model_for(g.product, g.memory_mib) for g in discovery.gpus}
    wanted = {gpu: list(desired[gpu]) for gpu in changed}
    result = apply_layout(agent.backend.mig, models, wanted, who, agent.journal)
    if result.state == "Success":
        events.add("MIGLayoutApplied", f"MIG layout applied on GPUs {', '.join(map(str, result.changed))}")
        return MigOutcome(MigStatus("Success", result.message, generation), tuple(events.items), True)
    events.add("MIGLayoutFailed", result.message, EventType.WARNING)
    return MigOutcome(MigStatus("Failed", result.message, generation), tuple(events.items), True)


def _failed(generation: int, message: str, previous: MigStatus | None, events: _Events) -> MigOutcome:
    if not (previous and previous.state == "Failed" and previous.observed_generation == generation):
        events.add("MIGLayoutFailed", message, EventType.WARNING)
    return MigOutcome(MigStatus("Failed", message, generation), tuple(events.items))
