"""A layout change around MIG instances in use: what it keeps is untouched, what it removes must be free."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from optsched.agent.mig_apply import MigApplyResult, apply_layout, recover
from optsched.agent.mig_journal import read_journal
from optsched.agent.mig_users import NO_HOLDERS, Holders
from optsched.agent.nvml import NvmlBackend
from optsched.agent.profile import resolve_profiles
from optsched.agent.simulated_mig import SimulatedMig
from optsched.mig.layout import MigSlot
from optsched.mig.profiles import model_for
from tests.agent.fake_pynvml import FakeNvml
from tests.agent.faulty_mig import Crash, FaultyMig

A100_80 = "NVIDIA-A100-SXM4-80GB"
H100 = "NVIDIA-H100-80GB-HBM3"
Layout = dict[int, list[tuple[str, int]]]

BEFORE: Layout = {0: [("3g.40gb", 0), ("3g.40gb", 4)], 1: [("7g.80gb", 0)]}
WANTED: Layout = {0: [("3g.40gb", 0), ("2g.20gb", 4), ("1g.10gb", 6)]}
"""GPU 0 keeps its 3g.40gb at start 0 (in use) and changes around it."""
AFTER: Layout = {**BEFORE, **WANTED}
KEPT = (0, 0)
USED_BY_POD = Holders(instances={KEPT: ("team/infer",)})


def _node(layout: Layout = BEFORE) -> SimulatedMig:
    mig = SimulatedMig([A100_80] * 2, 81920, None, "n1")
    for gpu, slots in layout.items():
        for profile, start in slots:
            mig.create(gpu, profile, start)
    return mig


def _state(mig: SimulatedMig) -> Layout:
    return {g: sorted((i.profile, i.start) for i in mig.instances(g)) for g in (0, 1)}


def _sorted(layout: Layout) -> Layout:
    return {g: sorted(layout.get(g, [])) for g in (0, 1)}


def _apply(mig: FaultyMig, journal: Path, holders: Holders = USED_BY_POD) -> MigApplyResult:
    desired = {g: [MigSlot(p, s) for p, s in slots] for g, slots in WANTED.items()}
    return apply_layout(mig, mig.inner.models, desired, holders, journal)


def _touched_kept(mig: FaultyMig) -> list[tuple[str, int, str, int]]:
    return [call for call in mig.log if (call[1], call[3]) == KEPT]


@pytest.fixture
def journal(tmp_path: Path) -> Path:
    return tmp_path / "agent" / "mig-journal.json"


@pytest.mark.parametrize(
    ("holders", "busy"),
    [(USED_BY_POD, set()), (NO_HOLDERS, {KEPT}), (USED_BY_POD, {KEPT})],
    ids=["held-by-a-pod", "busy-in-nvml", "both"],
)
def test_a_change_keeping_an_instance_in_use_creates_next_to_it(
    journal: Path, holders: Holders, busy: set[tuple[int, int]]
) -> None:
    mig = FaultyMig(_node(), in_use_at=busy)
    kept = mig.inner.instances(0)[0]
    result = _apply(mig, journal, holders)
    assert result == MigApplyResult("Success", "the MIG layout was applied on GPU 0", (0,))
    assert _state(mig.inner) == _sorted(AFTER)
    assert mig.inner.instances(0)[0] == kept, "the kept instance is the same one, with its UUID"
    assert mig.log == [("destroy", 0, "3g.40gb", 4), ("create", 0, "2g.20gb", 4), ("create", 0, "1g.10gb", 6)]
    assert not journal.exists()


def test_a_change_removing_an_instance_in_use_is_refused_naming_its_holder(journal: Path) -> None:
    mig = FaultyMig(_node())
    holders = Holders(instances={(0, 4): ("team/infer",)})
    result = _apply(mig, journal, holders)
    assert result.state == "Failed" and result.changed == (0,)
    assert "GPU 0: the layout removes 3g.40gb at start 4, in use by team/infer" in result.message
    assert mig.log == [] and not journal.exists()
    assert _state(mig.inner) == _sorted(BEFORE)


def test_an_instance_that_comes_into_use_after_the_checks_is_not_destroyed(journal: Path) -> None:
    mig = FaultyMig(_node())
    real = mig.instances

    def late(gpu: int) -> tuple[object, ...]:
        if mig.calls["instances"] >= 1:  # the first read passes the checks; later reads see it in use
            mig.in_use_at.add((0, 4))
        return real(gpu)

    mig.instances = late  # type: ignore[method-assign,assignment]
    result = _apply(mig, journal)
    assert result.state == "Failed" and result.rolled_back
    assert "3g.40gb at start 4 came into use; it is not destroyed" in result.message
    assert _state(mig.inner) == _sorted(BEFORE) and mig.log == []


def _calls() -> Iterator[tuple[str, int]]:
    with tempfile.TemporaryDirectory() as tmp:
        mig = FaultyMig(_node())
        assert _apply(mig, Path(tmp) / "count.json").state == "Success"
    for kind in ("instances", "create", "destroy"):
        for n in range(2, mig.calls[kind] + 1) if kind == "instances" else range(1, mig.calls[kind] + 1):
            yield kind, n


@pytest.mark.parametrize(("kind", "n"), list(_calls()))
def test_a_failure_mid_apply_restores_only_what_the_apply_changed(journal: Path, kind: str, n: int) -> None:
    mig = FaultyMig(_node(), fail={kind: {n}}, in_use_at={KEPT})
    result = _apply(mig, journal)
    assert result.state == "Failed" and result.rolled_back, result.message
    assert _state(mig.inner) == _sorted(BEFORE)
    assert _touched_kept(mig) == [], "neither the apply nor its rollback touched the kept instance"
    assert {gpu for _, gpu, _, _ in mig.log} <= {0}, "GPU 1 is not in the change and is never touched"


@pytest.mark.parametrize(("kind", "n"), list(_calls()))
def test_a_crash_mid_apply_is_recovered_without_touching_the_kept_instance(
    journal: Path, kind: str, n: int
) -> None:
    mig = FaultyMig(_node(), crash=(kind, n), in_use_at={KEPT})
    with pytest.raises(Crash):
        _apply(mig, journal)
    plan = read_journal(journal)
    assert plan is not None and sorted(plan.checkpoint) == [0], "only the changed GPU is checkpointed"
    assert (0, 0) in {(g, i.start) for g in (0,) for i in mig.inner.instances(g)}, "the crash left it"
    after_crash = FaultyMig(mig.inner, in_use_at={KEPT})
    result = recover(after_crash, journal)
    assert result is not None and result.rolled_back and result.changed == (0,)
    assert _state(mig.inner) == _sorted(BEFORE)
    assert _touched_kept(mig) == [] and _touched_kept(after_crash) == []
    assert _apply(FaultyMig(mig.inner), journal).state == "Success"
    assert _state(mig.inner) == _sorted(AFTER)


def test_the_rollback_never_destroys_an_instance_the_apply_did_not_make(journal: Path) -> None:
    mig = FaultyMig(_node(), crash=("create", 1))
    with pytest.raises(Crash):
        _apply(mig, journal)
    mig.inner.create(0, "1g.10gb", 5)  # someone else's, in the space the apply freed
    result = recover(mig.inner, journal)
    assert result is not None and result.state == "Failed" and not result.rolled_back
    assert "GPU 0 needs attention" in result.message and journal.exists()
    assert ("1g.10gb", 5) in _state(mig.inner)[0] and ("3g.40gb", 0) in _state(mig.inner)[0]


def test_nvml_changes_a_gpu_around_an_instance_running_a_process(journal: Path) -> None:
    fake = FakeNvml(resolve_profiles("dgx-h100")[0], "node-m", mig_enabled=True)
    nvml = NvmlBackend(fake)
    nvml.mig.create(0, "3g.40gb", 0)
    nvml.mig.create(0, "3g.40gb", 4)
    fake.run_process(0, 0)
    kept = nvml.mig.instances(0)[0]
    assert kept.in_use
    desired = {0: [MigSlot("3g.40gb", 0), MigSlot("2g.20gb", 4), MigSlot("1g.10gb", 6)]}
    result = apply_layout(nvml.mig, {0: model_for(H100, 81559)}, desired, NO_HOLDERS, journal)
    assert result.state == "Success", result.message
    after = nvml.mig.instances(0)
    assert [(i.profile, i.start) for i in after] == [("3g.40gb", 0), ("2g.20gb", 4), ("1g.10gb", 6)]
    assert after[0] == kept, "the running instance keeps its UUID (NVML gives a new instance a new one)"
    assert fake.calls["nvmlGpuInstanceDestroy"] == 1


def test_the_simulated_gpu_changes_one_instance_and_leaves_the_others_as_they_are() -> None:
    mig = _node()
    others = mig.instances(0)[0], mig.instances(1)
    mig.destroy(0, 4)
    mig.create(0, "1g.10gb", 6)
    mig.create(0, "2g.20gb", 4)
    assert (mig.instances(0)[0], mig.instances(1)) == others
    assert _state(mig)[0] == sorted(WANTED[0])
