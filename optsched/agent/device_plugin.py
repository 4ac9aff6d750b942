"""kubelet and NVIDIA's device plugin, emulated for a simulated node: which GPUs each new pod is given.

A simulated (KWOK) node has neither kubelet nor a device plugin, yet drift,
published holdings and the planner's view of real usage all need to know
which GPUs each pod received. This module plays both parts for whole GPUs
(``nvidia.com/gpu``), the way they behave on a real node:

* kubelet never moves devices: a pod that held GPUs keeps exactly those, even
  a GPU that has since turned unhealthy;
* a pod that is gone frees its GPUs;
* new pods are admitted in the order they were bound to the node (the time of
  their ``PodScheduled`` condition, else their creation for a pod created with
  ``spec.nodeName``; ties, which the API's one-second timestamps make common,
  by namespace and name), as kubelet admits pods in the order its watch
  delivers them, whatever order a list of pods returns them in;
* a new pod's containers are served in order, each with the device plugin's
  best-effort choice (``optsched.topology.best_effort``, scored on the
  node's NVLink islands and NUMA nodes exactly as the planner scores it)
  among the free, healthy, whole GPUs (a GPU with MIG enabled is not handed
  out whole);
* a pod that does not fit gets nothing and is rejected, as kubelet's admission
  rejects it; its containers' earlier picks are released.

Device IDs are GPU UUIDs, as NVIDIA's device plugin names them. MIG slices
are not handed out here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from optsched.agent.devices import Discovery
from optsched.agent.islands import board_of
from optsched.agent.podresources import ContainerDevices, PodDevices
from optsched.model.names import GPU_RESOURCE
from optsched.topology.best_effort import Board, best_effort


@dataclass(frozen=True)
class GpuPod:
    """A pod bound to the node as kubelet allocates it: each container's ``nvidia.com/gpu`` count."""

    namespace: str
    name: str
    uid: str
    containers: tuple[tuple[str, int], ...]
    bound_at: datetime | None = None
    """When the pod was bound to the node (None: not known; such pods are admitted after the others)."""

    def admission_key(self) -> tuple[bool, float, str, str]:
        """Where kubelet admits the pod among pods new to it at once: bind time, then namespace and name."""
        at = self.bound_at.timestamp() if self.bound_at is not None else 0.0
        return (self.bound_at is None, at, self.namespace, self.name)


@dataclass(frozen=True)
class Rejected:
    """A pod kubelet would refuse to admit: not enough free, healthy GPUs for one of its containers."""

    namespace: str
    name: str
    reason: str


@dataclass(frozen=True)
class Allocation:
    """What the emulated kubelet holds after one pass: every admitted pod's devices, and who was refused."""

    pods: tuple[PodDevices, ...]
    """In the order the pods were given; pods without GPUs are listed too, as kubelet lists them."""
    rejected: tuple[Rejected, ...] = ()


def allocate(
    pods: Sequence[GpuPod], previous: Sequence[PodDevices], discovery: Discovery, unhealthy: frozenset[int]
) -> Allocation:
    """The devices each of ``pods`` holds, given what the pods of ``previous`` held before.

    A pod of ``pods`` found in ``previous`` (same namespace and name) keeps
    its entry unchanged; the others are new and allocated in admission order
    (:meth:`GpuPod.admission_key`), and listed in the given order. A rejected
    pod is not remembered: if the caller passes it again, it is tried again
    (as a recreated pod would be).
    """
    before = {(p.namespace, p.name): p for p in previous}
    present = {(p.namespace, p.name) for p in pods}
    kept = {key: pod for key, pod in before.items() if key in present}
    index_of = {gpu.uuid: gpu.index for gpu in discovery.gpus}
    taken = _indices(kept.values(), index_of)
    free = [
        gpu.index
        for gpu in discovery.gpus
        if gpu.index not in taken and gpu.index not in unhealthy and not gpu.mig_enabled
    ]
    board = board_of(discovery)
    unique: dict[tuple[str, str], GpuPod] = {}
    for pod in pods:
        unique.setdefault((pod.namespace, pod.name), pod)
    given: dict[tuple[str, str], PodDevices | Rejected] = {}
    for pod in sorted((p for k, p in unique.items() if k not in kept), key=GpuPod.admission_key):
        admitted = _admit(pod, free, discovery, board)
        given[pod.namespace, pod.name] = admitted
        if isinstance(admitted, PodDevices):
            handed = _indices([admitted], index_of)
            free = [g for g in free if g not in handed]
    held: list[PodDevices] = []
    rejected: list[Rejected] = []
    for key in unique:
        outcome = kept[key] if key in kept else given[key]
        if isinstance(outcome, Rejected):
            rejected.append(outcome)
        else:
            held.append(outcome)
    return Allocation(tuple(held), tuple(rejected))


def _indices(pods: Iterable[PodDevices], index_of: Mapping[str, int]) -> set[int]:
    """The indices of the whole GPUs ``pods`` hold (device IDs that are no GPU of the node are skipped)."""
    return {index_of[i] for p in pods for c in p.containers for i in c.ids(GPU_RESOURCE) if i in index_of}


def _admit(pod: GpuPod, free: list[int], discovery: Discovery, board: Board) -> PodDevices | Rejected:
    left = list(free)
    containers = []
    for name, count in pod.containers:
        if count == 0:
            containers.append(ContainerDevices(name))
            continue
        if count > len(left):
            return Rejected(
                pod.namespace,
                pod.name,
                f"container {name} asks for {count} {GPU_RESOURCE}, only {len(left)} free and healthy "
                f"({_csv(left) or 'none'})",
            )
        chosen = best_effort(left, count, board)
        uuids = tuple(discovery.by_index(i).uuid for i in chosen)
        containers.append(ContainerDevices(name, ((GPU_RESOURCE, uuids),)))
        left = [g for g in left if g not in chosen]
    return PodDevices(pod.namespace, pod.name, tuple(containers))


def _csv(indices: Sequence[int]) -> str:
    return ",".join(str(i) for i in indices)


# -- reading a Pod object ---------------------------------------------------------------------------------


def pod_from_object(pod: Mapping[str, Any]) -> GpuPod | None:
    """A Pod object as kubelet's device manager sees it; None when a field it needs is unusable.

    Each container's count is its ``nvidia.com/gpu`` limit, else its request,
    else 0; a value must be a whole, non-negative number (``2`` or ``"2"``).
    Sidecars (init containers with ``restartPolicy: Always``) hold their GPUs
    for the pod's life, so they count, before the app containers. Ordinary
    init containers are left out: kubelet lets the app containers reuse their
    devices once they finish, which this emulation does not model, so a pod
    whose GPUs are asked for by an init container alone is given none.
    The bind time is the ``PodScheduled`` condition's ``lastTransitionTime``
    when it is True, else ``metadata.creationTimestamp`` (a pod created with
    ``spec.nodeName`` is on the node from the start); an unreadable time is
    not known, never a reason to skip the pod.
    """
    meta, spec = pod.get("metadata"), pod.get("spec")
    if not isinstance(meta, Mapping) or not isinstance(spec, Mapping):
        return None
    name, namespace, uid = meta.get("name"), meta.get("namespace", "default"), meta.get("uid", "")
    if not (isinstance(name, str) and name and isinstance(namespace, str) and isinstance(uid, str)):
        return None
    init, app = _field(spec, "initContainers", []), _field(spec, "containers", [])
    if not isinstance(init, list) or not isinstance(app, list):
        return None
    sidecars = [c for c in init if isinstance(c, Mapping) and c.get("restartPolicy") == "Always"]
    containers = []
    for container in [*sidecars, *app]:
        counted = _container_count(container)
        if counted is None:
            return None
        containers.append(counted)
    return GpuPod(namespace, name, uid, tuple(containers), _bound_at(meta, pod.get("status")))


def _bound_at(meta: Mapping[str, Any], status: Any) -> datetime | None:
    conditions = _field(status, "conditions", []) if isinstance(status, Mapping) else []
    for condition in conditions if isinstance(conditions, list) else []:
        if (
            isinstance(condition, Mapping)
            and condition.get("type") == "PodScheduled"
            and condition.get("status") == "True"
        ):
            at = _time(condition.get("lastTransitionTime"))
            if at is not None:
                return at
    return _time(meta.get("creationTimestamp"))


def _time(value: Any) -> datetime | None:
    """An RFC 3339 time as the API server writes it (``2025-01-02T03:04:05Z``); None when it is not one."""
    if not isinstance(value, str):
        return None
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        return None
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def _container_count(container: Any) -> tuple[str, int] | None:
    if not isinstance(container, Mapping):
        return None
    name, resources = container.get("name"), _field(container, "resources", {})
    if not isinstance(name, str) or not name or not isinstance(resources, Mapping):
        return None
    for part in ("limits", "requests"):
        values = _field(resources, part, {})
        if not isinstance(values, Mapping):
            return None
        if GPU_RESOURCE in values:
            count = _whole_count(values[GPU_RESOURCE])
            return None if count is None else (name, count)
    return name, 0


def _field(obj: Mapping[str, Any], key: str, default: Any) -> Any:
    """``obj[key]``, with ``default`` for a key that is missing or null (as JSON often writes it)."""
    value = obj.get(key)
    return default if value is None else value


def _whole_count(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        return int(value.strip())
    return None
