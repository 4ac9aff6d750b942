"""What node agents report back: which GPUs each bound pod really holds, per node.

On a device-plugin node optsched predicts the GPUs NVIDIA's device plugin
will pick; the node agent's ``NodeGPUs`` (from kubelet's PodResources, or the
emulated plugin on a simulated node) says what it really picked. The
controller reads it to know when a pod has its devices (the next predicted
pod on that node may then be pinned), to see drift, and to count how often
the prediction held. A ``NodeGPUs`` that cannot be read counts as no report.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from optsched.errors import InputError
from optsched.model.names import NODE_GPUS_KIND
from optsched.snapshot.node_gpus import read_node_gpus

PodKey = tuple[str, str]
"""(namespace, name)"""


@dataclass(frozen=True)
class ReadBack:
    """Per node an agent reports: the GPU indices each pod listed with devices holds."""

    held: Mapping[str, Mapping[PodKey, tuple[int, ...] | None]] = field(default_factory=dict)
    """Node -> pod -> indices (None: devices listed that cannot be placed by index)."""

    @classmethod
    def of(cls, objects: Iterable[Mapping[str, Any]]) -> ReadBack:
        held: dict[str, dict[PodKey, tuple[int, ...] | None]] = {}
        for obj in objects:
            if obj.get("kind") != NODE_GPUS_KIND:
                continue
            try:
                facts = read_node_gpus(dict(obj))
            except InputError:
                continue  # the snapshot reports it; here it only means no read-back for the node
            if facts is not None:
                held[facts.node] = {key: pod.indices for key, pod in facts.pods.items()}
        return cls(held)

    def serves(self, node: str) -> bool:
        return node in self.held

    def lists(self, node: str, pod: PodKey) -> bool:
        return pod in self.held.get(node, {})

    def holding(
        self, node: str, gpus: Iterable[int], *, besides: Iterable[PodKey] = ()
    ) -> dict[PodKey, set[int]]:
        """Pods on ``node`` (other than ``besides``) holding any of ``gpus``, with the GPUs they hold."""
        wanted, skip = set(gpus), set(besides)
        out: dict[PodKey, set[int]] = {}
        for pod, indices in self.held.get(node, {}).items():
            if pod not in skip and indices and wanted & set(indices):
                out[pod] = wanted & set(indices)
        return out
