"""The nodes a greedy walk offers its chooser for the next pod, kept current booking by booking.

A gang of many pods is placed one pod at a time, and between two pods only
the node that took the last one changed. Filtering every candidate node again
for every pod made a 1,000-node walk spend most of its time re-checking nodes
that had not changed, so the pool re-checks only the node just booked.

With a deterministic chooser, nodes in the same free state score the same,
so only the first of each state (in the walk's node order) is offered: the
index keeps the members of each state in order and offers each state's first,
which is exactly what filtering the whole list and keeping first occurrences
would give.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Hashable, Sequence

from optsched.capacity.state import NodeState
from optsched.model.snapshot import FULL_GPU_MILLI, PodSet


class RoomPool:
    """Nodes of ``states`` that pass ``fits``, for a chooser that breaks ties at random.

    Such a chooser must see every node, so no two are merged; a deterministic
    one is offered the first node of each free state (:class:`StateIndex`).
    """

    def __init__(self, states: Sequence[NodeState], fits: Callable[[NodeState], bool]) -> None:
        self.fits = fits
        self.fitting = [s for s in states if fits(s)]

    def offered(self) -> list[NodeState]:
        """What the chooser sees now, in the walk's node order."""
        return list(self.fitting)

    def booked(self, node: NodeState) -> None:
        """``node`` took a pod: drop it if it has no more room."""
        if not self.fits(node):
            self.fitting = [s for s in self.fitting if s is not node]


class StateIndex:
    """The nodes of one candidate list grouped by free state, kept current across a whole walk.

    Most workloads are offered the same candidate lists, and a cluster of a
    thousand nodes has far fewer distinct free states than nodes. Every check
    :func:`room_check` makes reads only what the state key holds, so it is made
    once per state, not once per node; the walk re-files a node under its new
    state whenever a booking changes it.
    """

    def __init__(self, states: Sequence[NodeState], key: Callable[[NodeState], Hashable]) -> None:
        # A node listed twice (under two flavors) is offered once, where it first appears.
        self.states = list({s.name: s for s in states}.values())
        self.position = {s.name: i for i, s in enumerate(self.states)}
        self.key = key
        self.groups: dict[Hashable, list[int]] = {}
        self.member: dict[str, Hashable] = {}
        for i, state in enumerate(self.states):
            k = key(state)
            self.groups.setdefault(k, []).append(i)
            self.member[state.name] = k

    def offered(self, fits: Callable[[NodeState], bool]) -> list[NodeState]:
        """The first node of each free state that passes ``fits``, in the list's order."""
        firsts = sorted(group[0] for group in self.groups.values())
        return [self.states[p] for p in firsts if fits(self.states[p])]

    def free_gpu_milli(self) -> int:
        """Free GPU compute over the list's nodes (never below zero per node)."""
        total = 0
        for group in self.groups.values():
            total += len(group) * max(0, self.states[group[0]].free_gpu_milli)
        return total

    def refile(self, node: NodeState) -> None:
        """``node``'s free state changed: move it to its new group."""
        position = self.position.get(node.name)
        if position is None:
            return
        old = self.member[node.name]
        new = self.key(node)
        if new == old:
            return
        group = self.groups[old]
        del group[bisect.bisect_left(group, position)]
        if not group:
            del self.groups[old]
        bisect.insort(self.groups.setdefault(new, []), position)
        self.member[node.name] = new


def room_check(ps: PodSet) -> Callable[[NodeState], bool]:
    """The cheap sums a node must pass to be offered one more pod of ``ps`` (before any scoring)."""
    req = ps.request
    cpu, mem = req.cpu_milli, req.memory_mib
    milli = req.gpu_milli_total if req.gpus else 0
    # An NVLink island cannot be promised where in-use GPUs have unknown indices.
    known_only = ps.nvlink_required and req.gpus > 1 and not req.is_share

    def fits(s: NodeState) -> bool:
        return (
            s.pods > 0
            and s.cpu >= cpu
            and s.mem >= mem
            # NodeState.free_gpu_milli, written out: this runs for every node of a walk.
            and (not milli or sum(s.gpu_milli) - s.unknown * FULL_GPU_MILLI >= milli)
            and not (known_only and s.unknown)
        )

    return fits
