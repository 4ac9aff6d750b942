"""Property: on random MIG pools every planned layout is legal, keeps what pods hold, and fits the pods."""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched import planning
from optsched.mig.layout import MigSlot, layout_problems, resource_name
from optsched.mig.room import model_named
from optsched.model.plan import Plan
from optsched.model.snapshot import Snapshot
from tests.builders import pods, snapshot, workload
from tests.solver.helpers import FAST
from tests.solver.mig_builders import mig_gpu, mig_node

A100_80 = "NVIDIA-A100-SXM4-80GB"
LAYOUTS = [
    [],
    [("1g.10gb", s) for s in range(7)],
    [("3g.40gb", 0), ("3g.40gb", 4)],
    [("4g.40gb", 0), ("2g.20gb", 4), ("1g.10gb", 6)],
    [("7g.80gb", 0)],
    [("1g.10gb", 0), ("1g.10gb", 4)],
    [("2g.20gb", 0), ("2g.20gb", 2), ("3g.40gb", 4)],
]
PROFILES = ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"]


@st.composite
def pools(draw: st.DrawFn) -> Snapshot:
    nodes = []
    for n in range(draw(st.integers(1, 2))):
        a100 = draw(st.booleans())
        gpus = []
        for g in range(draw(st.integers(1, 3))):
            layout = draw(st.sampled_from(LAYOUTS))
            held = draw(st.lists(st.booleans(), min_size=len(layout), max_size=len(layout)))
            hold = "a change in flight" if draw(st.integers(0, 5)) == 0 else ""
            model = "A100-80GB" if a100 else "H100-80GB"
            gpus.append(
                mig_gpu(
                    g, *((p, s, u) for (p, s), u in zip(layout, held, strict=True)), model=model, hold=hold
                )
            )
        nodes.append(mig_node(f"m{n}", *gpus, product=A100_80 if a100 else "NVIDIA-H100-80GB-HBM3"))
    queue = [
        workload(
            f"w{i}",
            pods(draw(st.integers(1, 3)), 0, extended={resource_name(draw(st.sampled_from(PROFILES))): 1}),
        )
        for i in range(draw(st.integers(1, 6)))
    ]
    return snapshot([n for n, _ in nodes], queue, usage={n.name: u for n, u in nodes})


def _check(snap: Snapshot, plan: Plan) -> None:
    delta: dict[str, Counter[str]] = {}
    for change in plan.mig_changes:
        node = snap.node(change.node)
        assert node is not None
        gpu = next(g for g in node.mig_gpus if g.index == change.gpu)
        assert gpu.hold == "", change
        model = model_named(gpu.model)
        assert model is not None
        to = [MigSlot(s.profile, s.start) for s in change.to]
        assert layout_problems(model, to) == [], (change, layout_problems(model, to))
        assert {(i.profile, i.start) for i in gpu.in_use} <= {(s.profile, s.start) for s in to}
        assert sorted((s.profile, s.start) for s in change.from_) == list(gpu.layout)
        d = delta.setdefault(change.node, Counter())
        d.update(resource_name(s.profile) for s in change.to)
        d.subtract(resource_name(s.profile) for s in change.from_)
    demand: dict[str, Counter[str]] = {}
    by_key = {w.key: w for w in snap.workloads}
    for decision in plan.admitted:
        for ps_plan in decision.pod_sets:
            ps = next(p for p in by_key[decision.name].pod_sets if p.name == ps_plan.name)
            for pod in ps_plan.pods:
                demand.setdefault(pod.node, Counter()).update(ps.request.extended)
    for node in snap.nodes:
        used = snap.usage_of(node.name).extended
        for name, want in demand.get(node.name, Counter()).items():
            have = node.extended.get(name, 0) + delta.get(node.name, Counter())[name]
            assert want + used.get(name, 0) <= have, (node.name, name, want, have)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pools())
def test_planned_layouts_are_legal_and_hold_the_pods(snap: Snapshot) -> None:
    plan = planning.plan(snap, FAST, check=False)
    _check(snap, plan)
    greedy = planning.plan(snap, FAST, policy="bestfit", check=False)
    assert greedy.mig_changes == []
    assert _mig_admitted(snap, plan) >= _mig_admitted(snap, greedy)


def _mig_admitted(snap: Snapshot, plan: Plan) -> int:
    """Thousandths of a GPU the plan's admitted MIG pods take."""
    by_key = {w.key: w for w in snap.workloads}
    return sum(
        ps.request.mig_milli * len(placed.pods)
        for decision in plan.admitted
        for placed in decision.pod_sets
        for ps in by_key[decision.name].pod_sets
        if ps.name == placed.name
    )
