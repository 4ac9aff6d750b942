"""The safe MIG apply: only changed GPUs, refusals touch nothing, any failed step is rolled back."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from optsched.agent import mig_apply, mig_journal
from optsched.agent.mig_apply import MigApplyResult, apply_layout, recover
from optsched.agent.mig_journal import read_journal
from optsched.agent.mig_users import NO_HOLDERS, Holders
from optsched.agent.simulated_mig import SimulatedMig
from optsched.mig.layout import MigSlot
from tests.agent.faulty_mig import Crash, FaultyMig

A100_80 = "NVIDIA-A100-SXM4-80GB"
Layout = dict[int, list[tuple[str, int]]]

BEFORE: Layout = {
    0: [("3g.40gb", 0), ("3g.40gb", 4)],
    1: [("7g.80gb", 0)],
    2: [("1g.20gb", 0), ("2g.20gb", 2)],
    3: [("4g.40gb", 0)],
}
WANTED: Layout = {
    0: [("1g.10gb", 6), ("2g.20gb", 4), ("4g.40gb", 0)],
    1: [("1g.10gb", s) for s in range(7)],
    2: [("1g.20gb", 0), ("2g.20gb", 2)],  # unchanged
}
AFTER: Layout = {**BEFORE, 0: WANTED[0], 1: WANTED[1]}


def _node(layout: Layout = BEFORE, gpus: int = 4) -> SimulatedMig:
    mig = SimulatedMig([A100_80] * gpus, 81920, None, "n1")
    for gpu, slots in layout.items():
        for profile, start in slots:
            mig.create(gpu, profile, start)
    return mig


def _state(mig: SimulatedMig) -> Layout:
    return {g: sorted((i.profile, i.start) for i in mig.instances(g)) for g in range(len(mig.models))}


def _sorted(layout: Layout, gpus: int = 4) -> Layout:
    return {g: sorted(layout.get(g, [])) for g in range(gpus)}


def _desired(layout: Layout) -> dict[int, list[MigSlot]]:
    return {g: [MigSlot(p, s) for p, s in slots] for g, slots in layout.items()}


def _apply(
    mig: FaultyMig | SimulatedMig, journal: Path, layout: Layout = WANTED, holders: Holders = NO_HOLDERS
) -> MigApplyResult:
    inner = mig.inner if isinstance(mig, FaultyMig) else mig
    return apply_layout(mig, inner.models, _desired(layout), holders, journal)


@pytest.fixture
def journal(tmp_path: Path) -> Path:
    return tmp_path / "agent" / "mig-journal.json"


def test_the_layout_is_applied_on_the_changed_gpus_only(journal: Path) -> None:
    mig = FaultyMig(_node())
    result = _apply(mig, journal)
    assert result == MigApplyResult("Success", "the MIG layout was applied on GPUs 0, 1", (0, 1))
    assert _state(mig.inner) == _sorted(AFTER)
    assert {gpu for _, gpu, _, _ in mig.log} == {0, 1}
    assert not journal.exists()


def test_unwanted_instances_go_first_then_the_missing_ones_largest_first(journal: Path) -> None:
    mig = FaultyMig(_node())
    _apply(mig, journal)
    gpu0 = [(kind, profile, start) for kind, gpu, profile, start in mig.log if gpu == 0]
    assert gpu0 == [
        ("destroy", "3g.40gb", 0),
        ("destroy", "3g.40gb", 4),
        ("create", "4g.40gb", 0),
        ("create", "2g.20gb", 4),
        ("create", "1g.10gb", 6),
    ]


def test_an_instance_already_in_place_is_kept(journal: Path) -> None:
    mig = FaultyMig(_node({0: [("3g.40gb", 0), ("3g.40gb", 4)]}))
    result = _apply(mig, journal, {0: [("3g.40gb", 0), ("2g.20gb", 4)]})
    assert result.state == "Success"
    assert mig.log == [("destroy", 0, "3g.40gb", 4), ("create", 0, "2g.20gb", 4)]


def test_applying_the_current_layout_changes_nothing(journal: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mig = FaultyMig(_node())
    first = _apply(mig, journal)
    writes: list[Path] = []
    monkeypatch.setattr(mig_apply, "write_journal", lambda path, _plan: writes.append(path))
    mig.log.clear()
    again = _apply(mig, journal)
    assert again == MigApplyResult("Success", "the MIG layout is already in place", ())
    assert first.state == "Success" and mig.log == [] and writes == []
    assert _state(mig.inner) == _sorted(AFTER)


def test_a_repeated_slot_is_a_change_and_is_refused(journal: Path) -> None:
    mig = FaultyMig(_node({0: [("7g.80gb", 0)]}))
    result = _apply(mig, journal, {0: [("7g.80gb", 0), ("7g.80gb", 0)]})
    assert result.state == "Failed" and "overlap" in result.message and mig.log == []


def test_a_gpu_held_whole_by_a_pod_is_refused_and_nothing_is_touched(journal: Path) -> None:
    mig = FaultyMig(_node())
    result = _apply(mig, journal, holders=Holders(whole={1: ("team/a",), 2: ("team/b",)}))
    assert result.state == "Failed" and result.changed == (0, 1)
    assert "refused, nothing was changed: GPU 1 is held whole by team/a" in result.message
    assert "GPU 2" not in result.message, "an unchanged busy GPU is no reason to refuse"
    assert mig.log == [] and not journal.exists()
    assert _state(mig.inner) == _sorted(BEFORE)


def test_a_layout_removing_instances_in_use_is_refused(journal: Path) -> None:
    mig = FaultyMig(_node(), in_use={0})
    result = _apply(mig, journal)
    assert result.state == "Failed"
    assert "GPU 0: the layout removes 3g.40gb at start 0, in use by a process (NVML)" in result.message
    assert "GPU 0: the layout removes 3g.40gb at start 4, in use by a process (NVML)" in result.message
    assert mig.log == [] and not journal.exists()


def test_an_invalid_layout_is_refused_with_every_reason(journal: Path) -> None:
    mig = FaultyMig(_node())
    bad = {0: [("2g.20gb", 6), ("4g.40gb", 0)], 1: [("1g.5gb", 0)], 2: WANTED[2]}
    result = _apply(mig, journal, bad)
    assert result.state == "Failed" and result.changed == (0, 1)
    assert "GPU 0: 2g.20gb at start 6: 2g.20gb cannot start at memory slice 6" in result.message
    assert "GPU 1: 1g.5gb at start 0: A100-80GB has no MIG profile '1g.5gb'" in result.message
    assert mig.log == [] and not journal.exists()
    assert _state(mig.inner) == _sorted(BEFORE)


def test_a_gpu_without_a_mig_table_is_refused(journal: Path) -> None:
    inner = SimulatedMig([A100_80, "Tesla-T4"], 81920, None, "n1")
    result = apply_layout(inner, inner.models, _desired({1: [("1g.10gb", 0)]}), NO_HOLDERS, journal)
    assert result.state == "Failed" and "GPU 1: its product has no MIG profile table" in result.message


def test_a_journal_left_behind_blocks_the_apply_until_recovered(journal: Path) -> None:
    journal.parent.mkdir(parents=True)
    journal.write_text("{}", encoding="utf-8")
    mig = FaultyMig(_node())
    result = _apply(mig, journal)
    assert result.state == "Failed" and "recovered first" in result.message and mig.log == []


def _count_calls(tmp_path: Path) -> dict[str, int]:
    mig = FaultyMig(_node())
    assert _apply(mig, tmp_path / "count.json").state == "Success"
    return dict(mig.calls)


def _every_call(kinds: tuple[str, ...] = ("instances", "create", "destroy")) -> Iterator[tuple[str, int]]:
    with tempfile.TemporaryDirectory() as tmp:
        calls = _count_calls(Path(tmp))
    for kind in kinds:
        for n in range(1, calls.get(kind, 0) + 1):
            yield kind, n


INITIAL_READS = len(WANTED)


@pytest.mark.parametrize(("kind", "n"), list(_every_call()))
def test_a_failure_at_any_call_leaves_the_previous_layout(journal: Path, kind: str, n: int) -> None:
    mig = FaultyMig(_node(), fail={kind: {n}})
    result = _apply(mig, journal)
    assert result.state == "Failed"
    assert f"injected failure of {kind} #{n}" in result.message
    assert _state(mig.inner) == _sorted(BEFORE)
    assert not journal.exists()
    if kind == "instances" and n <= INITIAL_READS:
        assert not result.rolled_back and "nothing was changed" in result.message and mig.log == []
    else:
        assert result.rolled_back and "the previous layout was restored on GPU" in result.message


@pytest.mark.parametrize("n", [n for kind, n in _every_call(("create",))])
def test_a_verify_mismatch_rolls_back(journal: Path, n: int) -> None:
    mig = FaultyMig(_node(), silent={n})
    result = _apply(mig, journal)
    assert result.state == "Failed" and result.rolled_back
    assert "after the apply, expected" in result.message
    assert _state(mig.inner) == _sorted(BEFORE)
    assert not journal.exists()


JOURNAL_WRITES = 1 + 2 * 2  # the checkpoint, then before and after each changed GPU


@pytest.mark.parametrize("k", range(1, JOURNAL_WRITES + 1))
def test_a_journal_write_failure_leaves_the_previous_layout(
    journal: Path, monkeypatch: pytest.MonkeyPatch, k: int
) -> None:
    real = mig_apply.write_journal
    writes = []

    def failing(path: Path, plan: object) -> None:
        writes.append(plan)
        if len(writes) == k:
            raise OSError(28, "No space left on device")
        real(path, plan)  # type: ignore[arg-type]

    monkeypatch.setattr(mig_apply, "write_journal", failing)
    mig = FaultyMig(_node())
    result = _apply(mig, journal)
    assert result.state == "Failed" and "No space left on device" in result.message
    assert _state(mig.inner) == _sorted(BEFORE)
    assert not journal.exists()
    assert result.rolled_back == (k > 1)
    if k == 1:
        assert mig.log == [] and "nothing was changed" in result.message


def test_the_reference_apply_makes_the_journal_writes_counted_above(
    journal: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = mig_apply.write_journal
    plans = []
    monkeypatch.setattr(mig_apply, "write_journal", lambda path, plan: (plans.append(plan), real(path, plan)))
    assert _apply(FaultyMig(_node()), journal).state == "Success"
    assert len(plans) == JOURNAL_WRITES
    assert [(p.touched, p.done) for p in plans] == [
        ((), ()),
        ((0,), ()),
        ((0,), (0,)),
        ((0, 1), (0,)),
        ((0, 1), (0, 1)),
    ]


def test_a_failed_restore_keeps_the_journal_and_says_the_gpu_needs_attention(journal: Path) -> None:
    mig = FaultyMig(_node(), fail_from={"create": 2})
    result = _apply(mig, journal)
    assert result.state == "Failed" and not result.rolled_back
    assert "GPU 0 needs attention" in result.message and f"the journal {journal} is kept" in result.message
    assert journal.exists()
    healed = recover(mig.inner, journal)
    assert healed is not None and healed.rolled_back and healed.changed == (0, 1)
    assert _state(mig.inner) == _sorted(BEFORE)
    assert not journal.exists()


def _crash_points() -> list[tuple[str, int]]:
    return [(kind, n) for kind, n in _every_call() if not (kind == "instances" and n <= INITIAL_READS)]


@pytest.mark.parametrize(("kind", "n"), _crash_points())
def test_a_crash_at_any_call_is_rolled_back_by_recover(journal: Path, kind: str, n: int) -> None:
    mig = FaultyMig(_node(), crash=(kind, n))
    with pytest.raises(Crash):
        _apply(mig, journal)
    assert journal.exists(), "the journal was written before the first call that changes anything"
    result = recover(mig.inner, journal)
    assert result is not None
    assert result.rolled_back and result.state == "Failed" and result.changed == (0, 1)
    assert "an interrupted MIG apply on GPUs 0, 1 was rolled back" in result.message
    assert _state(mig.inner) == _sorted(BEFORE)
    assert not journal.exists()
    assert recover(mig.inner, journal) is None
    assert _apply(mig.inner, journal).state == "Success"
    assert _state(mig.inner) == _sorted(AFTER)


def test_a_crash_during_the_first_reads_leaves_nothing_to_recover(journal: Path) -> None:
    mig = FaultyMig(_node(), crash=("instances", 1))
    with pytest.raises(Crash):
        _apply(mig, journal)
    assert recover(mig.inner, journal) is None


def test_the_journal_holds_the_checkpoint_of_the_changed_gpus(journal: Path) -> None:
    mig = FaultyMig(_node(), crash=("destroy", 1))
    with pytest.raises(Crash):
        _apply(mig, journal)
    plan = read_journal(journal)
    assert plan is not None
    assert sorted(plan.checkpoint) == [0, 1] and plan.touched == (0,) and plan.done == ()
    assert [(s.profile, s.start, s.size) for s in plan.checkpoint[0]] == [
        ("3g.40gb", 0, 4),
        ("3g.40gb", 4, 4),
    ]
    assert sorted((s.profile, s.start) for s in plan.desired[1]) == sorted(WANTED[1])


def test_an_unreadable_journal_is_reported_and_kept(journal: Path) -> None:
    journal.parent.mkdir(parents=True)
    journal.write_text("{half a journ", encoding="utf-8")
    result = recover(_node(), journal)
    assert result is not None and result.state == "Failed" and not result.rolled_back
    assert "is not a journal optsched wrote" in result.message and "need attention" in result.message
    assert journal.exists()


def test_recover_without_a_journal_is_none(journal: Path) -> None:
    assert recover(_node(), journal) is None


def test_a_crash_while_a_journal_is_renamed_leaves_the_old_one_whole(
    journal: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mig = FaultyMig(_node(), crash=("destroy", 1))
    with pytest.raises(Crash):
        _apply(mig, journal)
    before = journal.read_text(encoding="utf-8")

    def crash(_src: object, _dst: object) -> None:
        raise Crash("rename")

    monkeypatch.setattr(mig_journal.os, "replace", crash)
    plan = read_journal(journal)
    assert plan is not None
    with pytest.raises(Crash):
        mig_journal.write_journal(journal, plan)
    assert journal.read_text(encoding="utf-8") == before
    assert sorted(p.name for p in journal.parent.iterdir()) == [journal.name], "no temporary file is left"


def test_the_fault_points_cover_every_call_of_a_clean_apply(tmp_path: Path) -> None:
    # GPU 0: read, 2 destroys, 3 creates, verify; GPU 1: read, 1 destroy, 7 creates, verify; 3 first reads
    assert _count_calls(tmp_path) == {"instances": 7, "destroy": 3, "create": 10}
