"""The frozen cluster snapshot every planner, policy and validator reads.

A :class:`Snapshot` is built once (from a kubectl dump or a live cluster) and
never mutated: the solver, the greedy baselines and ``check_plan`` all see the
same facts. Quantities are small integers: CPU in millicores, memory in MiB,
GPU shares in thousandths of a GPU ("milli").
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from optsched.model.names import DEFAULT_TOPOLOGY_LEVELS, PRODUCT_LABEL

FULL_GPU_MILLI = 1000
"""A whole GPU in the planner's unit of GPU compute (thousandths of a GPU)."""


class Frozen(BaseModel):
    """Base for snapshot values: immutable, strict about unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Taint(Frozen):
    key: str
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class Toleration(Frozen):
    key: str | None = None
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str | None = None
    effect: str | None = None

    def tolerates(self, taint: Taint) -> bool:
        """kube-scheduler's toleration matching rule."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key is None:
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return (self.value or "") == taint.value


class SelectorRequirement(Frozen):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.operator == "In":
            return present and value in self.values
        if self.operator == "NotIn":
            return not present or value not in self.values
        if self.operator == "Exists":
            return present
        if self.operator == "DoesNotExist":
            return not present
        if not present or value is None or not self.values:
            return False
        try:
            left, right = int(value), int(self.values[0])
        except ValueError:
            return False
        return left > right if self.operator == "Gt" else left < right


class NodeSelectorTerm(Frozen):
    """All requirements must hold (AND); a pod's terms are OR-ed."""

    match_expressions: tuple[SelectorRequirement, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        return all(req.matches(labels) for req in self.match_expressions)


class Node(Frozen):
    """One schedulable node as the planner sees it."""

    name: str
    labels: dict[str, str] = Field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    cpu_milli: int
    memory_mib: int
    max_pods: int = 110
    gpu_count: int = 0
    gpu_product: str = ""
    gpu_memory_mib: int = 0
    nvlink_islands: tuple[tuple[int, ...], ...] = ()
    numa: tuple[int, ...] = ()
    unhealthy_gpus: frozenset[int] = frozenset()
    extended: dict[str, int] = Field(default_factory=dict)
    ready: bool = True
    unschedulable: bool = False

    def island_of(self, gpu: int) -> int:
        """Index of the NVLink island holding ``gpu`` (each GPU alone if none are declared)."""
        for number, island in enumerate(self.nvlink_islands):
            if gpu in island:
                return number
        return -1

    @property
    def product(self) -> str:
        """The GPU product (GFD's ``nvidia.com/gpu.product``); empty for a node without GPU labels."""
        return self.gpu_product or self.labels.get(PRODUCT_LABEL, "")

    @property
    def healthy_gpus(self) -> tuple[int, ...]:
        return tuple(i for i in range(self.gpu_count) if i not in self.unhealthy_gpus)

    @property
    def largest_island(self) -> int:
        return max((len(island) for island in self.nvlink_islands), default=1 if self.gpu_count else 0)


class NodeUsage(Frozen):
    """What bound, non-terminal pods already take on a node."""

    cpu_milli: int = 0
    memory_mib: int = 0
    pods: int = 0
    gpu_milli: tuple[int, ...] = ()
    """Per GPU index: compute share taken (1000 = the whole GPU)."""
    gpu_mem_mib: tuple[int, ...] = ()
    """Per GPU index: memory taken by shares (MiB)."""
    unknown_index_gpus: int = 0
    """Whole GPUs taken by pods that do not say which indices they hold."""
    extended: dict[str, int] = Field(default_factory=dict)


class AssumedPod(Frozen):
    """A pod optsched admitted whose real pod is not bound yet: it holds capacity all the same.

    Kueue's scheduler "assumes" an admission into its cache before the pods
    exist; the controller does the same with the placement records of
    workloads it admitted, so the next plan does not hand their GPUs out again.
    """

    workload: str
    """``namespace/name`` of the workload, for messages."""
    node: str
    request: PodRequest
    gpus: tuple[int, ...] | None = None
    """The planned GPU indices; None where they were left to the node."""


class PodRequest(Frozen):
    """What one pod of a PodSet asks for."""

    cpu_milli: int = 0
    memory_mib: int = 0
    gpus: int = 0
    """Number of GPU devices (a share counts as one device)."""
    gpu_milli: int = FULL_GPU_MILLI
    """Compute per device, in thousandths; below 1000 only for a shared single GPU."""
    gpu_mem_mib: int = 0
    """Memory per device for a shared GPU (HAMi ``nvidia.com/gpumem``); 0 = not limited by memory."""
    extended: dict[str, int] = Field(default_factory=dict)

    @property
    def is_share(self) -> bool:
        return self.gpus == 1 and (self.gpu_milli < FULL_GPU_MILLI or self.gpu_mem_mib > 0)

    @property
    def gpu_equivalent(self) -> float:
        """GPUs this pod takes, counting a share by its compute fraction."""
        if self.is_share:
            return self.gpu_milli / FULL_GPU_MILLI
        return float(self.gpus)

    @property
    def gpu_milli_total(self) -> int:
        return self.gpus * self.gpu_milli if self.gpus else 0


class PodSet(Frozen):
    """A group of identical pods of one Workload."""

    name: str
    count: int
    min_count: int | None = None
    request: PodRequest
    node_selector: dict[str, str] = Field(default_factory=dict)
    affinity_terms: tuple[NodeSelectorTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    admission_tolerations: tuple[Toleration, ...] = ()
    """What the cluster's admission adds to each pod (ExtendedResourceToleration); not in the template."""
    required_topology: str | None = None
    preferred_topology: str | None = None
    nvlink_required: bool = False
    allow_mixed_products: bool = False

    @property
    def needed(self) -> int:
        """Pods that must run for the gang to start."""
        return self.min_count if self.min_count is not None else self.count


class QuotaReservation(Frozen):
    """Kueue's ``status.admission``: the ClusterQueue and flavor per PodSet and resource."""

    cluster_queue: str
    flavors: dict[str, dict[str, str]] = Field(default_factory=dict)
    """PodSet name -> resource -> flavor name."""
    counts: dict[str, int] = Field(default_factory=dict)


class CheckState(StrEnum):
    PENDING = "Pending"
    READY = "Ready"
    RETRY = "Retry"
    REJECTED = "Rejected"


class Workload(Frozen):
    """A Kueue Workload waiting for placement."""

    namespace: str
    name: str
    uid: str = ""
    queue_name: str = ""
    cluster_queue: str | None = None
    priority: int = 0
    created: datetime
    pod_sets: tuple[PodSet, ...]
    reservation: QuotaReservation | None = None
    admission_checks: dict[str, CheckState] = Field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def gpu_demand(self) -> float:
        """GPUs the workload needs to start (minCount where set)."""
        return sum(ps.needed * ps.request.gpu_equivalent for ps in self.pod_sets)

    @property
    def queue_key(self) -> tuple[int, float, str]:
        """Kueue's queue order: higher priority first, then older first (then by name, to be total)."""
        return (-self.priority, self.created.timestamp(), self.key)


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


class Snapshot(Frozen):
    """Everything the planner knows about the cluster at one instant."""

    nodes: tuple[Node, ...]
    usage: dict[str, NodeUsage] = Field(default_factory=dict)
    workloads: tuple[Workload, ...] = ()
    """Pending workloads only: not admitted, not finished, active."""
    cluster_queues: tuple[ClusterQueue, ...] = ()
    local_queues: tuple[LocalQueue, ...] = ()
    flavors: tuple[ResourceFlavor, ...] = ()
    topologies: tuple[Topology, ...] = ()
    default_topology_levels: tuple[str, ...] = DEFAULT_TOPOLOGY_LEVELS
    warnings: tuple[str, ...] = ()
    source: str = ""

    def node(self, name: str) -> Node | None:
        return next((n for n in self.nodes if n.name == name), None)

    def usage_of(self, name: str) -> NodeUsage:
        return self.usage.get(name, NodeUsage())

    def cluster_queue(self, name: str | None) -> ClusterQueue | None:
        return next((cq for cq in self.cluster_queues if cq.name == name), None) if name else None

    def flavor(self, name: str | None) -> ResourceFlavor | None:
        return next((f for f in self.flavors if f.name == name), None) if name else None

    def topology(self, name: str | None) -> Topology | None:
        return next((t for t in self.topologies if t.name == name), None) if name else None

    def cluster_queue_of(self, workload: Workload) -> ClusterQueue | None:
        """The ClusterQueue a workload's LocalQueue points to (or its reservation's)."""
        if workload.reservation is not None:
            return self.cluster_queue(workload.reservation.cluster_queue)
        if workload.cluster_queue:
            return self.cluster_queue(workload.cluster_queue)
        for lq in self.local_queues:
            if lq.namespace == workload.namespace and lq.name == workload.queue_name:
                return self.cluster_queue(lq.cluster_queue)
        return None

    def topology_levels_for(self, flavor: ResourceFlavor | None) -> tuple[str, ...]:
        """Level node labels, coarsest first: the flavor's Topology or the configured defaults."""
        if flavor is not None and flavor.topology_name:
            topology = self.topology(flavor.topology_name)
            if topology is not None:
                return topology.levels
        return self.default_topology_levels

    @property
    def total_gpus(self) -> int:
        return sum(len(n.healthy_gpus) for n in self.nodes)
