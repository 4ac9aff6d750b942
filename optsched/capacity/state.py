"""Mutable free capacity of the cluster, for greedy policies and plan bookkeeping.

The snapshot is frozen; placing pods one at a time (greedy baselines, the
solver's fallback, trace replay, the intra-node GPU assignment after a solve)
needs a cheap mutable copy. :class:`NodeState` keeps per-GPU free compute,
memory and task slots (HAMi's split count) so whole GPUs, shares and NVLink
islands are all answered in one place.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from optsched.model.snapshot import FULL_GPU_MILLI, GpuMode, Node, NodeUsage, PodRequest, Snapshot
from optsched.topology.best_effort import Board

UNLIMITED_TASKS = 1 << 20
"""Tasks a GPU takes where the node sets no split count."""


@dataclass
class NodeState:
    """Free capacity of one node; GPU lists are indexed by GPU index."""

    name: str
    product: str
    cpu: int
    mem: int
    pods: int
    gpu_milli: list[int]
    gpu_mem: list[int]
    gpu_mem_total: int
    islands: list[tuple[int, ...]]
    healthy: list[bool]
    unknown: int = 0
    """Fully free-looking GPUs that are in fact taken, index unknown."""
    ext: dict[str, int] = field(default_factory=dict)
    cpu_total: int = 0
    mem_total: int = 0
    gpu_tasks: list[int] = field(default_factory=list)
    """Per GPU: more tasks it may take (HAMi's split count); all :data:`UNLIMITED_TASKS` without one."""
    tasks_total: int = UNLIMITED_TASKS
    hami: bool = False
    """Shares naming no memory take all of a GPU's memory here (HAMi's default)."""
    board: Board | None = None
    """Where NVIDIA's device plugin hands whole GPUs out (a device-plugin node, not HAMi): the board its
    best-effort choice is scored on, so the plan can predict it (``optsched.capacity.prediction``)."""
    _fully_free: tuple[int, ...] | None = field(default=None, repr=False, compare=False)
    """Cache of :meth:`fully_free_gpus`; :meth:`take` and :meth:`give_back` reset it."""

    def __post_init__(self) -> None:
        if not self.gpu_tasks:
            self.gpu_tasks = [self.tasks_total if h else 0 for h in self.healthy]

    @classmethod
    def from_node(cls, node: Node, usage: NodeUsage | None = None) -> NodeState:
        usage = usage or NodeUsage()
        count = node.gpu_count
        milli = [FULL_GPU_MILLI] * count
        mem = [node.gpu_memory_mib] * count
        for index, used in enumerate(usage.gpu_milli[:count]):
            milli[index] -= used
        for index, used in enumerate(usage.gpu_mem_mib[:count]):
            # More memory in use than the GPU has (a share asked for more): none is free, not less.
            mem[index] = max(0, mem[index] - used)
        healthy = [i not in node.unhealthy_gpus for i in range(count)]
        for index in range(count):
            if not healthy[index]:
                milli[index] = 0
                mem[index] = 0
        islands = list(node.nvlink_islands) or [(i,) for i in range(count)]
        total = node.gpu_split or UNLIMITED_TASKS
        tasks = [total - (usage.gpu_tasks[i] if i < len(usage.gpu_tasks) else 0) for i in range(count)]
        unavailable = node.mig_unavailable if node.mig_gpus else {}
        ext = {k: v - usage.extended.get(k, 0) - unavailable.get(k, 0) for k, v in node.extended.items()}
        return cls(
            name=node.name,
            product=node.gpu_product,
            cpu=node.cpu_milli - usage.cpu_milli,
            mem=node.memory_mib - usage.memory_mib,
            pods=node.max_pods - usage.pods,
            gpu_milli=milli,
            gpu_mem=mem,
            gpu_mem_total=node.gpu_memory_mib,
            islands=islands,
            healthy=healthy,
            unknown=usage.unknown_index_gpus,
            ext=ext,
            cpu_total=node.cpu_milli,
            mem_total=node.memory_mib,
            gpu_tasks=[max(0, t) if h else 0 for t, h in zip(tasks, healthy, strict=True)],
            tasks_total=total,
            hami=node.hami,
            board=device_plugin_board(node),
        )

    def copy(self) -> NodeState:
        return NodeState(
            name=self.name,
            product=self.product,
            cpu=self.cpu,
            mem=self.mem,
            pods=self.pods,
            gpu_milli=list(self.gpu_milli),
            gpu_mem=list(self.gpu_mem),
            gpu_mem_total=self.gpu_mem_total,
            islands=self.islands,
            healthy=self.healthy,
            unknown=self.unknown,
            ext=dict(self.ext),
            cpu_total=self.cpu_total,
            mem_total=self.mem_total,
            gpu_tasks=list(self.gpu_tasks),
            tasks_total=self.tasks_total,
            hami=self.hami,
            board=self.board,
        )

    # -- GPU facts -----------------------------------------------------------------------------

    @property
    def gpu_count(self) -> int:
        return len(self.gpu_milli)

    def is_fully_free(self, gpu: int) -> bool:
        """No compute, memory or task slot of the GPU is taken (a HAMi task may reserve neither)."""
        return (
            self.healthy[gpu]
            and self.gpu_milli[gpu] == FULL_GPU_MILLI
            and self.gpu_mem[gpu] == self.gpu_mem_total
            and self.gpu_tasks[gpu] == self.tasks_total
        )

    def fully_free_gpus(self) -> tuple[int, ...]:
        """Healthy GPUs with no share on them; cached because every policy asks per candidate node."""
        if self._fully_free is None:
            self._fully_free = tuple(i for i in range(self.gpu_count) if self.is_fully_free(i))
        return self._fully_free

    @property
    def whole_free(self) -> int:
        """Whole GPUs that can still be handed out (index-unknown usage subtracted)."""
        return max(0, len(self.fully_free_gpus()) - self.unknown)

    @property
    def free_gpu_milli(self) -> int:
        """All free compute on the node, shares included, in milli-GPUs."""
        return sum(self.gpu_milli) - self.unknown * FULL_GPU_MILLI

    @property
    def indices_known(self) -> bool:
        return self.unknown == 0

    def share_mem(self, req: PodRequest) -> int:
        """MiB each device of a share request takes on one of this node's GPUs."""
        return req.share_memory(self.gpu_mem_total, hami=self.hami)

    def fresh_share_fits(self, req: PodRequest) -> bool:
        """Whether a single share could open an untouched GPU, whose index is left to the node.

        Only where in-use GPUs have unknown indices: any free-looking GPU may be
        theirs, so the share is booked as one more GPU of unknown index. A pod
        of several shares there goes only on partly used GPUs of known index.
        """
        return (
            req.gpus == 1
            and not self.indices_known
            and self.whole_free >= 1
            and req.gpu_milli <= FULL_GPU_MILLI
            and self.share_mem(req) <= self.gpu_mem_total
        )

    # -- fit and placement ---------------------------------------------------------------------

    def fits_resources(self, req: PodRequest) -> bool:
        """CPU, memory, pod slots and extended resources (MIG slices) only."""
        if req.cpu_milli > self.cpu or req.memory_mib > self.mem or self.pods < 1:
            return False
        return all(self.ext.get(name, 0) >= amount for name, amount in req.extended.items())

    def fits(self, req: PodRequest) -> bool:
        return self.fits_resources(req) and self.choose_gpus(req) is not None

    def share_candidates(self, req: PodRequest) -> list[int]:
        """GPUs that can take one device of a share request; untouched GPUs only when indices are known."""
        out = []
        need_mem = self.share_mem(req)
        for gpu in range(self.gpu_count):
            if not self.healthy[gpu] or self.gpu_tasks[gpu] < 1:
                continue
            if self.gpu_milli[gpu] < req.gpu_milli or self.gpu_mem[gpu] < need_mem:
                continue
            if self.is_fully_free(gpu) and (self.unknown > 0 or self.whole_free == 0):
                continue
            out.append(gpu)
        return out

    def choose_gpus(self, req: PodRequest, *, island_aware: bool = True) -> list[int] | None:
        """GPU indices for one pod, or None if it does not fit.

        Whole GPUs come from one NVLink island where one can hold them (the
        tightest such island, so big islands stay whole); otherwise from as few
        islands as possible. Each device of a share goes on a different GPU,
        the busiest ones that still have room (best fit); on a node with
        index-unknown usage and too few such GPUs, on untouched ones whose
        indices the node picks (an empty list). An empty list otherwise means
        no GPU is needed; on a node with index-unknown usage, whole-GPU picks
        are still returned but callers must not promise them (see
        :attr:`indices_known`).
        """
        if req.gpus == 0:
            return []
        if req.is_share:
            candidates = self.share_candidates(req)
            if len(candidates) < req.gpus:
                return [] if self.fresh_share_fits(req) else None
            best = sorted(candidates, key=lambda g: (self.gpu_milli[g] - req.gpu_milli, g))[: req.gpus]
            return sorted(best)
        if self.whole_free < req.gpus:
            return None
        free = set(self.fully_free_gpus())
        if not island_aware:
            return sorted(free)[: req.gpus]
        return pick_whole_gpus(self.islands, free, req.gpus)

    def take(self, req: PodRequest, gpus: Iterable[int]) -> None:
        """Book one pod on this node (no checks: call :meth:`choose_gpus` first).

        A GPU pod booked without indices takes that many GPUs of unknown index
        (a share one whole GPU), as the node, not the plan, picks them.
        """
        self._fully_free = None
        self.cpu -= req.cpu_milli
        self.mem -= req.memory_mib
        self.pods -= 1
        for name, amount in req.extended.items():
            self.ext[name] = self.ext.get(name, 0) - amount
        need_mem = self.share_mem(req)
        gpus = list(gpus)
        if req.gpus and not gpus:
            self.unknown += req.gpus
        for gpu in gpus:
            if req.is_share:
                self.gpu_milli[gpu] -= req.gpu_milli
                self.gpu_mem[gpu] -= need_mem
                self.gpu_tasks[gpu] -= 1
            else:
                self.gpu_milli[gpu] = 0
                self.gpu_mem[gpu] = 0
                self.gpu_tasks[gpu] = 0

    def give_back(self, req: PodRequest, gpus: Iterable[int]) -> None:
        """Undo :meth:`take` (used when a gang cannot be completed)."""
        self._fully_free = None
        self.cpu += req.cpu_milli
        self.mem += req.memory_mib
        self.pods += 1
        for name, amount in req.extended.items():
            self.ext[name] = self.ext.get(name, 0) + amount
        need_mem = self.share_mem(req)
        gpus = list(gpus)
        if req.gpus and not gpus:
            self.unknown -= req.gpus
        for gpu in gpus:
            if req.is_share:
                self.gpu_milli[gpu] += req.gpu_milli
                self.gpu_mem[gpu] += need_mem
                self.gpu_tasks[gpu] += 1
            else:
                self.gpu_milli[gpu] = FULL_GPU_MILLI
                self.gpu_mem[gpu] = self.gpu_mem_total
                self.gpu_tasks[gpu] = self.tasks_total

    def in_one_island(self, gpus: Iterable[int]) -> bool:
        chosen = set(gpus)
        return any(chosen <= set(island) for island in self.islands)


def device_plugin_board(node: Node) -> Board | None:
    """The board NVIDIA's best-effort choice scores on ``node``; None where no device plugin chooses.

    That is a DRA node (kube-scheduler allocates what the claim names), a HAMi
    node (HAMi's own plugin chooses) or a node without GPUs. NUMA is used only
    where the node names it for every GPU, as the agent does.
    """
    if node.gpu_mode != GpuMode.DEVICE_PLUGIN or node.hami or node.gpu_count < 1:
        return None
    numa = node.numa if len(node.numa) == node.gpu_count else ()
    try:
        return Board(node.gpu_count, node.nvlink_islands, numa)
    except ValueError:
        return None  # islands the snapshot reader let through but no board holds: predict nothing


def pick_whole_gpus(islands: list[tuple[int, ...]], free: set[int], count: int) -> list[int] | None:
    """Choose ``count`` free GPUs touching as few NVLink islands as possible.

    One island if any can hold them (the one with the fewest free GPUs that
    still fits, so larger free islands stay available); else islands in
    decreasing order of free GPUs.
    """
    if len(free) < count:
        return None
    free_by_island = [sorted(free.intersection(island)) for island in islands]
    fitting = [f for f in free_by_island if len(f) >= count]
    if fitting:
        best = min(fitting, key=lambda f: (len(f), f[0]))
        return best[:count]
    chosen: list[int] = []
    for group in sorted(free_by_island, key=lambda f: (-len(f), f[:1])):
        for gpu in group:
            if len(chosen) == count:
                return sorted(chosen)
            chosen.append(gpu)
    return sorted(chosen) if len(chosen) == count else None


@dataclass
class ClusterState:
    """Free capacity of every node, by name, in snapshot order."""

    nodes: list[NodeState]
    by_name: dict[str, NodeState] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.by_name = {n.name: n for n in self.nodes}

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot) -> ClusterState:
        return cls([NodeState.from_node(n, snapshot.usage_of(n.name)) for n in snapshot.nodes])

    def copy(self) -> ClusterState:
        return ClusterState([n.copy() for n in self.nodes])

    @property
    def free_gpu_milli(self) -> int:
        return sum(n.free_gpu_milli for n in self.nodes)
