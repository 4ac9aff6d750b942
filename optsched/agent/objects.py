"""The ``NodeGPUs`` skeleton an agent creates for its node (names in ``optsched.model.names``)."""

from __future__ import annotations

from typing import Any

from optsched.model.names import NODE_GPUS_API, NODE_GPUS_KIND


def node_gpus_skeleton(node: str, node_uid: str) -> dict[str, Any]:
    """A new ``NodeGPUs`` named after the node and owned by it (deleted with the Node)."""
    metadata: dict[str, Any] = {"name": node}
    if node_uid:
        metadata["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid}]
    return {"apiVersion": NODE_GPUS_API, "kind": NODE_GPUS_KIND, "metadata": metadata, "spec": {}}
