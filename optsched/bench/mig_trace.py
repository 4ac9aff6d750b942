"""The MIG request trace of ``optsched bench mig``: arrivals and departures built from the openb trace.

No public trace records MIG requests, so this one is derived from the Alibaba
openb GPU trace (:mod:`optsched.bench.trace_data`). The trace gives a task's
share of one GPU as ``gpu_milli`` and no GPU memory, so the share is read as
the part of the GPU's memory the task needs: a share ``s`` needs ``s`` times
the memory of the model's whole-GPU profile (``7g.80gb``), and the task asks
for the smallest profile of the pool's model that holds that much (least
memory, then least compute; the ``+me`` media-extension profiles are never
asked for). A share of 0.47 on an A100-80GB becomes ``3g.40gb``, 0.23
becomes ``1g.20gb``, 0.81 becomes ``7g.80gb``.

By default only the fractional tasks (``gpu_milli`` below 1000) make the
trace: the MIG pool is where GPU sharing runs. ``whole_gpu`` adds the
one-GPU whole tasks as ``7g.80gb`` requests (the whole GPU as one MIG
instance). Tasks of several GPUs never enter: one MIG instance never spans
GPUs. CPU-only tasks never enter either.

Time runs in planning windows. Each seed draws tasks with replacement from
that population and lets them arrive as a Poisson process; a request lives
for its task's own trace lifetime (``deletion_time - creation_time``),
rounded up to whole windows (at least one; a task the trace never saw leave
stays to the end of the run). The arrival rate is set so the
offered load (memory slices times lifetime, capped at the run) is ``load``
times the pool's memory slices.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path

from optsched.bench.trace_data import _int, _rows, load_pods, pod_file
from optsched.errors import InputError
from optsched.mig.profiles import MigModel, MigProfile
from optsched.model.snapshot import FULL_GPU_MILLI

TIME_COLUMNS = ("name", "creation_time", "deletion_time")
NEVER = 10**9
"""The lifetime, in windows, of a task the trace never saw leave."""


@dataclass(frozen=True)
class TaskDraw:
    """One task of the trace that may enter the MIG pool: its GPU share and its lifetime."""

    name: str
    share_milli: int
    duration_s: int | None
    """``deletion_time - creation_time``; None for a task the trace never saw leave."""


@dataclass(frozen=True)
class MigRequest:
    """One request of the MIG trace: a profile, arriving in a window, living some windows."""

    id: int
    task: str
    share_milli: int
    profile: str
    arrival: int
    duration: int

    @property
    def departs(self) -> int:
        """The window at whose start it leaves (when placed)."""
        return self.arrival + self.duration


@dataclass(frozen=True)
class MigTrace:
    """The requests of one seed on one pool, in arrival order, and how they were made."""

    model: str
    gpus: int
    windows: int
    window_s: int
    load: float
    requests: tuple[MigRequest, ...]

    def arrivals(self, window: int) -> list[MigRequest]:
        return [r for r in self.requests if r.arrival == window]

    def profile_mix(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.requests:
            out[r.profile] = out.get(r.profile, 0) + 1
        return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))


@dataclass(frozen=True)
class TaskPopulation:
    """The tasks that enter the pool and how many of each kind stay out."""

    tasks: tuple[TaskDraw, ...]
    left_out: dict[str, int]


def whole_profile(model: MigModel) -> MigProfile:
    """The profile that is the whole GPU (all memory slices; most compute among those)."""
    return max(model.profiles, key=lambda p: (p.memory_slices, p.compute, p.memory_mib))


def profile_for_share(model: MigModel, share_milli: int) -> MigProfile:
    """The smallest profile of ``model`` holding ``share_milli``/1000 of the GPU's memory."""
    if not 0 < share_milli <= FULL_GPU_MILLI:
        raise InputError(
            f"a GPU share must be 1..{FULL_GPU_MILLI} milli, got {share_milli}", field="gpu_milli"
        )
    needed = math.ceil(share_milli * whole_profile(model).memory_mib / FULL_GPU_MILLI)
    holding = [p for p in model.profiles if "+" not in p.name and p.memory_mib >= needed]
    return min(holding, key=lambda p: (p.memory_mib, p.compute, p.memory_slices, p.name))


def load_tasks(trace_dir: Path, workload: str = "default", *, whole_gpu: bool = False) -> TaskPopulation:
    """The openb tasks that may ask for MIG instances, with their lifetimes; the rest counted by kind."""
    pods = load_pods(trace_dir, workload)
    path = trace_dir / pod_file(workload)
    times: dict[str, int | None] = {}
    for row_no, row in _rows(path, TIME_COLUMNS):
        name = (row.get("name") or "").strip() or f"row-{row_no}"
        created = _int(path, row_no, "creation_time", row.get("creation_time"))
        if not (row.get("deletion_time") or "").strip():
            times[name] = None
            continue
        deleted = _int(path, row_no, "deletion_time", row.get("deletion_time"))
        if deleted < created:
            raise InputError(
                f"deletion_time {deleted} is before creation_time {created}",
                source=str(path),
                obj=f"row {row_no}",
                field="deletion_time",
            )
        times[name] = deleted - created
    tasks: list[TaskDraw] = []
    left_out = {"cpu-only": 0, "multi-GPU": 0, "whole-GPU": 0}
    for pod in pods:
        request = pod.request
        if request.gpus == 0:
            left_out["cpu-only"] += 1
        elif request.gpus > 1:
            left_out["multi-GPU"] += 1
        elif request.gpu_milli >= FULL_GPU_MILLI and not whole_gpu:
            left_out["whole-GPU"] += 1
        else:
            tasks.append(TaskDraw(pod.name, request.gpu_milli, times.get(pod.name)))
    if not tasks:
        raise InputError("no task of the trace asks for one GPU or a share of one", source=str(path))
    return TaskPopulation(tuple(tasks), left_out)


def lifetime_windows(duration_s: int | None, window_s: int) -> int:
    """A lifetime in whole windows, rounded up, at least one; a task never seen leaving never leaves."""
    if duration_s is None:
        return NEVER
    return max(1, math.ceil(duration_s / window_s))


def arrival_rate(
    tasks: tuple[TaskDraw, ...], model: MigModel, gpus: int, windows: int, window_s: int, load: float
) -> float:
    """Mean arrivals per window that offer ``load`` times the pool's memory slices."""
    slice_windows = [
        profile_for_share(model, t.share_milli).memory_slices
        * min(windows, lifetime_windows(t.duration_s, window_s))
        for t in tasks
    ]
    mean = sum(slice_windows) / len(slice_windows)
    return load * gpus * model.memory_slices / mean


def build_trace(
    population: TaskPopulation,
    model: MigModel,
    gpus: int,
    seed: int,
    *,
    windows: int,
    window_s: int,
    load: float,
) -> MigTrace:
    """The seeded trace of one pool: Poisson arrivals of tasks drawn with replacement."""
    if windows < 1 or window_s < 1 or gpus < 1 or load <= 0:
        raise InputError(
            f"needs windows, window length and GPUs of at least 1 and a positive load, got "
            f"{windows}, {window_s}, {gpus}, {load:g}",
            field="--windows/--window-s/--nodes/--load",
        )
    rng = random.Random(seed)
    rate = arrival_rate(population.tasks, model, gpus, windows, window_s, load)
    requests: list[MigRequest] = []
    clock = rng.expovariate(rate)
    while clock < windows:
        task = rng.choice(population.tasks)
        profile = profile_for_share(model, task.share_milli)
        requests.append(
            MigRequest(
                id=len(requests),
                task=task.name,
                share_milli=task.share_milli,
                profile=profile.name,
                arrival=int(clock),
                duration=lifetime_windows(task.duration_s, window_s),
            )
        )
        clock += rng.expovariate(rate)
    return MigTrace(model.name, gpus, windows, window_s, load, tuple(requests))
