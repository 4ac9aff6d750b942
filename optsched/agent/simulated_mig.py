"""Simulated MIG hardware: GPU instances that obey NVIDIA's placement rules and outlive the agent.

Simulated nodes (KWOK, tests, demos) need MIG that behaves like the real
thing where optsched relies on it: a create at a start NVML does not list, one
overlapping an occupied memory slice or one past a profile's instance count
fails with :class:`BackendError`, as NVML refuses it; a GPU without a MIG
profile table refuses every create. The instances of each GPU are kept in a
JSON file (written to a temporary file and renamed over the old one), so they
survive a restart of the agent as real instances survive it. One
:class:`SimulatedMig` owns its file.

As on real hardware (``optsched.agent.nvml_mig``), one instance is created or
destroyed at a time and the GPU's other instances stay exactly as they are.
MIG UUIDs are deterministic (``MIG-`` + a UUID5 of node, GPU, start and
profile), so a re-created instance gets its old UUID back. Pods are tracked
elsewhere (``optsched.agent.mig_users``); ``in_use`` is always False here.

Test hook: ``crash_after_creates=N`` ends the process with ``os._exit(137)``
(as a SIGKILL would) right after the N-th successful create in this process,
to test that a crash in the middle of an apply is rolled back on restart.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Sequence
from pathlib import Path

from optsched.agent.backend import BackendError
from optsched.agent.devices import MigInstance
from optsched.agent.mig_journal import write_json_durably
from optsched.mig.layout import MigSlot, layout_problems
from optsched.mig.profiles import MigModel, model_for

_UUID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_DNS, "mig.optsched.io")
STATE_KIND = "optsched-simulated-mig"


def mig_uuid(node: str, gpu: int, start: int, profile: str) -> str:
    return "MIG-" + str(uuid.uuid5(_UUID_NAMESPACE, f"{node}/{gpu}/{start}/{profile}"))


class SimulatedMig:
    """``MigControl`` over simulated GPUs: ``products[i]`` is GPU ``i``'s product (GFD form)."""

    def __init__(
        self,
        products: Sequence[str],
        memory_mib: int,
        state_path: Path | None,
        node: str,
        crash_after_creates: int | None = None,
    ) -> None:
        self._products = tuple(products)
        self._models = tuple(model_for(p, memory_mib) for p in self._products)
        self._state_path = state_path
        self._node = node
        self._crash_after = crash_after_creates
        self._creates = 0
        self._slots: dict[int, list[MigSlot]] = {gpu: [] for gpu in range(len(self._products))}
        if state_path is not None and state_path.exists():
            self._load(state_path)

    @property
    def models(self) -> dict[int, MigModel | None]:
        """Each GPU's MIG model (None: the GPU has no MIG)."""
        return dict(enumerate(self._models))

    def instances(self, gpu: int) -> tuple[MigInstance, ...]:
        return tuple(self._instance(gpu, slot) for slot in sorted(self._gpu(gpu), key=lambda s: s.start))

    def create(self, gpu: int, profile: str, start: int) -> MigInstance:
        slots = self._gpu(gpu)
        model = self._models[gpu]
        where = f"node {self._node} GPU {gpu}: cannot create {profile} at start {start}"
        if model is None:
            raise BackendError(f"{where}: {self._products[gpu]} has no MIG (NVML: Not Supported)")
        slot = MigSlot(profile, start)
        problems = layout_problems(model, [*slots, slot])
        if problems:
            raise BackendError(f"{where}: {'; '.join(problems)} (NVML: Insufficient Resources)")
        slots.append(slot)
        self._save()
        self._creates += 1
        if self._crash_after is not None and self._creates >= self._crash_after:
            os._exit(137)
        return self._instance(gpu, slot)

    def destroy(self, gpu: int, start: int) -> None:
        slots = self._gpu(gpu)
        for slot in slots:
            if slot.start == start:
                slots.remove(slot)
                self._save()
                return
        raise BackendError(
            f"node {self._node} GPU {gpu}: no GPU instance starts at memory slice {start} (NVML: Not Found)"
        )

    def _gpu(self, gpu: int) -> list[MigSlot]:
        if gpu not in self._slots:
            raise BackendError(
                f"node {self._node} has no GPU {gpu} "
                f"(GPUs 0..{len(self._products) - 1}; NVML: Invalid Argument)"
            )
        return self._slots[gpu]

    def _instance(self, gpu: int, slot: MigSlot) -> MigInstance:
        model = self._models[gpu]
        profile = model.profile(slot.profile) if model is not None else None
        size = profile.memory_slices if profile is not None else 0
        return MigInstance(
            profile=slot.profile,
            start=slot.start,
            size=size,
            uuid=mig_uuid(self._node, gpu, slot.start, slot.profile),
            in_use=False,
        )

    def _save(self) -> None:
        if self._state_path is None:
            return
        gpus = {
            str(gpu): [{"profile": s.profile, "start": s.start} for s in sorted(slots, key=lambda s: s.start)]
            for gpu, slots in sorted(self._slots.items())
        }
        try:
            write_json_durably(
                self._state_path, {"kind": STATE_KIND, "version": 1, "node": self._node, "gpus": gpus}
            )
        except OSError as exc:
            raise BackendError(f"node {self._node}: cannot write the simulated MIG state: {exc}") from exc

    def _load(self, path: Path) -> None:
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(raw, dict) or raw.get("kind") != STATE_KIND or raw.get("version") != 1:
                raise ValueError(f"expected kind {STATE_KIND} version 1")
            if raw.get("node") != self._node:
                raise ValueError(f"it belongs to node {raw.get('node')!r}, not {self._node!r}")
            for key, entries in raw["gpus"].items():
                gpu = int(key)
                self._gpu(gpu)
                self._slots[gpu] = [MigSlot(str(e["profile"]), int(e["start"])) for e in entries]
        except (OSError, ValueError, KeyError, TypeError, AttributeError, BackendError) as exc:
            raise BackendError(f"simulated MIG state {path} cannot be read: {exc}") from exc
        for gpu, slots in self._slots.items():
            model = self._models[gpu]
            problems = layout_problems(model, slots) if model is not None else []
            if slots and model is None:
                problems = [f"{self._products[gpu]} has no MIG"]
            if problems:
                raise BackendError(f"simulated MIG state {path}: GPU {gpu}: {'; '.join(problems)}")
