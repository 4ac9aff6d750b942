"""The frozen cluster snapshot every planner, policy and validator reads.

A :class:`Snapshot` is built once (from a kubectl dump or a live cluster) and
never mutated: the solver, the greedy baselines and ``check_plan`` all see the
same facts. Quantities are small integers: CPU in millicores, memory in MiB,
GPU shares in thousandths of a GPU ("milli").
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import Field

from optsched.model.mig import MigGpu, compute_slices
from optsched.model.names import DEFAULT_TOPOLOGY_LEVELS, PRODUCT_LABEL
from optsched.model.queues import (
    ClusterQueue,
    FlavorQuota,
    LocalQueue,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Topology,
)
from optsched.model.reasons import Reason
from optsched.model.scheduling import Frozen, NodeSelectorTerm, SelectorRequirement, Taint, Toleration

__all__ = [
    "FULL_GPU_MILLI",
    "AssumedPod",
    "CheckState",
    "ClusterQueue",
    "FlavorQuota",
    "Frozen",
    "GpuMode",
    "HeldWorkload",
    "LeftOut",
    "LocalQueue",
    "Node",
    "NodeSelectorTerm",
    "NodeUsage",
    "PodRequest",
    "PodSet",
    "QuotaReservation",
    "ResourceFlavor",
    "ResourceGroup",
    "ResourceQuota",
    "SelectorRequirement",
    "Snapshot",
    "Taint",
    "Toleration",
    "Topology",
    "Workload",
]


class GpuMode(StrEnum):
    """How a node's GPUs are handed to containers, detected from the cluster.

    ``dra``: a ResourceSlice of NVIDIA's DRA driver (``gpu.nvidia.com``) names
    the node; its GPUs, UUIDs and memory come from the slice, and per-pod
    ResourceClaims pin exact devices. ``device-plugin``: NVIDIA's device plugin
    advertises ``nvidia.com/gpu`` in the node's allocatable and picks devices
    itself (optsched predicts its choice).
    """

    DRA = "dra"
    DEVICE_PLUGIN = "device-plugin"


FULL_GPU_MILLI = 1000
"""A whole GPU in the planner's unit of GPU compute (thousandths of a GPU)."""
MIG_COMPUTE_SLICES = 7
"""Compute slices of every MIG-capable GPU (A100, H100, H200, B200)."""


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
    gpu_split: int = 0
    """Most tasks (whole pods or shares) one GPU holds at once, HAMi's split count; 0 = no limit."""
    gpu_uuids: tuple[str, ...] = ()
    """GPU UUID per index, where the node says (HAMi's register annotation)."""
    hami: bool = False
    """HAMi's device plugin runs here: GPUs and the devices pods hold come from HAMi's annotations."""
    gpu_mode: GpuMode = GpuMode.DEVICE_PLUGIN
    """How containers get their GPUs here (see :class:`GpuMode`)."""
    mig_gpus: tuple[MigGpu, ...] = ()
    """The MIG-enabled GPUs, from the node's NodeGPUs: their instances and whether they may change."""

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

    def mig_gpu(self, index: int) -> MigGpu | None:
        """The MIG-enabled GPU of this index; None where GPU ``index`` is not one."""
        return next((g for g in self.mig_gpus if g.index == index), None)

    @property
    def mig_unavailable(self) -> dict[str, int]:
        """Per MIG resource: advertised instances no pod may be given now (a layout change is in flight)."""
        out: dict[str, int] = {}
        for gpu in self.mig_gpus:
            for name, count in gpu.unavailable.items():
                out[name] = out.get(name, 0) + count
        return out

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
    gpu_tasks: tuple[int, ...] = ()
    """Per GPU index: tasks on it, counted against the node's split count."""


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
    """Number of GPU devices; for shares, each one a share of a different GPU (HAMi's meaning)."""
    gpu_milli: int = FULL_GPU_MILLI
    """Compute per device, in thousandths; below 1000 only for shares."""
    gpu_mem_mib: int = 0
    """Memory per device for a share (HAMi ``nvidia.com/gpumem``); 0 = see :meth:`share_memory`."""
    gpu_mem_percent: int = 0
    """Percent of each device's memory for a share (HAMi ``nvidia.com/gpumem-percentage``)."""
    listed: dict[str, int] = Field(default_factory=dict)
    """HAMi share resources as the containers list them, summed: what Kueue counts against quota."""
    extended: dict[str, int] = Field(default_factory=dict)
    dra_gpus: bool = False
    """Some GPUs are asked through ResourceClaimTemplates: only a DRA node can allocate them."""
    split_gpus: bool = False
    """Whole GPUs asked by more than one container: a device plugin picks them container by container."""

    @property
    def is_share(self) -> bool:
        """Each device is a share of one GPU, not the whole GPU."""
        return self.gpus >= 1 and (
            self.gpu_milli < FULL_GPU_MILLI or self.gpu_mem_mib > 0 or self.gpu_mem_percent > 0
        )

    def share_memory(self, gpu_memory_mib: int, *, hami: bool = False) -> int:
        """MiB one device of a share takes on a GPU of ``gpu_memory_mib``.

        The larger of the MiB and the percentage where a pod names both (its
        containers differ). HAMi gives a share that names neither all of the
        GPU's memory (its ``defaultMemory`` of 0); elsewhere such a share is
        limited by compute only.
        """
        if self.gpu_mem_mib or self.gpu_mem_percent:
            return max(self.gpu_mem_mib, gpu_memory_mib * self.gpu_mem_percent // 100)
        return gpu_memory_mib if hami else 0

    @property
    def gpu_equivalent(self) -> float:
        """GPUs this pod takes, counting a share by its compute fraction."""
        if self.is_share:
            return self.gpus * self.gpu_milli / FULL_GPU_MILLI
        return float(self.gpus)

    @property
    def gpu_milli_total(self) -> int:
        return self.gpus * self.gpu_milli if self.gpus else 0

    @property
    def mig_milli(self) -> int:
        """Thousandths of a GPU the pod's MIG instances take, by compute slices (a 3g is 3/7 of a GPU)."""
        slices = sum(amount * compute_slices(name) for name, amount in self.extended.items() if amount > 0)
        return slices * FULL_GPU_MILLI // MIG_COMPUTE_SLICES


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


class HeldWorkload(Frozen):
    """A pending Workload Kueue could not admit as its queues stand: never planned, always deferred."""

    workload: Workload
    reason: Reason
    """What Kueue itself would say (a missing or inactive queue, a namespace its queue does not select)."""


class LeftOut(Frozen):
    """An object of the input that could not be read and was left out of the snapshot."""

    kind: str
    namespace: str = ""
    name: str = ""
    message: str
    """What is wrong with it: file, object, field and what was expected."""


class Snapshot(Frozen):
    """Everything the planner knows about the cluster at one instant."""

    nodes: tuple[Node, ...]
    usage: dict[str, NodeUsage] = Field(default_factory=dict)
    workloads: tuple[Workload, ...] = ()
    """Pending workloads only: not admitted, not finished, active, and admissible by their queues."""
    held: tuple[HeldWorkload, ...] = ()
    """Pending workloads their LocalQueue, ClusterQueue or namespace keeps out of Kueue's reach."""
    cluster_queues: tuple[ClusterQueue, ...] = ()
    local_queues: tuple[LocalQueue, ...] = ()
    flavors: tuple[ResourceFlavor, ...] = ()
    topologies: tuple[Topology, ...] = ()
    default_topology_levels: tuple[str, ...] = DEFAULT_TOPOLOGY_LEVELS
    warnings: tuple[str, ...] = ()
    left_out: tuple[LeftOut, ...] = ()
    """Objects that could not be read; each is also among the warnings."""
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
