"""The baselines of ``optsched bench mig``: static layouts, per-GPU on-demand best fit, DRA-style first fit.

Each places one request at a time, in arrival order, on the pool's state
(:mod:`optsched.bench.mig_state`); none ever destroys an instance in use.

- Static layouts, as NVIDIA's mig-manager keeps them: every GPU carries one
  layout of the GPU Operator's default mig-parted config
  (``assets/state-mig-manager/0400_configmap.yaml`` in NVIDIA/gpu-operator,
  the entries for H100-80GB and A100-80GB): ``all-1g.10gb`` is seven
  ``1g.10gb``; ``all-balanced`` is two ``1g.10gb``, one ``2g.20gb`` and one
  ``3g.40gb``; ``all-3g.40gb`` is two ``3g.40gb``. The config gives counts;
  the starts are the first legal placement found (:func:`static_layout`). A
  request takes a free instance of its profile on the GPU with the most
  memory slices in use (so few GPUs stay in use), or is not placed.
- Per-GPU on-demand best fit (the HAMi / Volcano style): the request goes to
  the GPU where it fits with the least room left (memory slices not held by
  running instances), reusing a free instance of its profile or creating one
  at the lowest legal start that overlaps no instance in use; free instances
  in the way are destroyed.
- DRA-style first fit: the first GPU and the lowest legal start where the
  profile fits (an existing free instance there is reused), as DRA's
  allocator takes the first matching partition of the first device.
"""

from __future__ import annotations

from collections.abc import Callable

from optsched.bench.mig_state import Layout, MigPool, PoolGpu, span, used_slices
from optsched.bench.mig_trace import MigRequest
from optsched.errors import InputError
from optsched.mig.layout import MigSlot, layout_problems
from optsched.mig.profiles import MigModel

STATIC_COUNTS: dict[str, dict[str, int]] = {
    "all-1g.10gb": {"1g.10gb": 7},
    "all-balanced": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
    "all-3g.40gb": {"3g.40gb": 2},
}
"""The GPU Operator's default mig-parted layouts for H100-80GB and A100-80GB: profile -> count."""

STATIC_POLICIES = tuple(STATIC_COUNTS)
BESTFIT = "bestfit"
FIRSTFIT = "firstfit"

Placer = Callable[[MigPool, MigRequest], bool]


def static_layout(model: MigModel, name: str) -> Layout:
    """The layout ``name`` on ``model``: its counts at the first legal starts (larger profiles first)."""
    counts = STATIC_COUNTS.get(name)
    if counts is None:
        raise InputError(f"unknown static layout {name!r}; choose from {', '.join(STATIC_POLICIES)}")
    wanted: list[str] = []
    for profile, count in counts.items():
        if model.profile(profile) is None:
            raise InputError(f"{model.name} has no MIG profile {profile} (layout {name})")
        wanted.extend([profile] * count)
    wanted.sort(key=lambda p: (-span(model, p, 0).stop, p))
    found = _pack(model, wanted, [])
    if found is None:
        raise InputError(f"layout {name} has no legal placement on {model.name}")
    return tuple(sorted(found, key=lambda x: (x[1], x[0])))


def _pack(model: MigModel, wanted: list[str], placed: list[tuple[str, int]]) -> list[tuple[str, int]] | None:
    if not wanted:
        return placed
    profile = model.profile(wanted[0])
    assert profile is not None
    for start in profile.starts:
        candidate = [*placed, (profile.name, start)]
        if not layout_problems(model, [MigSlot(p, s) for p, s in candidate]):
            done = _pack(model, wanted[1:], candidate)
            if done is not None:
                return done
    return None


def fill_static(pool: MigPool, name: str) -> None:
    """Give every GPU of an empty pool the static layout ``name``."""
    layout = static_layout(pool.model, name)
    for pos in range(len(pool.gpus)):
        problems = pool.set_layout(pos, layout)
        if problems:
            raise InputError(f"layout {name}: {'; '.join(problems)}")


def creatable_starts(model: MigModel, gpu: PoolGpu, profile: str) -> list[int]:
    """Starts where a new ``profile`` instance overlaps no instance in use and the GPU stays legal."""
    found = model.profile(profile)
    if found is None:
        return []
    busy = gpu.busy
    taken = used_slices(model, busy)
    pairs = [MigSlot(i.profile, i.start) for i in busy]
    return [
        s
        for s in found.starts
        if not taken & set(span(model, profile, s))
        and not layout_problems(model, [*pairs, MigSlot(profile, s)])
    ]


def create_and_bind(pool: MigPool, pos: int, request: MigRequest, start: int) -> bool:
    """Create ``request``'s instance at ``start`` on GPU ``pos`` (free ones in the way go) and bind it."""
    model, gpu = pool.model, pool.gpus[pos]
    new = span(model, request.profile, start)
    layout = [(i.profile, i.start) for i in gpu.busy] + [(request.profile, start)]
    for free in sorted((i for i in gpu.instances if i.task is None), key=lambda i: i.start):
        if set(span(model, free.profile, free.start)) & set(new):
            continue
        candidate = [*layout, (free.profile, free.start)]
        if not layout_problems(model, [MigSlot(p, s) for p, s in candidate]):
            layout = candidate
    if pool.set_layout(pos, tuple(sorted(layout, key=lambda x: (x[1], x[0])))):
        return False
    return pool.bind(request.id, pos, request.profile)


def _busy_slices(pool: MigPool, gpu: PoolGpu) -> int:
    return len(used_slices(pool.model, gpu.busy))


def place_static(pool: MigPool, request: MigRequest) -> bool:
    """A free instance of the request's profile on the GPU with the most slices in use; never a change."""
    best: tuple[int, int] | None = None
    for pos, gpu in enumerate(pool.gpus):
        if gpu.free_instance(request.profile) is not None:
            key = (-_busy_slices(pool, gpu), pos)
            best = key if best is None or key < best else best
    return best is not None and pool.bind(request.id, best[1], request.profile)


def place_bestfit(pool: MigPool, request: MigRequest) -> bool:
    """The GPU where the request fits with the least room left; reuse before create on a tie."""
    size = len(span(pool.model, request.profile, 0))
    best: tuple[int, int, int, int] | None = None
    for pos, gpu in enumerate(pool.gpus):
        room = pool.model.memory_slices - _busy_slices(pool, gpu) - size
        free = gpu.free_instance(request.profile)
        if free is not None:
            option = (room, 0, pos, free.start)
        else:
            starts = creatable_starts(pool.model, gpu, request.profile)
            if not starts:
                continue
            option = (room, 1, pos, starts[0])
        best = option if best is None or option < best else best
    if best is None:
        return False
    _, create, pos, start = best
    return (
        create_and_bind(pool, pos, request, start) if create else pool.bind(request.id, pos, request.profile)
    )


def place_firstfit(pool: MigPool, request: MigRequest) -> bool:
    """The first GPU and lowest legal start where the profile fits; a free instance there is reused."""
    profile = pool.model.profile(request.profile)
    if profile is None:
        return False
    for pos, gpu in enumerate(pool.gpus):
        creatable = set(creatable_starts(pool.model, gpu, request.profile))
        for start in profile.starts:
            if _free_at(gpu, request.profile, start):
                return pool.bind(request.id, pos, request.profile, start)
            if start in creatable:
                return create_and_bind(pool, pos, request, start)
    return False


def _free_at(gpu: PoolGpu, profile: str, start: int) -> bool:
    return any(i.profile == profile and i.start == start and i.task is None for i in gpu.instances)


PLACERS: dict[str, Placer] = {
    **{name: place_static for name in STATIC_POLICIES},
    BESTFIT: place_bestfit,
    FIRSTFIT: place_firstfit,
}
"""The online policies: each places one request on the pool or says it cannot."""
