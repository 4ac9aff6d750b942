"""Kueue's queue objects as the planner reads them: ClusterQueues with their quotas, LocalQueues,
ResourceFlavors and Topologies.

Quotas are in the solver's units: CPU in millicores, memory in MiB, counts otherwise.
"""

from __future__ import annotations

from pydantic import Field

from optsched.model.scheduling import Frozen, Taint, Toleration


class ResourceQuota(Frozen):
    name: str
    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


class FlavorQuota(Frozen):
    name: str
    resources: tuple[ResourceQuota, ...]

    def resource(self, name: str) -> ResourceQuota | None:
        return next((r for r in self.resources if r.name == name), None)


class ResourceGroup(Frozen):
    covered_resources: tuple[str, ...]
    flavors: tuple[FlavorQuota, ...]


class ClusterQueue(Frozen):
    """Quotas are in the solver's units: cpu in millicores, memory in MiB, counts otherwise."""

    name: str
    cohort: str | None = None
    resource_groups: tuple[ResourceGroup, ...] = ()
    usage: dict[str, dict[str, int]] = Field(default_factory=dict)
    """Flavor -> resource -> quantity in use by admitted or reserved workloads."""
    admission_checks: tuple[str, ...] = ()

    def flavors_for(self, resource: str) -> tuple[FlavorQuota, ...]:
        for group in self.resource_groups:
            if resource in group.covered_resources:
                return group.flavors
        return ()


class LocalQueue(Frozen):
    namespace: str
    name: str
    cluster_queue: str


class ResourceFlavor(Frozen):
    name: str
    node_labels: dict[str, str] = Field(default_factory=dict)
    node_taints: tuple[Taint, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    topology_name: str | None = None


class Topology(Frozen):
    name: str
    levels: tuple[str, ...]
