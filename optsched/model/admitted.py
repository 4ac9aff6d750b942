"""Workloads that already hold a Kueue quota reservation, as the snapshot reader needs them.

Kueue counts a ClusterQueue's usage from the admissions of its Workloads
(``status.admission``), not from the ClusterQueue's own status, which is a
copy it publishes later. optsched does the same: an :class:`AdmittedWorkload`
carries what its reservation takes (per PodSet: resource -> flavor and the
total of each resource) and, where its pods may already run, where they were
placed (Kueue TAS's ``topologyAssignment``, or optsched's own placement
record), so pods not created yet still hold their nodes.
"""

from __future__ import annotations

from decimal import Decimal

from pydantic import Field

from optsched.model.placement import PodPlacement
from optsched.model.snapshot import Frozen, PodRequest


class TopologyDomain(Frozen):
    """One domain of a TAS assignment: a value per level (coarsest first) and its pod count."""

    values: tuple[str, ...]
    count: int


class TopologyAssignment(Frozen):
    """Kueue TAS's ``topologyAssignment`` of one PodSet, decoded from either API version."""

    levels: tuple[str, ...]
    """Node label keys, coarsest first; ``kubernetes.io/hostname`` last where nodes are named."""
    domains: tuple[TopologyDomain, ...]


class PodSetAdmission(Frozen):
    """What one PodSet's reservation takes, and where its pods were placed."""

    name: str
    flavors: dict[str, str] = Field(default_factory=dict)
    """Resource -> ResourceFlavor, as Kueue assigned them."""
    usage: dict[str, Decimal] = Field(default_factory=dict)
    """Resource -> total over the PodSet's pods, in base units (cores, bytes, counts)."""
    count: int
    """Pods the reservation covers (less those Kueue reclaimed)."""
    request: PodRequest | None = None
    """One pod's request; None where the PodSet's template could not be read."""
    topology: TopologyAssignment | None = None
    placement: tuple[PodPlacement, ...] | None = None
    """optsched's placement record for the PodSet, where the workload carries one."""


class AdmittedWorkload(Frozen):
    """A Workload holding a quota reservation (``QuotaReserved``) that has not finished."""

    namespace: str
    name: str
    cluster_queue: str
    running: bool
    """Admitted and active: its pods exist or are about to, so it holds node capacity too."""
    pod_sets: tuple[PodSetAdmission, ...]
    uid: str = ""
    owners: frozenset[str] = frozenset()
    """Its owners' uids and ``Kind/name``, to find the pods of the same Job."""
    plan_id: str | None = None
    """The plan id of optsched's placement record (its pods carry it as a label)."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"
