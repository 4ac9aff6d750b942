"""What makes each planned pod get the GPUs its plan names: ``dra``, ``predicted`` or ``none``.

Every plan says it per pod, the same way whichever policy made it:

* ``dra``: the node is a DRA node and the pod takes whole GPUs whose indices
  and UUIDs are known: a ResourceClaim selecting those UUIDs can be allocated
  nothing else;
* ``predicted``: a device-plugin node without HAMi and whole GPUs of known
  index: the plan is what NVIDIA's allocator will pick there;
* ``none``: anything else (GPU shares, MIG slices, indices left to the node,
  HAMi nodes, pods without GPUs).

A pod's GPUs are also named by UUID where the node knows the UUID of each of
them. A value a policy already set is kept.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from optsched.model.placement import Enforcement, PodPlacement
from optsched.model.snapshot import GpuMode, Node, PodRequest


def enforcement_of(pod: PodPlacement, node: Node | None, request: PodRequest) -> Enforcement:
    """How the GPUs of ``pod`` (asking ``request``) are enforced on ``node`` (None: unknown node)."""
    if node is None or not request.gpus or request.is_share or not pod.gpus:
        return Enforcement.NONE
    if node.gpu_mode == GpuMode.DRA:
        return Enforcement.DRA if uuids_of(pod.gpus, node) is not None else Enforcement.NONE
    return Enforcement.NONE if node.hami else Enforcement.PREDICTED


def uuids_of(gpus: Iterable[int], node: Node) -> tuple[str, ...] | None:
    """The UUIDs of GPU indices ``gpus`` of ``node``; None unless the node names every one."""
    known = node.gpu_uuids
    out = []
    for gpu in gpus:
        if not 0 <= gpu < len(known) or not known[gpu]:
            return None
        out.append(known[gpu])
    return tuple(out)


def enforced(pod: PodPlacement, node: Node | None, request: PodRequest) -> PodPlacement:
    """``pod`` with its GPU UUIDs and enforcement filled in (values a policy set are kept)."""
    update: dict[str, object] = {}
    if pod.gpu_uuids is None and pod.gpus and node is not None:
        uuids = uuids_of(pod.gpus, node)
        if uuids is not None:
            update["gpu_uuids"] = uuids
    if pod.enforcement is None:
        update["enforcement"] = enforcement_of(pod, node, request)
    return pod.model_copy(update=update) if update else pod


def count_enforcement(pods: Iterable[PodPlacement]) -> dict[str, int]:
    """Pods per enforcement value, every value listed (0 where none), in the enum's order."""
    counts = Counter(pod.enforcement for pod in pods if pod.enforcement is not None)
    return {value.value: counts.get(value, 0) for value in Enforcement}
