"""The GPU UUIDs and enforcement of a plan's pods, checked against the nodes.

A pod's ``gpuUUIDs`` name the same GPUs as its ``gpus``, one for one, each the
UUID the node gives that index; ``dra`` enforcement is only possible on a DRA
node and with every UUID named (a claim selects devices by UUID); a GPU taken
whole by one pod is named by no other pod on its node.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from optsched.model.placement import Enforcement, PodPlacement
from optsched.model.snapshot import GpuMode, Node, PodSet


@dataclass
class UuidBook:
    """The UUIDs the plan's pods name, per node, to find one named twice."""

    whole: dict[tuple[str, str], str] = field(default_factory=dict)
    """(node, UUID) -> the pod that takes it whole."""
    shared: dict[tuple[str, str], str] = field(default_factory=dict)
    """(node, UUID) -> the first pod that takes a share of it."""

    def book(self, where: str, node: Node, ps: PodSet, pod: PodPlacement) -> list[str]:
        """The violations of one pod's UUIDs and enforcement on ``node``."""
        violations = _own(where, node, pod)
        if pod.enforcement == Enforcement.DRA:
            violations += _dra(where, node, pod)
        share = ps.request.is_share
        for uuid in pod.gpu_uuids or ():
            key = (node.name, uuid)
            other = self.whole.get(key) or (None if share else self.shared.get(key))
            if other is not None:
                violations.append(f"{where}: GPU UUID {uuid} is also given to {other}")
            (self.shared if share else self.whole).setdefault(key, where)
        return violations


def _own(where: str, node: Node, pod: PodPlacement) -> list[str]:
    """``gpuUUIDs`` that do not match ``gpus`` or the node."""
    uuids = pod.gpu_uuids
    if uuids is None:
        return []
    gpus = pod.gpus or ()
    violations = []
    if len(uuids) != len(gpus):
        violations.append(f"{where}: lists {len(uuids)} GPU UUIDs for {len(gpus)} GPUs {list(gpus)}")
    if len(set(uuids)) != len(uuids):
        violations.append(f"{where}: a GPU UUID is repeated in {list(uuids)}")
    known = node.gpu_uuids
    for gpu, uuid in zip(gpus, uuids, strict=False):
        if uuid not in known:
            violations.append(f"{where}: GPU UUID {uuid} is not a GPU of node {node.name}")
        elif not 0 <= gpu < len(known) or known[gpu] != uuid:
            violations.append(f"{where}: GPU UUID {uuid} is not the UUID of GPU {gpu} of node {node.name}")
    return violations


def _dra(where: str, node: Node, pod: PodPlacement) -> list[str]:
    """``dra`` enforcement needs a DRA node and a UUID for each GPU."""
    if node.gpu_mode != GpuMode.DRA:
        return [f"{where}: enforcement dra on node {node.name}, which is not a DRA node"]
    if not pod.gpus or pod.gpu_uuids is None:
        return [f"{where}: enforcement dra without the GPUs' UUIDs"]
    return []
