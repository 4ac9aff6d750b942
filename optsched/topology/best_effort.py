"""Which whole GPUs NVIDIA's device plugin hands a container: its best-effort policy, written for optsched.

On a device-plugin node kubelet asks NVIDIA's device plugin for a preferred
allocation, and the plugin answers with go-gpuallocator's best-effort policy.
Nobody can steer that choice for one pod, so optsched predicts it: the planner
plans the set the plugin will choose (``optsched.capacity.prediction``), and a
simulated node's emulated plugin (``optsched.agent.device_plugin``) hands out
exactly that set. Both call this module with the same :class:`Board`, so they
agree by construction. The policy as NVIDIA describes it:

* every pair of GPUs has a score: 100 points per NVLink between them, plus
  points for how close they sit on PCIe;
* the free GPUs are split into groups of the requested size (the GPUs left
  over form one smaller group), every possible split is scored by the sum of
  the pair scores inside its groups, and the best split wins; a split counts
  only if one of its full groups holds every required GPU;
* from the winning split, the best-scoring full group that holds the required
  GPUs is the answer.

Splitting everything, rather than taking the single best group, looks a little
ahead: a request of 2 on a box of NVLink pairs takes a whole pair and leaves
the other pairs whole.

The pair score is computed from what the planner knows of a node, its NVLink
islands and each GPU's NUMA node (the ``optsched.io/gpu-topology`` annotation
or ``NodeGPUs``), not from link counts and PCIe levels:

* two GPUs of one island count as joined by :data:`ISLAND_LINKS` NVLinks, two
  GPUs of different islands by none. On an NVSwitch board every pair is in one
  island, so the link term is the same for every split and only NUMA decides,
  as in NVIDIA's allocator, which counts no links between switched GPUs. On a
  box of bridged pairs the term decides, as NVIDIA's per-link count does. On a
  box whose link graph is not a union of cliques (a DGX-1 hybrid cube mesh),
  the links between islands are not counted, where NVIDIA's allocator counts
  them: the two can differ there;
* the PCIe part comes from NUMA: GPUs on the same NUMA node score as PCIe's
  "same CPU" level (20), others (or where NUMA is not known) as "across CPUs"
  (10);
* the leftover group is never the answer (only full groups are);
* ties go to the first split and group in ascending GPU index order.

Cost: the exact search is a memoised walk over the splits (the lowest free GPU
always starts the next group). On 8 free GPUs it weighs at most a few hundred
candidate groups; on 16 it can need close to a million, so it runs only up to
:data:`EXACT_LIMIT` free GPUs and stops after :data:`EXACT_BUDGET` candidate
groups (about a second of CPython at worst). Past either bound the choice is
greedy: grow a group from each possible seed (or from the required GPUs) by
the GPU that adds the most score, and keep the best group; it does not look
ahead. The counts are deterministic, so the same request gets the same answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import combinations

NVLINK_POINTS = 100
"""Per NVLink bonded between two GPUs."""
ISLAND_LINKS = 12
"""Two GPUs of one NVLink island score as if this many NVLinks joined them (an A100 bridge's count)."""
SAME_NUMA_POINTS = 20
CROSS_NUMA_POINTS = 10
EXACT_LIMIT = 16
"""Up to this many free GPUs the best split is searched exactly; above it the choice is greedy."""
EXACT_BUDGET = 120_000
"""The exact search gives up (and the choice is greedy) after this many candidate groups."""

_Group = tuple[int, ...]
_Solution = tuple[int, tuple[tuple[_Group, bool], ...]]
"""A split's score and its groups (GPU positions, whether it is the leftover group)."""
_Score = Callable[[Sequence[int]], int]


@dataclass(frozen=True)
class Board:
    """A node's GPUs as the choice scores them: GPU indices ``0..gpu_count-1``, islands and NUMA nodes.

    A GPU no island names stands alone; ``numa`` holds one entry per GPU index,
    or is empty where the node does not say.
    """

    gpu_count: int
    islands: tuple[tuple[int, ...], ...] = ()
    numa: tuple[int | None, ...] = ()

    def __post_init__(self) -> None:
        if self.gpu_count < 0:
            raise ValueError(f"a board has at least 0 GPUs, got {self.gpu_count}")
        if self.numa and len(self.numa) != self.gpu_count:
            raise ValueError(f"numa lists {len(self.numa)} GPUs, the board has {self.gpu_count}")
        seen: set[int] = set()
        for island in self.islands:
            for gpu in island:
                if not 0 <= gpu < self.gpu_count or gpu in seen:
                    raise ValueError(
                        f"NVLink islands {[list(i) for i in self.islands]} must name each of GPUs "
                        f"0..{self.gpu_count - 1} at most once"
                    )
                seen.add(gpu)

    def island_numbers(self) -> list[int]:
        """Per GPU index: a number shared by the GPUs of its island (a lone GPU's own number)."""
        numbers = list(range(len(self.islands), len(self.islands) + self.gpu_count))
        for number, island in enumerate(self.islands):
            for gpu in island:
                numbers[gpu] = number
        return numbers


def pair_score(board: Board, a: int, b: int) -> int:
    """How well GPUs ``a`` and ``b`` talk to each other: island links plus a NUMA stand-in for PCIe."""
    if a == b:
        return 0
    island = board.island_numbers()
    return _pair(island, board.numa, a, b)


def _pair(island: Sequence[int], numa: Sequence[int | None], a: int, b: int) -> int:
    links = ISLAND_LINKS if island[a] == island[b] else 0
    near = bool(numa) and numa[a] is not None and numa[a] == numa[b]
    return links * NVLINK_POINTS + (SAME_NUMA_POINTS if near else CROSS_NUMA_POINTS)


def best_effort(
    free: Sequence[int], size: int, board: Board, required: Sequence[int] = ()
) -> tuple[int, ...]:
    """The ``size`` GPUs (ascending) NVIDIA's best-effort policy picks from ``free``, ``required`` among them.

    Raises ValueError for a request that cannot be met: ``size`` below 1 or
    above the free count, required GPUs that are not free or more than
    ``size``, repeated indices, or an index the board does not have.
    """
    gpus = _checked(free, size, board, required)
    if size == len(gpus):
        return gpus
    island = board.island_numbers()
    table = {(a, b): _pair(island, board.numa, a, b) for a, b in combinations(gpus, 2)}

    def score(group: Sequence[int]) -> int:
        return sum(table[pair] for pair in combinations(sorted(group), 2))

    if len(gpus) <= EXACT_LIMIT:
        try:
            return _exact(gpus, size, frozenset(required), score)
        except _OverBudget:
            pass
    return _greedy(gpus, size, tuple(sorted(required)), table)


def _checked(free: Sequence[int], size: int, board: Board, required: Sequence[int]) -> _Group:
    gpus = tuple(sorted(free))
    if len(set(gpus)) != len(gpus):
        raise ValueError(f"free GPUs {list(free)} repeat an index")
    if len(set(required)) != len(required):
        raise ValueError(f"required GPUs {list(required)} repeat an index")
    if size < 1:
        raise ValueError(f"cannot allocate {size} GPUs: the size must be at least 1")
    if size > len(gpus):
        raise ValueError(f"cannot allocate {size} GPUs: only {len(gpus)} are free ({list(gpus)})")
    if not set(required) <= set(gpus):
        raise ValueError(f"required GPUs {sorted(set(required) - set(gpus))} are not free")
    if len(required) > size:
        raise ValueError(f"{len(required)} required GPUs do not fit an allocation of {size}")
    unknown = [g for g in gpus if not 0 <= g < board.gpu_count]
    if unknown:
        raise ValueError(f"GPUs {unknown} are not among the node's GPUs 0..{board.gpu_count - 1}")
    return gpus


class _OverBudget(Exception):
    """The exact search would take more than :data:`EXACT_BUDGET` group evaluations."""


class _Splits:
    """The exact search over every split of ``gpus`` into groups of ``size`` plus one leftover group.

    A state is the GPUs not yet grouped and whether the leftover group (``n mod
    size`` GPUs, none when ``size`` divides ``n``) is still to be formed. The
    lowest GPU left always starts the next group, so each split is seen once.
    Candidate groups come in NVIDIA's order: ascending positions, the leftover
    group sorting as if padded with placeholders after every GPU; a strictly
    better split replaces the one kept, so ties keep the first.
    """

    def __init__(self, gpus: _Group, size: int, required: frozenset[int], score: _Score) -> None:
        self.gpus, self.size, self.score = gpus, size, score
        self.leftover = len(gpus) % size
        self.padding = tuple(range(len(gpus), len(gpus) + size - self.leftover))
        self.required = sum(1 << gpus.index(g) for g in required)
        self.memo: dict[tuple[int, bool], _Solution | None] = {}
        self.evaluations = 0

    def best(self) -> _Solution:
        solution = self.solve((1 << len(self.gpus)) - 1, self.leftover > 0)
        assert solution is not None, "a split with the required GPUs together always exists"
        return solution

    def candidates(self, left: int, leftover_open: bool) -> list[tuple[_Group, bool]]:
        positions = [p for p in range(len(self.gpus)) if left >> p & 1]
        first, rest = positions[0], positions[1:]
        keyed = [((first, *o), (first, *o), False) for o in combinations(rest, self.size - 1)]
        if leftover_open:
            keyed += [
                ((first, *o, *self.padding), (first, *o), True) for o in combinations(rest, self.leftover - 1)
            ]
        keyed.sort()
        return [(group, is_leftover) for _, group, is_leftover in keyed]

    def solve(self, left: int, leftover_open: bool) -> _Solution | None:
        if left == 0:
            return 0, ()
        if (left, leftover_open) in self.memo:
            return self.memo[left, leftover_open]
        best: _Solution | None = None
        for group, is_leftover in self.candidates(left, leftover_open):
            self.evaluations += 1
            if self.evaluations > EXACT_BUDGET:
                raise _OverBudget
            bits = sum(1 << p for p in group)
            touched = bits & self.required
            if touched and (touched != self.required or is_leftover):
                continue
            rest = self.solve(left & ~bits, leftover_open and not is_leftover)
            if rest is None:
                continue
            total = self.score([self.gpus[p] for p in group]) + rest[0]
            if best is None or total > best[0]:
                best = (total, ((group, is_leftover), *rest[1]))
        self.memo[left, leftover_open] = best
        return best


def _exact(gpus: _Group, size: int, required: frozenset[int], score: _Score) -> _Group:
    """The best full group holding ``required`` in the best split (raises _OverBudget when too costly)."""
    _, split = _Splits(gpus, size, required, score).best()
    full = [tuple(gpus[p] for p in group) for group, is_leftover in split if not is_leftover]
    candidates = [group for group in full if required <= set(group)]
    return max(candidates, key=score)  # max keeps the first of equal scores


def _greedy(gpus: _Group, size: int, required: _Group, table: dict[tuple[int, int], int]) -> _Group:
    """Grow a group from each seed by the GPU adding the most score (lowest index on ties); keep the best."""

    def pair(a: int, b: int) -> int:
        return table[(a, b) if a < b else (b, a)]

    best: tuple[int, _Group] | None = None
    for seed in [required] if required else [(g,) for g in gpus]:
        group = list(seed)
        gain = {g: sum(pair(g, m) for m in group) for g in gpus if g not in group}
        total = sum(pair(a, b) for a, b in combinations(group, 2))
        while len(group) < size:
            pick = max(gain, key=lambda g: (gain[g], -g))
            total += gain.pop(pick)
            group.append(pick)
            for g in gain:
                gain[g] += pair(g, pick)
        if best is None or total > best[0]:
            best = (total, tuple(sorted(group)))
    assert best is not None, "there is always at least one seed"
    return best[1]
