"""GPU fragmentation as defined by FGD (Weng et al., USENIX ATC'23).

Free GPU capacity is only useful if the work that actually arrives can use
it. FGD measures, for one node and one task shape, how much of the node's free
GPU compute that task could *not* use:

* the task cannot run on the node at all (CPU, memory, pod slots, GPU model,
  number of GPUs or per-GPU share do not fit): all free GPU compute counts;
* the task can run: the free amounts of the GPUs whose leftover is smaller
  than the task's per-GPU demand count (a whole-GPU task cannot use a GPU
  that is 0.3 free; a 0.5-GPU share cannot use a GPU that is 0.3 free);
* a task that needs no GPU cannot use any GPU, so all free GPU compute counts
  (the authors' simulator treats CPU-only tasks this way; their weight is the
  same for every node, so they shift the measure without changing rankings).

The node's fragmentation is the popularity-weighted sum over the workload's
typical shapes; the cluster's is the sum over nodes. Values are in GPUs
(milli / 1000). Fragmentation depends only on a node's free state, so
:class:`FragMeter` memoises it by that state: thousands of nodes share a few
hundred distinct states in a trace replay.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

from optsched.capacity.state import UNLIMITED_TASKS, ClusterState, NodeState
from optsched.model.snapshot import FULL_GPU_MILLI, PodRequest

Shape = tuple[PodRequest, float]
"""A typical task: its request and its popularity weight (weights sum to 1)."""


class ProductRequest(PodRequest):
    """A pod request that may only run on some GPU products (a trace's ``gpu_spec``).

    Kept separate from :class:`PodRequest` because product constraints normally
    live on the pod set (node selectors); the trace replay and the typical
    shapes of a workload need them on the request itself.
    """

    products: frozenset[str] = frozenset()
    """Allowed GPU products; empty means any."""


def products_of(req: PodRequest) -> frozenset[str]:
    """Allowed GPU products of a request (empty = any)."""
    return req.products if isinstance(req, ProductRequest) else frozenset()


def request_key(req: PodRequest) -> tuple[Hashable, ...]:
    """A hashable identity of a request's shape (PodRequest holds a dict, so it is not hashable)."""
    return (
        req.cpu_milli,
        req.memory_mib,
        req.gpus,
        req.gpu_milli,
        req.gpu_mem_mib,
        req.gpu_mem_percent,
        tuple(sorted(req.extended.items())),
        tuple(sorted(products_of(req))),
    )


def typical_shapes(requests: Iterable[PodRequest], limit: int = 32, coverage: float = 0.95) -> list[Shape]:
    """The workload's most popular request shapes with normalised weights.

    Following the FGD authors: count identical shapes, take them in decreasing
    popularity until they cover ``coverage`` of all tasks (the authors use
    95%), then renormalise the kept weights to sum to 1. ``limit`` caps the
    number of shapes so the measure stays cheap on very diverse queues.
    Tasks without GPUs are included: they are part of the demand that free
    GPUs cannot serve.
    """
    return counted_shapes(((req, 1) for req in requests), limit=limit, coverage=coverage)


def counted_shapes(
    counted: Iterable[tuple[PodRequest, int]], limit: int = 32, coverage: float = 0.95
) -> list[Shape]:
    """:func:`typical_shapes` of requests given with how many pods ask for each (a PodSet's count).

    Work grows with the number of PodSets, never with their counts.
    """
    counts: Counter[tuple[Hashable, ...]] = Counter()
    first: dict[tuple[Hashable, ...], PodRequest] = {}
    for req, pods in counted:
        key = request_key(req)
        counts[key] += pods
        first.setdefault(key, req)
    total = sum(counts.values())
    if total == 0:
        return []
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], _rank_tiebreak(first[kv[0]])))
    kept: list[tuple[PodRequest, int]] = []
    covered = 0
    for key, count in ranked:
        if covered >= coverage * total or len(kept) >= limit:
            break
        kept.append((first[key], count))
        covered += count
    return [(req, count / covered) for req, count in kept]


def _rank_tiebreak(req: PodRequest) -> tuple[int, int, int, str]:
    # Equal popularity: larger CPU, then larger per-GPU share, then more GPUs first (the authors' order).
    return (-req.cpu_milli, -req.gpu_milli, -req.gpus, ",".join(sorted(products_of(req))))


@dataclass(frozen=True)
class _Entry:
    cpu: int
    mem: int
    ext: tuple[tuple[str, int], ...]
    weight: float


@dataclass(frozen=True)
class _Group:
    """Shapes with the same GPU demand: the per-GPU scan is done once for all of them."""

    milli: int
    gpus: int
    gpu_mem: int
    products: frozenset[str]
    entries: tuple[_Entry, ...]
    weight: float


@dataclass(frozen=True)
class _Compiled:
    cpu_only_weight: float
    groups: tuple[_Group, ...]


def _compile(shapes: Sequence[Shape]) -> _Compiled:
    cpu_only = 0.0
    grouped: dict[tuple[int, int, int, frozenset[str]], list[_Entry]] = {}
    for req, weight in shapes:
        if req.gpus == 0:
            cpu_only += weight
            continue
        key = (req.gpu_milli, req.gpus, req.gpu_mem_mib if req.is_share else 0, products_of(req))
        entry = _Entry(req.cpu_milli, req.memory_mib, tuple(sorted(req.extended.items())), weight)
        grouped.setdefault(key, []).append(entry)
    groups = tuple(
        _Group(milli, gpus, gpu_mem, products, tuple(entries), sum(e.weight for e in entries))
        for (milli, gpus, gpu_mem, products), entries in grouped.items()
    )
    return _Compiled(cpu_only, groups)


def node_key(node: NodeState) -> tuple[Hashable, ...]:
    """Everything the fragmentation of a node depends on."""
    return (
        node.product,
        node.cpu,
        node.mem,
        node.pods > 0,
        node.unknown,
        tuple(node.gpu_milli),
        tuple(node.gpu_mem),
        node.gpu_mem_total,
        tuple(node.healthy),
        tuple(sorted(node.ext.items())) if node.ext else (),
        tuple(node.gpu_tasks) if node.tasks_total < UNLIMITED_TASKS else (),
    )


_Profile = tuple[int, tuple[tuple[_Group, bool, int], ...]]
"""Free GPU milli of a node, and per shape group: whether its GPUs fit and the milli it cannot use."""


def _gpu_profile(
    compiled: _Compiled,
    product: str,
    pods_ok: bool,
    unknown: int,
    gpu_milli: Sequence[int],
    gpu_mem: Sequence[int],
    gpu_mem_total: int,
    healthy: Sequence[bool],
) -> _Profile:
    free_total = sum(gpu_milli) - unknown * FULL_GPU_MILLI
    whole = -1
    partial = 0
    rows: list[tuple[_Group, bool, int]] = []
    for group in compiled.groups:
        if not pods_ok or (group.products and product not in group.products):
            rows.append((group, False, free_total))
            continue
        if group.milli >= FULL_GPU_MILLI:
            if whole < 0:
                whole = 0
                for g, m, h in zip(gpu_milli, gpu_mem, healthy, strict=True):
                    if g < FULL_GPU_MILLI:
                        partial += g
                    elif h and m == gpu_mem_total:
                        whole += 1
            rows.append((group, whole - unknown >= group.gpus, partial))
        else:
            usable = 0
            unusable = 0
            for g, m, h in zip(gpu_milli, gpu_mem, healthy, strict=True):
                if h and g >= group.milli and m >= group.gpu_mem:
                    usable += 1
                else:
                    unusable += g
            rows.append((group, usable >= group.gpus, unusable))
    return free_total, tuple(rows)


def _combine(compiled: _Compiled, profile: _Profile, cpu: int, mem: int, ext: dict[str, int]) -> float:
    free_total, rows = profile
    if free_total <= 0:
        return 0.0
    frag = compiled.cpu_only_weight * free_total
    for group, gpu_fits, unusable in rows:
        if not gpu_fits:
            frag += group.weight * free_total
            continue
        for entry in group.entries:
            runs = entry.cpu <= cpu and entry.mem <= mem
            if runs and entry.ext:
                runs = all(ext.get(name, 0) >= amount for name, amount in entry.ext)
            frag += entry.weight * (unusable if runs else free_total)
    return frag


class FragMeter:
    """FGD fragmentation of nodes against fixed shapes, memoised by node state.

    Two memo levels: the per-GPU scan depends only on the GPUs' free state, so
    it is shared by every CPU/memory level of the same GPU state.
    """

    def __init__(self, shapes: Sequence[Shape], *, max_entries: int = 500_000) -> None:
        self.shapes = list(shapes)
        self._compiled = _compile(self.shapes)
        self._memo: dict[tuple[Hashable, ...], float] = {}
        self._profiles: dict[tuple[Hashable, ...], _Profile] = {}
        self._max_entries = max_entries

    def node(self, node: NodeState) -> float:
        """Fragmented free GPU compute of ``node``, in GPUs."""
        key = node_key(node)
        value = self._memo.get(key)
        if value is None:
            value = self.raw(
                node.product,
                node.cpu,
                node.mem,
                node.pods > 0,
                node.unknown,
                node.gpu_milli,
                node.gpu_mem,
                node.gpu_mem_total,
                node.healthy,
                node.ext,
            )
            self._store(key, value)
        return value

    def raw(
        self,
        product: str,
        cpu: int,
        mem: int,
        pods_ok: bool,
        unknown: int,
        gpu_milli: Sequence[int],
        gpu_mem: Sequence[int],
        gpu_mem_total: int,
        healthy: Sequence[bool],
        ext: dict[str, int],
    ) -> float:
        """Fragmentation of a free state given field by field, in GPUs."""
        # Fragmentation does not depend on which GPU index holds which leftover: sort for more hits.
        gpus = tuple(sorted(zip(gpu_milli, gpu_mem, healthy, strict=True)))
        gpu_key = (product, pods_ok, unknown, gpus, gpu_mem_total)
        profile = self._profiles.get(gpu_key)
        if profile is None:
            profile = _gpu_profile(
                self._compiled, product, pods_ok, unknown, gpu_milli, gpu_mem, gpu_mem_total, healthy
            )
            if len(self._profiles) >= self._max_entries:
                self._profiles.clear()
            self._profiles[gpu_key] = profile
        return _combine(self._compiled, profile, cpu, mem, ext) / FULL_GPU_MILLI

    def after(self, node: NodeState, req: PodRequest, gpus: Sequence[int]) -> float:
        """Fragmentation of ``node`` if ``req`` were placed on ``gpus`` (the node is not changed)."""
        milli = list(node.gpu_milli)
        mem = list(node.gpu_mem)
        need_mem = node.share_mem(req) if req.is_share else 0
        for gpu in gpus:
            if req.is_share:
                milli[gpu] -= req.gpu_milli
                mem[gpu] -= need_mem
            else:
                milli[gpu] = 0
                mem[gpu] = 0
        ext = node.ext
        if req.extended:
            ext = {k: v - req.extended.get(k, 0) for k, v in node.ext.items()}
        cpu, mem_left, pods_ok = node.cpu - req.cpu_milli, node.mem - req.memory_mib, node.pods > 1
        # GPUs the node picks (no indices given) are GPUs of unknown index.
        unknown = node.unknown + (req.gpus if req.gpus and not gpus else 0)
        key = (
            node.product,
            cpu,
            mem_left,
            pods_ok,
            unknown,
            tuple(milli),
            tuple(mem),
            node.gpu_mem_total,
            tuple(node.healthy),
            tuple(sorted(ext.items())) if ext else (),
        )
        value = self._memo.get(key)
        if value is None:
            value = self.raw(
                node.product,
                cpu,
                mem_left,
                pods_ok,
                unknown,
                milli,
                mem,
                node.gpu_mem_total,
                node.healthy,
                ext,
            )
            self._store(key, value)
        return value

    def _store(self, key: tuple[Hashable, ...], value: float) -> None:
        if len(self._memo) >= self._max_entries:
            self._memo.clear()
        self._memo[key] = value


def node_fragmentation(node: NodeState, shapes: Sequence[Shape]) -> float:
    """FGD fragmentation of one node against the typical shapes, in GPUs."""
    return FragMeter(shapes).node(node)


def cluster_fragmentation(state: ClusterState, shapes: Sequence[Shape]) -> float:
    """Sum of node fragmentation over the cluster, in GPUs."""
    meter = FragMeter(shapes)
    return sum(meter.node(n) for n in state.nodes)


def stranded_gpus(state: ClusterState, shapes: Sequence[Shape]) -> int:
    """Whole free GPUs on nodes where no GPU-using shape of the queue can be placed.

    CPU-only shapes are ignored: placing one would leave the GPUs just as idle.
    """
    gpu_shapes = [req for req, _ in shapes if req.gpus > 0]
    stranded = 0
    for node in state.nodes:
        whole = node.whole_free
        if whole == 0:
            continue
        if not any(_shape_fits(node, req) for req in gpu_shapes):
            stranded += whole
    return stranded


def _shape_fits(node: NodeState, req: PodRequest) -> bool:
    allowed = products_of(req)
    if allowed and node.product not in allowed:
        return False
    return node.fits(req)
