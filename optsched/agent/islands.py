"""NVLink islands from a node's links: which GPUs a pod can use as one all-to-all NVLinked set.

An island is a maximal set of GPUs that are all NVLink-connected to each other
(a clique of the link graph; every GPU on an NVSwitch board is connected to
every other). Each GPU is given to exactly one island: the largest clique is
taken first (ties go to the clique whose sorted indices come first), then the
largest clique of the GPUs left, and so on; a GPU with no link left is an
island of its own. So an NVSwitch board is one island of 8, an A100 PCIe box
with bridged pairs four islands of 2, and a DGX-1 hybrid cube mesh two
islands of 4.

The search is exact. Cliques never span two connected components of the link
graph, so each component is solved on its own: a component that is a clique
already (a switch board of any size, a bridged pair, a lone GPU) is an island
at once; any other component is searched with a bounded branch-and-bound over
bit masks, which is instant for the 8 or 16 GPUs of a real node. A component
of more than :data:`MAX_EXACT_GPUS` GPUs that is not a clique is refused with
``ValueError`` rather than searched for an unbounded time or answered
approximately (no real node comes close: NVML sees at most the GPUs of one
board).

:func:`board_of` hands the same islands, with each GPU's NUMA node, to NVIDIA's
best-effort choice as the emulated device plugin makes it.
"""

from __future__ import annotations

from collections.abc import Iterable

from optsched.agent.devices import Discovery, NvLink
from optsched.topology.best_effort import Board

MAX_EXACT_GPUS = 64
"""The largest connected group of GPUs, not itself a clique, whose islands are searched."""


def islands(
    gpu_count: int, nvlinks: Iterable[NvLink], nvswitch: frozenset[int]
) -> tuple[tuple[int, ...], ...]:
    """Every GPU in exactly one island; each island's indices ascending, islands ordered by lowest member."""
    if gpu_count < 0:
        raise ValueError(f"gpu_count must not be negative, got {gpu_count}")
    adjacency = _adjacency(gpu_count, nvlinks, nvswitch)
    found: list[tuple[int, ...]] = []
    for component in _components(adjacency):
        found.extend(_split(adjacency, component))
    return tuple(sorted(found, key=lambda island: island[0]))


def board_of(discovery: Discovery) -> Board:
    """The board NVIDIA's best-effort choice is scored on, from what the agent publishes for the node.

    Its islands, and NUMA per GPU index only where every GPU's is known (the
    topology annotation and ``NodeGPUs`` publish all or none), so the planner,
    reading those, builds the same board.
    """
    gpus = sorted(discovery.gpus, key=lambda g: g.index)
    numa = tuple(g.numa for g in gpus)
    return Board(
        len(gpus),
        islands(len(gpus), discovery.nvlinks, discovery.nvswitch),
        numa if None not in numa else (),
    )


def _adjacency(gpu_count: int, nvlinks: Iterable[NvLink], nvswitch: frozenset[int]) -> list[int]:
    adjacency = [0] * gpu_count
    for link in nvlinks:
        for end in (link.a, link.b):
            if not 0 <= end < gpu_count:
                raise ValueError(f"NVLink {link.a}-{link.b} names GPU {end}; the node has {gpu_count} GPUs")
        if link.count >= 1 and link.a != link.b:
            adjacency[link.a] |= 1 << link.b
            adjacency[link.b] |= 1 << link.a
    switched = 0
    for gpu in nvswitch:
        if not 0 <= gpu < gpu_count:
            raise ValueError(f"NVSwitch GPU {gpu} is out of range; the node has {gpu_count} GPUs")
        switched |= 1 << gpu
    for gpu in nvswitch:
        adjacency[gpu] |= switched & ~(1 << gpu)
    return adjacency


def _components(adjacency: list[int]) -> list[int]:
    """The connected components as bit masks."""
    unseen = (1 << len(adjacency)) - 1
    components = []
    while unseen:
        component = frontier = unseen & -unseen
        while frontier:
            reached = 0
            for gpu in _members(frontier):
                reached |= adjacency[gpu]
            frontier = reached & ~component
            component |= frontier
        unseen &= ~component
        components.append(component)
    return components


def _split(adjacency: list[int], component: int) -> list[tuple[int, ...]]:
    """The islands of one connected component, largest clique first."""
    if _is_clique(adjacency, component):
        return [tuple(_members(component))]
    size = component.bit_count()
    if size > MAX_EXACT_GPUS:
        raise ValueError(
            f"{size} GPUs are NVLinked into one group that is not fully connected; islands are computed "
            f"for at most {MAX_EXACT_GPUS} such GPUs"
        )
    out = []
    remaining = component
    while remaining:
        clique = _largest_clique(adjacency, remaining)
        out.append(tuple(_members(clique)))
        remaining &= ~clique
    return out


def _is_clique(adjacency: list[int], mask: int) -> bool:
    return all((adjacency[gpu] | 1 << gpu) & mask == mask for gpu in _members(mask))


def _largest_clique(adjacency: list[int], candidates: int) -> int:
    """The largest clique among ``candidates``; of equal ones, the one whose sorted indices come first.

    Depth-first over cliques in lexicographic order of their sorted indices
    (each step adds a GPU above all chosen ones), keeping only a strictly
    larger clique, so the first clique found of the final size is the
    lexicographically smallest. A branch is cut when even a colouring bound
    says it cannot beat the best so far.
    """
    best, best_size = 0, 0

    def extend(clique: int, size: int, cand: int) -> None:
        nonlocal best, best_size
        if not cand:
            if size > best_size:
                best, best_size = clique, size
            return
        while cand:
            if size + cand.bit_count() <= best_size or size + _colour_bound(adjacency, cand) <= best_size:
                return
            bit = cand & -cand
            cand &= ~bit
            extend(clique | bit, size + 1, cand & adjacency[bit.bit_length() - 1])

    extend(0, 0, candidates)
    return best


def _colour_bound(adjacency: list[int], cand: int) -> int:
    """Colours of a greedy colouring of ``cand``: no clique inside it is larger."""
    colours = 0
    while cand:
        colours += 1
        free = cand
        while free:
            bit = free & -free
            cand &= ~bit
            free &= ~bit & ~adjacency[bit.bit_length() - 1]
    return colours


def _members(mask: int) -> list[int]:
    out = []
    while mask:
        bit = mask & -mask
        out.append(bit.bit_length() - 1)
        mask &= ~bit
    return out
