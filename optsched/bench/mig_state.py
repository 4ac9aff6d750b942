"""The simulated MIG pool of ``optsched bench mig``: each GPU's instances and the tasks holding them.

Every policy changes the pool through the same three operations, so the
figures are counted the same way for all of them and never assumed:

- :meth:`MigPool.set_layout` gives a GPU a new layout; an in-use instance
  the new layout does not keep (same profile at the same start) is a pod
  that had to move: it is counted in :attr:`MigPool.moved` and its task is
  evicted. A layout :func:`~optsched.mig.layout.layout_problems` refuses is
  never applied (counted in :attr:`MigPool.illegal`);
- :meth:`MigPool.bind` puts a task on a free instance of its profile;
- :meth:`MigPool.depart` frees the instances of tasks whose lifetime ended
  (the instance stays, free, until a policy changes the layout).

A GPU is reconfigured in a window when its layout at the end differs from
its layout at the start (:meth:`MigPool.layouts`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from optsched.mig.layout import MigSlot, layout_problems
from optsched.mig.profiles import MigModel

Layout = tuple[tuple[str, int], ...]
"""``(profile, start)`` pairs in start order."""


@dataclass
class Instance:
    profile: str
    start: int
    task: int | None = None


@dataclass
class PoolGpu:
    """One MIG-enabled GPU: its node, its index there, its instances."""

    node: str
    index: int
    instances: list[Instance] = field(default_factory=list)

    @property
    def layout(self) -> Layout:
        return tuple(sorted(((i.profile, i.start) for i in self.instances), key=lambda x: (x[1], x[0])))

    @property
    def busy(self) -> list[Instance]:
        return [i for i in self.instances if i.task is not None]

    def free_instance(self, profile: str) -> Instance | None:
        return next(
            (
                i
                for i in sorted(self.instances, key=lambda i: i.start)
                if i.task is None and i.profile == profile
            ),
            None,
        )


def span(model: MigModel, profile: str, start: int) -> range:
    found = model.profile(profile)
    size = found.memory_slices if found is not None else 1
    return range(start, start + size)


def used_slices(model: MigModel, instances: list[Instance]) -> set[int]:
    return {s for i in instances for s in span(model, i.profile, i.start)}


class MigPool:
    """All GPUs of one pool (one model, ``gpus_per_node`` to a node) and where each running task sits."""

    def __init__(self, model: MigModel, nodes: int, gpus_per_node: int = 8, prefix: str = "mig") -> None:
        self.model = model
        self.gpus_per_node = gpus_per_node
        self.gpus = [PoolGpu(f"{prefix}-{n:04d}", g) for n in range(nodes) for g in range(gpus_per_node)]
        self.where: dict[int, tuple[int, int]] = {}
        """task id -> (GPU position, start)."""
        self.moved = 0
        self.illegal = 0

    def gpu(self, node: str, index: int) -> int | None:
        """The position of ``node``'s GPU ``index`` in :attr:`gpus`, or None."""
        for pos, g in enumerate(self.gpus):
            if g.node == node and g.index == index:
                return pos
        return None

    def layouts(self) -> list[Layout]:
        return [g.layout for g in self.gpus]

    def in_use(self) -> int:
        """GPUs holding at least one running instance."""
        return sum(1 for g in self.gpus if g.busy)

    def running(self) -> int:
        return len(self.where)

    def set_layout(self, pos: int, layout: Layout) -> list[str]:
        """Give GPU ``pos`` ``layout``; its problems (and nothing applied) where it is illegal."""
        problems = layout_problems(self.model, [MigSlot(p, s) for p, s in layout])
        if problems:
            self.illegal += 1
            return problems
        gpu = self.gpus[pos]
        kept: list[Instance] = []
        for profile, start in layout:
            old = next((i for i in gpu.instances if (i.profile, i.start) == (profile, start)), None)
            kept.append(Instance(profile, start, old.task if old is not None else None))
        survivors = {i.task for i in kept if i.task is not None}
        for old in gpu.busy:
            if old.task is not None and old.task not in survivors:
                self.moved += 1
                self.where.pop(old.task, None)
        gpu.instances = kept
        return []

    def bind(self, task: int, pos: int, profile: str, start: int | None = None) -> bool:
        """Put ``task`` on a free ``profile`` instance of GPU ``pos`` (at ``start`` if given)."""
        gpu = self.gpus[pos]
        instance = (
            gpu.free_instance(profile)
            if start is None
            else next(
                (i for i in gpu.instances if i.task is None and (i.profile, i.start) == (profile, start)),
                None,
            )
        )
        if instance is None:
            return False
        instance.task = task
        self.where[task] = (pos, instance.start)
        return True

    def depart(self, tasks: list[int]) -> None:
        for task in tasks:
            seat = self.where.pop(task, None)
            if seat is None:
                continue
            pos, start = seat
            for instance in self.gpus[pos].instances:
                if instance.start == start and instance.task == task:
                    instance.task = None
