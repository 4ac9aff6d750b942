"""The DRA objects of a snapshot, read once: which nodes are DRA nodes, what claims hold, what templates ask.

The snapshot builder reads ResourceSlices, ResourceClaims and
ResourceClaimTemplates here (:mod:`optsched.snapshot.dra`,
:mod:`optsched.snapshot.dra_demand`); each one that cannot be read is left
out through the builder's :class:`~optsched.snapshot.reading.Reader`, with a
note on what that means for the plan. DeviceClasses are accepted in a
snapshot (``optsched snapshot`` writes them) but not interpreted: the GPUs'
class is NVIDIA's ``gpu.nvidia.com``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from optsched.model.names import RESOURCE_GROUP
from optsched.model.snapshot import GpuMode, Node
from optsched.snapshot.dra import DRA_VERSIONS, DraNode, InUse, Unreadable, allocated, dra_nodes
from optsched.snapshot.dra_demand import ClaimTemplates, claim_templates
from optsched.snapshot.fields import describe
from optsched.snapshot.reading import Reader

DRA_KINDS = ("ResourceSlice", "ResourceClaim", "ResourceClaimTemplate", "DeviceClass")
"""The ``resource.k8s.io`` kinds a snapshot holds."""


def unsupported_dra_version(obj: dict[str, Any]) -> str | None:
    """Why a DRA object's API version is not read (another group, an older schema), or None."""
    group, _, version = str(obj.get("apiVersion", "")).rpartition("/")
    if group == RESOURCE_GROUP and version in DRA_VERSIONS:
        return None
    expected = " or ".join(f"{RESOURCE_GROUP}/{v}" for v in DRA_VERSIONS)
    return f"apiVersion {obj.get('apiVersion')!r} is not read (expected {expected})"


@dataclass(frozen=True)
class DraFacts:
    """What the DRA objects of one snapshot say."""

    nodes: dict[str, DraNode] = field(default_factory=dict)
    """DRA nodes by name: the GPUs NVIDIA's driver publishes."""
    in_use: dict[str, dict[str, InUse]] = field(default_factory=dict)
    """Per node, the devices claims' allocations hold, by device name."""
    templates: ClaimTemplates = field(default_factory=ClaimTemplates)

    def claimed(self, nodes: Mapping[str, Node]) -> dict[str, frozenset[int]]:
        """Per DRA node of ``nodes``: the GPU indices claims hold (found by UUID in ``Node.gpu_uuids``)."""
        out: dict[str, frozenset[int]] = {}
        for name, held in self.in_use.items():
            node = nodes.get(name)
            if node is None or node.gpu_mode != GpuMode.DRA:
                continue
            index = {uuid: i for i, uuid in enumerate(node.gpu_uuids)}
            out[name] = frozenset(index[use.uuid] for use in held.values() if use.uuid in index)
        return out


def _left_out(reader: Reader, problems: list[Unreadable], consequence: str) -> None:
    for problem in problems:
        error = problem.error.located(source=reader.source, obj=describe(problem.obj))
        reader.leave_out(problem.obj, str(error))
        if consequence:
            reader.notes.append(f"{describe(problem.obj)}: {consequence}")


def read_dra(by_kind: Mapping[str, list[dict[str, Any]]], reader: Reader) -> DraFacts:
    """The DRA facts of a snapshot's objects (by kind); what cannot be read is left out through ``reader``."""
    slice_problems: list[Unreadable] = []
    nodes = dra_nodes(by_kind.get("ResourceSlice", []), slice_problems)
    _left_out(reader, slice_problems, "")
    claim_problems: list[Unreadable] = []
    in_use = allocated(by_kind.get("ResourceClaim", []), nodes, claim_problems)
    _left_out(reader, claim_problems, "the devices it holds are not known and may be planned again")
    template_problems: list[Unreadable] = []
    templates = claim_templates(by_kind.get("ResourceClaimTemplate", []), template_problems)
    _left_out(reader, template_problems, "")
    return DraFacts(nodes, in_use, templates)
