"""How many pods of one request a node can take as it is now: one formula for every caller.

The solver bounds its count variables with it, the greedy baselines test
topology domains with it, and the deferral reasons count with it, so "fits"
means the same to all three. Pods of one request are identical, so the count
is a minimum over what each resource allows:

* CPU, memory, pod slots and extended resources (MIG slices);
* whole GPUs: the free whole GPUs (index-unknown usage subtracted), divided by
  the GPUs per pod; for ``nvlink: required`` pods, the sum over NVLink islands
  of what each island holds (a pod never spans two), and none at all where
  in-use GPUs have unknown indices (no island can be promised there);
* GPU shares: on every partly used GPU, as many shares as its free compute,
  memory and task slots hold, plus, for each untouched GPU, as many as an
  untouched GPU holds where every GPU index is known, else one per whole free
  GPU (the node picks the GPU, so each such share counts as a whole GPU of
  unknown index); a pod of N shares needs N different GPUs (:func:`spread_room`).
"""

from __future__ import annotations

from optsched.capacity.state import NodeState
from optsched.model.snapshot import FULL_GPU_MILLI, PodRequest

UNBOUNDED_SHARES = 1 << 20
"""Shares one GPU holds of a request that asks for neither compute nor memory."""


def pods_that_fit(
    node: NodeState, req: PodRequest, *, nvlink_required: bool = False, limit: int | None = None
) -> int:
    """Most pods of ``req`` the node could take on its own, given what is free now (at most ``limit``)."""
    # The GPU compute check first: it is the cheapest and rules out most nodes of a busy cluster.
    if (req.gpus and node.free_gpu_milli < req.gpu_milli_total) or not node.fits_resources(req):
        return 0
    k = node.pods if limit is None else min(node.pods, limit)
    if req.cpu_milli:
        k = min(k, node.cpu // req.cpu_milli)
    if req.memory_mib:
        k = min(k, node.mem // req.memory_mib)
    for name, amount in req.extended.items():
        if amount > 0:
            k = min(k, node.ext.get(name, 0) // amount)
    if req.gpus and k > 0:
        k = min(k, gpu_room(node, req, nvlink_required=nvlink_required))
    return max(0, k)


def gpu_room(node: NodeState, req: PodRequest, *, nvlink_required: bool = False) -> int:
    """Pods of ``req`` the node's free GPUs alone hold (CPU, memory and the rest not counted)."""
    if req.is_share:
        return share_room(node, req)
    room = node.whole_free // req.gpus
    if nvlink_required and req.gpus > 1:
        if not node.indices_known:
            return 0
        free = set(node.fully_free_gpus())
        room = min(room, sum(len(free.intersection(island)) // req.gpus for island in node.islands))
    return room


def share_room(node: NodeState, req: PodRequest) -> int:
    """Pods of ``req`` the node's GPUs hold: on partly used GPUs, then on untouched ones.

    A pod of N shares needs N different GPUs. Where in-use GPUs have unknown
    indices, such a pod goes only on partly used GPUs of known index
    (:meth:`NodeState.choose_gpus`): an untouched GPU there may be one the
    unknown pods hold.
    """
    known = [share_slots(node, req, g) for g in share_gpus(node)]
    fresh = [share_slots(node, req, None)] * fresh_gpus(node)
    if req.gpus <= 1:
        return sum(known) + sum(fresh)
    return spread_room(known + fresh if node.indices_known else known, req.gpus)


def share_gpus(node: NodeState) -> list[int]:
    """Partly used GPUs with room left: shares there are placed on a known index."""
    return [
        gpu
        for gpu in range(node.gpu_count)
        if node.healthy[gpu] and node.gpu_milli[gpu] > 0 and not node.is_fully_free(gpu)
    ]


def fresh_gpus(node: NodeState) -> int:
    """Untouched GPUs shares may open: each by index where every index is known, else the whole free ones."""
    return len(node.fully_free_gpus()) if node.indices_known else node.whole_free


def share_slots(node: NodeState, req: PodRequest, gpu: int | None) -> int:
    """Shares (devices) of a share request one GPU can hold (``None``: an untouched GPU).

    An untouched GPU on a node with index-unknown usage holds one share: the
    node picks the GPU, so two such shares may well land on two GPUs.
    """
    milli = FULL_GPU_MILLI if gpu is None else node.gpu_milli[gpu]
    mem = node.gpu_mem_total if gpu is None else node.gpu_mem[gpu]
    k = milli // req.gpu_milli if req.gpu_milli > 0 else UNBOUNDED_SHARES
    need_mem = node.share_mem(req)
    if need_mem > 0:
        k = min(k, mem // need_mem)
    k = min(k, node.tasks_total if gpu is None else node.gpu_tasks[gpu])
    if gpu is None and not node.indices_known:
        k = min(k, 1)
    return max(0, k)


def spread_room(caps: list[int], per_pod: int) -> int:
    """Most pods of ``per_pod`` shares each on different GPUs, GPU ``g`` holding ``caps[g]`` shares.

    ``k`` pods fit exactly when ``sum(min(cap, k)) >= per_pod * k``: no GPU
    can serve a pod twice, and any such counts split into pods (deal the
    shares out round-robin, GPU by GPU). The test only gets harder as ``k``
    grows, so a bisection finds the largest ``k``.
    """
    low, high = 0, sum(caps) // per_pod
    while low < high:
        mid = (low + high + 1) // 2
        if sum(min(cap, mid) for cap in caps) >= per_pod * mid:
            low = mid
        else:
            high = mid - 1
    return low
