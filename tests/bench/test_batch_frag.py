"""The fragmentation batch window: feasible patterns priced by FGD's measure, FGD itself for one task."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest

from optsched.bench import trace_command
from optsched.bench.batch import batch_placer_factory
from optsched.bench.batch_frag import FragWindowPlacer, frag_placer_factory
from optsched.bench.batch_patterns import COST_SCALE, PatternLimits, TaskType, enumerate_patterns
from optsched.bench.cli import main
from optsched.bench.trace import inflate, replay, trace_shapes
from optsched.bench.trace_data import load_nodes, load_pods
from optsched.capacity.fragmentation import FragMeter, Shape
from optsched.capacity.state import NodeState
from optsched.model.snapshot import FULL_GPU_MILLI, NodeUsage, PodRequest
from optsched.policies.choosers import FGD
from tests.bench.conftest import write_synthetic
from tests.bench.test_trace import _recheck
from tests.builders import node


def _share(milli: int, cpu: int = 1000) -> PodRequest:
    return PodRequest(cpu_milli=cpu, memory_mib=1024, gpus=1, gpu_milli=milli)


def _whole(gpus: int, cpu: int = 1000) -> PodRequest:
    return PodRequest(cpu_milli=cpu, memory_mib=1024, gpus=gpus)


SHAPES: list[Shape] = [(_share(600), 0.4), (_share(400), 0.2), (_whole(1), 0.3), (_whole(2), 0.1)]


def _state(name: str, gpus: int, used: tuple[int, ...] = (), cpu: int = 64_000) -> NodeState:
    usage = NodeUsage(gpu_milli=used + (0,) * (gpus - len(used))) if used else None
    return NodeState.from_node(node(name, gpus=gpus, cpu=cpu), usage)


def _apply(
    state: NodeState, steps: tuple[tuple[int, tuple[int, ...]], ...], reqs: dict[int, PodRequest]
) -> None:
    for type_id, gpus in steps:
        req = reqs[type_id]
        assert state.fits_resources(req)
        for gpu in gpus:
            assert state.gpu_milli[gpu] >= (req.gpu_milli if req.is_share else FULL_GPU_MILLI)
        assert len(gpus) == req.gpus == len(set(gpus))
        state.take(req, list(gpus))


def test_patterns_respect_cpu_gpus_and_per_gpu_shares() -> None:
    # GPU 0 has 0.6 free, GPU 1 is free; CPU for three tasks only.
    state = _state("n", 2, used=(400,), cpu=3_000)
    types = [TaskType(0, _share(600), 3), TaskType(1, _share(400), 3), TaskType(2, _whole(1), 1)]
    reqs = {t.type_id: t.request for t in types}
    patterns = enumerate_patterns(0, state, types, FragMeter(SHAPES))
    multisets = {p.counts for p in patterns}
    # Two 0.6 shares on the two GPUs and a 0.4 share beside one of them; three 0.4 shares.
    assert {((0, 1),), ((2, 1),), ((0, 2),), ((0, 2), (1, 1)), ((1, 3),), ((0, 1), (2, 1))} <= multisets
    assert max(p.tasks for p in patterns) == 3  # CPU allows three tasks
    # The whole GPU takes GPU 1; GPU 0 then holds one share at most.
    assert all(p.tasks <= 2 for p in patterns if dict(p.counts).get(2))
    assert ((0, 3),) not in multisets
    for pattern in patterns:
        copy = state.copy()
        _apply(copy, pattern.steps, reqs)
        assert min(copy.gpu_milli) >= 0 and copy.cpu >= 0
    assert state.gpu_milli == [600, 1000] and state.cpu == 3_000  # restored


def test_pattern_cost_is_the_fragmentation_increase_of_the_node_with_shares_on_the_best_gpus() -> None:
    state = _state("n", 4, used=(600, 300))
    meter = FragMeter(SHAPES)
    types = [TaskType(0, _share(400), 2), TaskType(1, _share(600), 1), TaskType(2, _whole(1), 1)]
    reqs = {t.type_id: t.request for t in types}
    patterns = enumerate_patterns(0, state, types, meter, PatternLimits(max_patterns=200, max_evals=10_000))
    before = meter.node(state)
    for pattern in patterns:
        copy = state.copy()
        _apply(copy, pattern.steps, reqs)
        assert pattern.cost == round((FragMeter(SHAPES).node(copy) - before) * COST_SCALE)
    # A lone 0.4 share: the pattern takes the GPU whose use grows fragmentation least, among all GPUs.
    (single,) = [p for p in patterns if p.counts == ((0, 1),)]
    options = []
    for gpu in (0, 1, 2):
        copy = state.copy()
        copy.take(_share(400), [gpu])
        options.append(round((meter.node(copy) - before) * COST_SCALE))
    assert single.cost == min(options)
    assert single.steps[0][1] == (options.index(min(options)),)


def _book(states: list[NodeState], req: PodRequest, choice: tuple[NodeState, list[int]] | None) -> tuple:
    if choice is None:
        return (-1, ())
    choice[0].take(req, choice[1])
    return (states.index(choice[0]), tuple(choice[1]))


def test_a_window_of_one_makes_the_choices_of_fgd(trace_dir: Path) -> None:
    nodes = load_nodes(trace_dir)
    pods = load_pods(trace_dir, "default")
    shapes = trace_shapes(pods)
    arrivals = inflate(pods, sum(FULL_GPU_MILLI * n.gpu_count for n in nodes), 1.3, random.Random(5))
    placer = FragWindowPlacer(shapes, time_limit_s=1.0)
    fgd = FGD(shapes)
    window_states = [n.copy() for n in nodes]
    fgd_states = [n.copy() for n in nodes]
    for pod in arrivals:
        [ours] = placer(window_states, [pod.request])
        theirs = fgd.choose(fgd_states, pod.request)
        assert _book(window_states, pod.request, ours) == _book(fgd_states, pod.request, theirs)


def _random_cluster(rng: random.Random) -> list[NodeState]:
    states = []
    for i in range(rng.randint(2, 5)):
        gpus = rng.choice([1, 2, 4, 8])
        used = tuple(rng.choice([0, 0, 200, 400, 600, 1000]) for _ in range(gpus))
        states.append(_state(f"n{i}", gpus, used, cpu=rng.choice([4_000, 8_000, 64_000])))
    return states


def _random_window(rng: random.Random) -> list[PodRequest]:
    kinds = [_share(300), _share(400), _share(600), _share(800), _whole(1), _whole(2), _whole(4)]
    return [rng.choice(kinds) for _ in range(rng.randint(2, 9))]


def _online_milli(states: list[NodeState], window: list[PodRequest], shapes: list[Shape]) -> int:
    fgd = FGD(shapes, quantized=True)
    copies = [s.copy() for s in states]
    placed = 0
    for req in window:
        choice = fgd.choose(copies, req)
        if choice is not None:
            choice[0].take(req, choice[1])
            placed += req.gpu_milli_total
    return placed


def test_the_window_never_places_less_gpu_demand_than_online_fgd() -> None:
    rng = random.Random(11)
    for _ in range(40):
        states = _random_cluster(rng)
        window = _random_window(rng)
        placer = FragWindowPlacer(
            SHAPES, time_limit_s=1.0, candidates=2, limits=PatternLimits(max_patterns=3)
        )
        choices = placer(states, window)
        placed = 0
        copies = {id(s): s.copy() for s in states}
        for req, choice in zip(window, choices, strict=True):
            if choice is not None:
                copy = copies[id(choice[0])]
                assert copy.fits_resources(req)
                copy.take(req, choice[1])
                assert min(copy.gpu_milli) >= 0
                placed += req.gpu_milli_total
        online = _online_milli(states, window, SHAPES)
        assert placed >= online
        # The placer's own reading of online FGD on the window is the integer-score rule's.
        assert placer.last is not None and placer.last.online_milli == online


def test_shares_that_fill_a_gpu_together_land_on_one_gpu_and_keep_the_other_whole() -> None:
    # Mostly whole-GPU tasks: a 0.6 and a 0.4 share on one GPU leave the other GPU whole for them.
    shapes: list[Shape] = [(_whole(1), 0.6), (_share(600), 0.2), (_share(400), 0.2)]
    states = [_state("a", 2)]
    choices = FragWindowPlacer(shapes, time_limit_s=1.0)(states, [_share(600), _share(400)])
    gpus = [tuple(c[1]) for c in choices if c is not None]
    assert len(gpus) == 2 and gpus[0] == gpus[1]
    assert states[0].gpu_milli == [1000, 1000]  # the replay books the choices, not the placer


def test_replays_respect_capacity_and_repeat_exactly(trace_dir: Path) -> None:
    nodes = load_nodes(trace_dir)
    pods = load_pods(trace_dir, "default")
    shapes = trace_shapes(pods)
    capacity = sum(FULL_GPU_MILLI * n.gpu_count for n in nodes)
    # The first 200 arrivals: enough for the windows to compete for the best nodes.
    arrivals = inflate(pods, capacity, 1.3, random.Random(3))[:200]
    runs = [
        replay(
            nodes,
            arrivals,
            None,
            shapes,
            policy="optimizer",
            seed=3,
            workload="default",
            batch=16,
            batch_placer=FragWindowPlacer(shapes, time_limit_s=0.2, seed=3),
            keep_placements=True,
        )
        for _ in range(2)
    ]
    _recheck(nodes, arrivals, runs[0], capacity)
    assert runs[0].placements == runs[1].placements
    assert runs[0].allocated_pct == runs[1].allocated_pct
    assert len(runs[0].latencies_s) == len(range(0, len(arrivals), 16))


@pytest.mark.parametrize(
    ("flags", "expected"), [([], "fragmentation"), (["--batch-objective", "opened-gpus"], "opened-gpus")]
)
def test_the_trace_command_picks_the_window_objective(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flags: list[str], expected: str
) -> None:
    made: list[str] = []

    def spy(name: str, real: Callable[..., object]) -> Callable[..., object]:
        def factory(**kwargs: float) -> object:
            made.append(name)
            return real(**kwargs)

        return factory

    monkeypatch.setattr(trace_command, "frag_placer_factory", spy("fragmentation", frag_placer_factory))
    monkeypatch.setattr(trace_command, "batch_placer_factory", spy("opened-gpus", batch_placer_factory))
    trace = write_synthetic(tmp_path / "trace", nodes=12, pods=60)
    args = ["trace", "--trace-dir", str(trace), "--policies", "optimizer", "--batch", "8", "--seeds", "1"]
    out = ["--out", str(tmp_path / "out"), "--no-progress", "--no-plots", "--batch-time-limit", "0.1"]
    assert main([*args, *out, *flags]) == 0
    assert made == [expected]
