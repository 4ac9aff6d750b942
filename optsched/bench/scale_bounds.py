"""Bounds on each quality figure of ``bench scale``, from the snapshot alone.

A policy's figure means little without the best any policy could reach. Each
bound below holds for every valid plan of the snapshot, whatever its policy,
and is proved by construction:

- **GPUs admitted** (upper bound). A workload is admitted whole, on one GPU
  product, using free GPU compute of nodes that pass its node filters and hold
  its pods (:func:`optsched.capacity.fit.pods_that_fit`, the count every
  policy and the solver use). Let P(w) be the products on whose free capacity
  alone every PodSet of w fits (within one domain where it requires one); a
  workload with no such product is never admitted. For any set S of products,
  the admitted workloads with P(w) within S sit on S's free compute F(S), so
  their demand is a subset sum of those workloads' demands at most F(S), and
  the others admit at most their own demand. The bound is the least, over S,
  of that largest subset sum (exact, by a bitset over demands in units of
  their common divisor) plus the other workloads' demand. The same holds per
  grain g: workloads whose pods all take a multiple of g whole GPUs use, on a
  node with w whole GPUs free, at most g * (w // g) of them, so F_g(S) sums
  that over S's nodes. Priorities, quotas, CPU and the rest of how shapes
  pack are ignored, which only loosens the bound.
- **Racks and blocks per gang** (lower bound, per gang). Free capacity only
  shrinks as a plan fills the cluster, so a gang's pods need at least the
  fewest racks (blocks) whose nodes of one allowed product, counted by
  ``pods_that_fit`` on the snapshot as it is, hold the pods it needs; a gang
  requiring a rack spans one, a gang requiring a block the fewest racks of the
  best block. Which gangs are admitted differs by policy, and
  ``PlanSummary.racks_per_gang`` is a mean over the admitted gangs (workloads
  of more than one pod), so the bound is a mean over a given admitted set:
  :meth:`ScaleBounds.racks_per_gang` over the gangs a plan admitted is at most
  that plan's figure.
- **NVLink-island hit** (upper bound). ``PlanSummary`` counts a multi-GPU
  whole-GPU pod as a hit when its GPUs lie in one island. A pod of g GPUs can
  only hit where an eligible node has an island with g fully free GPUs. The
  pods of g or more GPUs that hit sit in islands with at least g free GPUs,
  so their GPUs sum to at most R_g, the free GPUs of those islands; where
  every such pod size is a multiple of g, an island of f free GPUs gives them
  at most g * (f // g), which R_g then counts instead. Over an admitted set,
  the most hits these volumes allow (pods that could hit, smallest first,
  each size within every R_g up to it: the smallest pods use the least of
  every volume they count in) over the set's multi-GPU pods bounds the share.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import combinations

from optsched.bench.scale_domains import Capacity, pod_set_capacity
from optsched.capacity.state import ClusterState
from optsched.model.snapshot import FULL_GPU_MILLI, Snapshot, Workload

MAX_SUBSET_PRODUCTS = 8
"""With more products than this, only the set of all products is tried (2^n subsets grow fast)."""


@dataclass(frozen=True)
class WorkloadFloor:
    """What the snapshot alone says about one pending workload if it is admitted."""

    key: str
    demand_milli: int
    """GPU compute of all its pods (shares by their compute)."""
    rigid: bool
    """Admitted with all its pods (no ``minCount`` below the count)."""
    whole_gpus: int
    """The largest g dividing every pod's GPU count, where all its pods take whole GPUs; else 0."""
    products: frozenset[str]
    """Products on which it fits whole; empty: no plan admits it."""
    racks: int
    """Fewest racks its pods can span: 0 for a single pod, at least 1 for a gang."""
    blocks: int
    multi_pods: int
    """Its pods of more than one whole GPU."""
    island_pods: dict[int, int] = field(default_factory=dict)
    """GPUs per pod -> its multi-GPU pods of that size that some eligible node could hold in one island."""


@dataclass(frozen=True)
class ScaleBounds:
    """The bounds of one snapshot; the per-set ones are evaluated on a plan's admitted workloads."""

    gpus_admitted: float
    workloads: dict[str, WorkloadFloor]
    island_room: dict[int, int]
    """GPUs per pod g -> R_g: the most GPUs the hits of pods of g or more GPUs can take together."""

    def racks_per_gang(self, admitted: Iterable[str]) -> float | None:
        """Lower bound on ``PlanSummary.racks_per_gang`` of a plan admitting ``admitted``."""
        return _mean(self.workloads[k].racks for k in admitted if self.workloads[k].racks)

    def blocks_per_gang(self, admitted: Iterable[str]) -> float | None:
        """Lower bound on the mean blocks per admitted gang."""
        return _mean(self.workloads[k].blocks for k in admitted if self.workloads[k].blocks)

    def nvlink_hit(self, admitted: Iterable[str]) -> float | None:
        """Upper bound on the share of the admitted multi-GPU pods in one NVLink island."""
        floors = [self.workloads[k] for k in admitted]
        multi = sum(f.multi_pods for f in floors)
        if not multi:
            return None
        by_size: dict[int, int] = {}
        for f in floors:
            for size, pods in f.island_pods.items():
                by_size[size] = by_size.get(size, 0) + pods
        left = dict(self.island_room)
        hits = 0
        for size in sorted(by_size):
            fit = min([by_size[size], *(room // size for g, room in left.items() if g <= size)])
            hits += fit
            for g in left:
                if g <= size:
                    left[g] -= fit * size
        return hits / multi


def _mean(values: Iterable[int]) -> float | None:
    items = list(values)
    return sum(items) / len(items) if items else None


def scale_bounds(snapshot: Snapshot) -> ScaleBounds:
    """Every bound of ``snapshot`` (see the module docstring)."""
    state = ClusterState.from_snapshot(snapshot)
    capacity = Capacity(snapshot, state)
    floors = {w.key: _floor(capacity, w) for w in snapshot.workloads}
    grains = sorted({f.whole_gpus for f in floors.values() if f.whole_gpus > 1} | {1})
    free: dict[tuple[int, str], int] = {}
    for node in snapshot.nodes:
        ns = state.by_name[node.name]
        for grain in grains:
            room = (
                max(0, ns.free_gpu_milli) if grain == 1 else grain * (ns.whole_free // grain) * FULL_GPU_MILLI
            )
            free[grain, node.product] = free.get((grain, node.product), 0) + room
    sizes = {s for f in floors.values() for s in f.island_pods}
    islands = {g: capacity.island_room(g, aligned=all(s % g == 0 for s in sizes if s >= g)) for g in sizes}
    return ScaleBounds(_admitted_bound(list(floors.values()), free, grains), floors, islands)


def _floor(capacity: Capacity, workload: Workload) -> WorkloadFloor:
    sets = [pod_set_capacity(capacity, workload, ps) for ps in workload.pod_sets]
    mixed = any(ps.allow_mixed_products for ps in workload.pod_sets)
    products = frozenset.union(*(s.products for s in sets)) if mixed else _common(s.products for s in sets)
    pods = sum(ps.needed for ps in workload.pod_sets)
    island_pods: dict[int, int] = {}
    for ps, fit in zip(workload.pod_sets, sets, strict=True):
        if fit.island_possible:
            island_pods[ps.request.gpus] = island_pods.get(ps.request.gpus, 0) + ps.count
    return WorkloadFloor(
        key=workload.key,
        demand_milli=sum(
            ps.count * _milli(ps.request.gpus, ps.request.gpu_milli, ps.request.is_share)
            for ps in workload.pod_sets
        ),
        rigid=all(ps.needed == ps.count for ps in workload.pod_sets),
        whole_gpus=0
        if any(ps.request.is_share for ps in workload.pod_sets)
        else math.gcd(*(ps.request.gpus for ps in workload.pod_sets)),
        products=products,
        racks=0 if pods < 2 else max(1, *(s.racks for s in sets)),
        blocks=0 if pods < 2 else max(1, *(s.blocks for s in sets)),
        multi_pods=sum(
            ps.count for ps in workload.pod_sets if ps.request.gpus > 1 and not ps.request.is_share
        ),
        island_pods=island_pods,
    )


def _common(product_sets: Iterable[frozenset[str]]) -> frozenset[str]:
    sets = list(product_sets)
    return frozenset.intersection(*sets) if sets else frozenset()


def _milli(gpus: int, milli: int, share: bool) -> int:
    return gpus * (milli if share else FULL_GPU_MILLI)


def _admitted_bound(
    floors: list[WorkloadFloor], free: dict[tuple[int, str], int], grains: list[int]
) -> float:
    """The least, over product sets S and grains g, of the best subset sum within F_g(S) plus the rest.

    Grain 1 is every workload against all free compute; grain g > 1 the
    workloads whose pods all take multiples of g whole GPUs, against g times
    the whole multiples of g free per node.
    """
    fitting = [f for f in floors if f.products and f.demand_milli > 0]
    products = sorted({p for f in fitting for p in f.products})
    if len(products) > MAX_SUBSET_PRODUCTS:
        subsets: list[tuple[str, ...]] = [tuple(products)]
    else:
        subsets = [c for r in range(1, len(products) + 1) for c in combinations(products, r)]
    total = sum(f.demand_milli for f in fitting)
    best = float(total)
    for grain in grains:
        members = [f for f in fitting if grain == 1 or (f.whole_gpus and f.whole_gpus % grain == 0)]
        for subset in subsets:
            chosen = set(subset)
            inside = [f for f in members if f.products <= chosen]
            rest = total - sum(f.demand_milli for f in inside)
            best = min(best, _fill(inside, sum(free.get((grain, p), 0) for p in subset)) + rest)
    return round(best / FULL_GPU_MILLI, 3)


def _fill(floors: list[WorkloadFloor], capacity: int) -> int:
    """Most compute ``floors`` can admit within ``capacity``: exact for rigid ones, divisible the rest."""
    rigid = [f.demand_milli for f in floors if f.rigid]
    divisible = sum(f.demand_milli for f in floors if not f.rigid)
    unit = math.gcd(*rigid) if rigid else 1
    cap = capacity // unit
    mask = (1 << (cap + 1)) - 1
    reach = 1
    for demand in rigid:
        reach = (reach | (reach << (demand // unit))) & mask
    return min(capacity, (reach.bit_length() - 1) * unit + divisible)
