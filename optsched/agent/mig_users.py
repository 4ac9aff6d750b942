"""Who holds, or may hold, each MIG instance and each whole GPU on a node, and what a change would take.

A layout change on a MIG GPU may go ahead while pods run on it, as long as
it destroys no instance in use: NVIDIA's MIG user guide ("Destroying GPU
Instances", docs.nvidia.com/datacenter/tesla/mig-user-guide/) says GPU and
compute instances are configured dynamically once the GPU is in MIG mode, and
that a destroy is refused while a process occupies that instance; instances
that stay are not touched. So the agent needs, per instance, who may be
using it:

* a pod whose devices (kubelet's PodResources, or its DRA claims) include the
  instance's MIG UUID holds that instance;
* a process NVML reports on the instance's MIG device holds it;
* a pod asking for ``nvidia.com/mig-<profile>`` that holds fewer known
  instances of that profile than it asks for (the simulated backend hands out
  no MIG devices, so which slice it got is unknown) may hold any instance of
  that profile on the node: each of them counts as in use.

A pod holding a whole GPU blocks every change of that GPU's layout.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from optsched.agent.devices import Discovery, MigInstance
from optsched.agent.podresources import PodDevices
from optsched.mig.layout import MigSlot
from optsched.model.names import MIG_PREFIX

_UNREADABLE = 1 << 30
"""A MIG count that cannot be read is taken as larger than any pod holds (every instance may be its)."""


@dataclass(frozen=True)
class Holders:
    """Per GPU the pods holding it whole; per ``(gpu, start)`` of an instance whoever holds or may hold it."""

    whole: Mapping[int, tuple[str, ...]] = field(default_factory=dict)
    instances: Mapping[tuple[int, int], tuple[str, ...]] = field(default_factory=dict)

    def blocking(self, gpu: int, current: Iterable[MigInstance], wanted: Sequence[MigSlot]) -> list[str]:
        """Why ``gpu`` cannot go from ``current`` to ``wanted`` now: a phrase per thing in use it takes."""
        out = []
        if self.whole.get(gpu):
            out.append(f"GPU {gpu} is held whole by {', '.join(self.whole[gpu])}")
        keep = {(slot.profile, slot.start) for slot in wanted}
        for instance in sorted(current, key=lambda i: i.start):
            if (instance.profile, instance.start) in keep:
                continue
            users = list(self.instances.get((gpu, instance.start), ()))
            if instance.in_use and not users:
                users.append("a process (NVML)")
            if users:
                out.append(
                    f"GPU {gpu}: the layout removes {instance.profile} at start {instance.start}, "
                    f"in use by {', '.join(users)}"
                )
        return out


NO_HOLDERS = Holders()


def _name(meta: Mapping[str, Any]) -> str:
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _count(value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return _UNREADABLE


def asked_profiles(pod: Mapping[str, Any]) -> Counter[str]:
    """MIG profile -> how many instances of it the pod asks for (per container: limit, else request)."""
    spec = pod.get("spec")
    if not isinstance(spec, Mapping):
        return Counter()
    asked: Counter[str] = Counter()
    for part in ("initContainers", "containers"):
        containers = spec.get(part)
        for container in containers if isinstance(containers, list) else []:
            resources = container.get("resources") if isinstance(container, Mapping) else None
            if not isinstance(resources, Mapping):
                continue
            limits, requests = resources.get("limits"), resources.get("requests")
            seen: dict[str, object] = {}
            for values in (requests, limits):  # a limit wins over a request, as the device plugin counts
                if isinstance(values, Mapping):
                    seen.update({k: v for k, v in values.items() if isinstance(k, str)})
            for key, value in seen.items():
                if key.startswith(MIG_PREFIX):
                    asked[key.removeprefix(MIG_PREFIX)] += _count(value)
    return asked


def holders(held: Sequence[PodDevices], discovery: Discovery, pods: Sequence[Mapping[str, Any]]) -> Holders:
    """Who holds what on the node: devices pods hold, NVML's busy instances, pods whose slice is unknown."""
    whole_ids = {gpu.uuid: gpu.index for gpu in discovery.gpus}
    mig_ids = {m.uuid: (g.index, m) for g in discovery.gpus for m in g.mig_instances if m.uuid}
    whole: dict[int, list[str]] = {}
    instances: dict[tuple[int, int], list[str]] = {}
    known: dict[str, Counter[str]] = {}
    for pod in held:
        name = f"{pod.namespace}/{pod.name}"
        for container in pod.containers:
            for _, ids in container.devices:
                for device in ids:
                    if device in whole_ids:
                        whole.setdefault(whole_ids[device], []).append(name)
                    elif device in mig_ids:
                        gpu, instance = mig_ids[device]
                        instances.setdefault((gpu, instance.start), []).append(name)
                        known.setdefault(name, Counter())[instance.profile] += 1
    for obj in pods:
        meta = obj.get("metadata")
        name = _name(meta if isinstance(meta, Mapping) else {})
        for profile, count in sorted(asked_profiles(obj).items()):
            if count <= known.get(name, Counter())[profile]:
                continue
            for board in discovery.gpus:
                for slot in board.mig_instances:
                    if slot.profile == profile:
                        users = instances.setdefault((board.index, slot.start), [])
                        users.append(f"{name} (asks for {profile}; which instance it holds is not known)")
    return Holders(
        {gpu: tuple(dict.fromkeys(names)) for gpu, names in whole.items()},
        {key: tuple(dict.fromkeys(names)) for key, names in instances.items()},
    )
