"""What every kind of reason needs: the node groups a gang may use, and its demand in words."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from optsched.capacity.eligibility import Candidates
from optsched.capacity.fit import pods_that_fit
from optsched.capacity.fragmentation import request_key
from optsched.capacity.state import NodeState
from optsched.model.snapshot import FULL_GPU_MILLI, Node, PodSet, Snapshot, Workload
from optsched.topology.domains import domain_of

MAX_NAMES = 3
"""Workloads named in one sentence; the rest are counted ("and 4 more")."""

PerPodSet = list[tuple[PodSet, list[Candidates]]]
"""Each PodSet of a workload with its eligible nodes per allowed flavor."""


def shape_key(ps: PodSet, cands: list[Candidates]) -> Hashable:
    """Everything a capacity answer for ``ps`` depends on besides the free state (its words name it)."""
    return (
        id(cands),
        ps.name,
        ps.needed,
        ps.required_topology,
        ps.allow_mixed_products,
        ps.nvlink_required,
        request_key(ps.request),
    )


def scopes(ps: PodSet, cands: list[Candidates]) -> list[tuple[str, list[Node]]]:
    """Node groups the pod set may use as one gang: per flavor, and per GPU product unless mixing."""
    out: list[tuple[str, list[Node]]] = []
    for cand in cands:
        nodes = list(cand.nodes)
        if not nodes:
            continue
        if ps.request.gpus and not ps.allow_mixed_products:
            for product in sorted({n.product for n in nodes}):
                out.append((product, [n for n in nodes if n.product == product]))
        else:
            label = ",".join(sorted({n.product for n in nodes if n.product}))
            out.append((label, nodes))
    return out


def domains(
    nodes: list[Node], level: str, flavor_levels: tuple[str, ...]
) -> dict[tuple[str, ...], list[Node]]:
    """The nodes grouped by their domain of ``level`` (nodes without the level's label left out)."""
    groups: dict[tuple[str, ...], list[Node]] = {}
    for node in nodes:
        domain = domain_of(node, flavor_levels, level)
        if domain is not None:
            groups.setdefault(domain, []).append(node)
    return groups


def levels_for(snapshot: Snapshot, cands: list[Candidates]) -> tuple[str, ...]:
    flavor = next((c.flavor for c in cands if c.flavor is not None), None)
    return snapshot.topology_levels_for(flavor)


def fits(node: NodeState, ps: PodSet, limit: int) -> int:
    return pods_that_fit(node, ps.request, nvlink_required=ps.nvlink_required, limit=limit)


def free_gpus(nodes: Sequence[NodeState], ps: PodSet) -> float:
    """Free GPUs a pod set can use: compute for shares, whole GPUs otherwise."""
    if ps.request.is_share:
        return sum(max(0, n.free_gpu_milli) for n in nodes) / FULL_GPU_MILLI
    return float(sum(n.whole_free for n in nodes))


def demand(ps: PodSet, product: str) -> str:
    """What the gang needs to start, in words.

    ``96 NVIDIA-H100 GPUs (12 pods x 8)``, ``8 mig-1g.10gb MIG slices (4 pods x 2)``,
    or CPU and memory for pods without GPUs.
    """
    req = ps.request
    what = f"{product} GPUs" if product else "GPUs"
    if req.is_share:
        if req.gpu_milli:
            size = f"{req.gpu_milli / FULL_GPU_MILLI:g}"
        else:
            size = f"{req.gpu_mem_mib} MiB" if req.gpu_mem_mib else f"{req.gpu_mem_percent}% memory"
        if req.gpus == 1:
            return f"{ps.needed} GPU shares of {size}"
        return f"{ps.needed} pods x {req.gpus} GPU shares of {size} on different GPUs"
    if req.gpus:
        total = ps.needed * req.gpus
        return f"{total} {what} ({ps.needed} pods x {req.gpus})" if ps.needed > 1 else f"{total} {what}"
    mig = sorted((name, amount) for name, amount in req.extended.items() if amount > 0)
    if len(mig) == 1:
        name, amount = mig[0]
        slices = f"{ps.needed * amount} {name.rsplit('/', 1)[-1]} MIG slices"
        return f"{slices} ({ps.needed} pods x {amount})" if ps.needed > 1 else slices
    return f"{ps.needed} pods of {req.cpu_milli / 1000:g} CPU and {req.memory_mib} MiB"


def demand_figures(ps: PodSet) -> tuple[float, str]:
    """The gang's demand as a number and its unit: GPUs (shares by fraction), or pods without GPUs."""
    req = ps.request
    if req.gpus:
        return round(ps.needed * req.gpu_equivalent, 3), "GPUs"
    return float(ps.needed), "pods"


def names(workloads: Sequence[Workload]) -> str:
    """The first few names, in the order given (most relevant first), and how many more."""
    shown = ", ".join(w.key for w in workloads[:MAX_NAMES])
    more = len(workloads) - MAX_NAMES
    return shown + (f" and {more} more" if more > 0 else "")
