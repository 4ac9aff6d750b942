"""Property: check_plan accepts a one-GPU MIG change exactly when a brute-force reading of the table does.

The brute force below is written from the placement rules alone: each instance
marks the memory slices it occupies on the model's axis (none past the last,
none twice), starts only where its profile lists, no profile more often than
its instance cap, compute slices summed within the model's. Layouts are drawn
at random over every model of the table (profiles of other models and starts
0..7 included), and also grown one legal instance at a time, so both verdicts
are exercised.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import event, given, settings
from hypothesis import strategies as st

from optsched.mig.profiles import MigModel, models
from optsched.model.mig import MigChange, MigGpu, MigInstanceState, slots
from optsched.model.plan import Plan, PlanStatus
from optsched.model.snapshot import Snapshot
from optsched.validate import check_plan
from tests.builders import node, snapshot

Layout = list[tuple[str, int]]
ALL_PROFILES = sorted({p.name for m in models() for p in m.profiles} | {"9g.99gb"})


def legal(model: MigModel, layout: Layout) -> bool:
    table = {p.name: p for p in model.profiles}
    occupied = [False] * model.memory_slices
    counts: Counter[str] = Counter()
    compute = 0
    for name, start in layout:
        profile = table.get(name)
        if profile is None or start not in profile.starts:
            return False
        for memory_slice in range(start, start + profile.memory_slices):
            if memory_slice >= model.memory_slices or occupied[memory_slice]:
                return False
            occupied[memory_slice] = True
        counts[name] += 1
        compute += profile.compute
    return compute <= model.compute_slices and all(counts[n] <= table[n].max_instances for n in counts)


def _full(model: MigModel) -> tuple[str, int]:
    """The one instance that takes the whole GPU: the layout each GPU starts from."""
    whole = max(model.profiles, key=lambda p: (p.memory_slices, p.compute))
    return (whole.name, whole.starts[0])


@st.composite
def model_and_layout(draw: st.DrawFn) -> tuple[MigModel, Layout]:
    model = draw(st.sampled_from(models()))
    own = [p.name for p in model.profiles]
    candidate = st.tuples(st.sampled_from(own) | st.sampled_from(ALL_PROFILES), st.integers(0, 7))
    drawn = draw(st.lists(candidate, max_size=9))
    if draw(st.booleans()):
        return model, drawn
    grown: Layout = []
    for instance in drawn:
        if legal(model, [*grown, instance]):
            grown.append(instance)
    if draw(st.booleans()) and grown:
        # One more instance anywhere: often just illegal, next to a legal layout.
        grown.append(draw(candidate))
    return model, grown


def one_change(model: MigModel, to: Layout) -> tuple[Plan, Snapshot]:
    start = _full(model)
    gpu = MigGpu(
        index=0,
        uuid="GPU-0",
        model=model.name,
        instances=(MigInstanceState(profile=start[0], start=start[1]),),
    )
    base = node("n1", gpus=1, product=model.products[0], extended={f"nvidia.com/mig-{start[0]}": 1})
    snap = snapshot([base.model_copy(update={"mig_gpus": (gpu,)})], [])
    change = MigChange(node="n1", gpu=0, uuid="GPU-0", from_=slots([start]), to=slots(to))
    return Plan(status=PlanStatus.HEURISTIC, policy="test", mig_changes=[change]), snap


@settings(max_examples=400, deadline=None)
@given(model_and_layout())
def test_check_plan_agrees_with_brute_force_legality(case: tuple[MigModel, Layout]) -> None:
    model, to = case
    if sorted(to) == [_full(model)]:
        to = []  # a change to the layout already there is refused for another reason
    plan, snap = one_change(model, to)
    violations = check_plan(snap, plan)
    verdict = legal(model, to)
    event("legal" if verdict else "illegal")
    assert (violations == []) == verdict, (model.name, to, violations)
