"""The whole GPUs free on a device-plugin node right now: what NVIDIA's device plugin would choose from.

The plan predicted each pod's GPUs as the best-effort pick on the free GPUs
it expected at that pod's turn. When the turns come in another order than
planned (a record written a cycle late, a pod placed around optsched), the
pin that still holds is the one whose planned GPUs are the pick on the GPUs
free *now*. This module says what is free now: the node's healthy GPUs less
those bound pods hold (the agent's read-back where it reports the node, else
what optsched pinned), read with the snapshot's own rules from the node, its
``NodeGPUs`` and the pods bound to it, without assumed usage (a device plugin
only sees devices handed out).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from optsched.capacity.state import NodeState, device_plugin_board
from optsched.errors import InputError
from optsched.model.names import NODE_GPUS_KIND
from optsched.snapshot.build import snapshot_from_objects
from optsched.topology.best_effort import Board


@dataclass(frozen=True)
class FreeNow:
    """A device-plugin node's board and its whole GPUs free now."""

    board: Board
    free: frozenset[int]


class FreeGpus:
    """:class:`FreeNow` per node, read on demand from the cycle's raw objects (memoised)."""

    def __init__(self, objects: Iterable[Mapping[str, Any]]) -> None:
        self._node: dict[str, dict[str, Any]] = {}
        self._gpus: dict[str, dict[str, Any]] = {}
        self._pods: dict[str, list[dict[str, Any]]] = {}
        for obj in objects:
            kind, name = obj.get("kind"), _name(obj)
            if kind == "Node":
                self._node[name] = dict(obj)
            elif kind == NODE_GPUS_KIND:
                self._gpus[name] = dict(obj)
            elif kind == "Pod":
                spec = obj.get("spec")
                node = spec.get("nodeName") if isinstance(spec, dict) else None
                if isinstance(node, str) and node:
                    self._pods.setdefault(node, []).append(dict(obj))
        self._memo: dict[str, FreeNow | None] = {}

    def __call__(self, node: str) -> FreeNow | None:
        """None where the node is not listed, not a device-plugin node, or its GPUs in use are unknown."""
        if node not in self._memo:
            self._memo[node] = self._read(node)
        return self._memo[node]

    def _read(self, node: str) -> FreeNow | None:
        raw = self._node.get(node)
        if raw is None:
            return None
        objects = [raw, *([self._gpus[node]] if node in self._gpus else []), *self._pods.get(node, [])]
        try:
            snapshot = snapshot_from_objects(objects, source="pin")
        except InputError:
            return None
        parsed = snapshot.node(node)
        board = device_plugin_board(parsed) if parsed is not None else None
        if parsed is None or board is None:
            return None
        state = NodeState.from_node(parsed, snapshot.usage_of(node))
        if not state.indices_known:
            return None
        return FreeNow(board, frozenset(state.fully_free_gpus()))


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) else ""
