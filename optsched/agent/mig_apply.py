"""Apply a desired MIG layout safely: only the GPUs that change, checkpointed, verified, rolled back.

NVIDIA's mig-parted wipes every instance on a GPU and lets the driver choose
placements, and it has no automatic rollback. Here a layout names exact
placements, so the apply is a small state machine per node:

1. read the instances of the GPUs in the desired layout; a GPU whose
   ``(profile, start)`` set already matches is left alone;
2. refuse, touching nothing, when a changed GPU's layout breaks the model's
   rules (every reason is reported), when a pod holds the GPU whole, or when
   the layout removes an instance that is, or may be, in use
   (:class:`~optsched.agent.mig_users.Holders`); instances the layout keeps
   may be in use;
3. write the journal (checkpoint of the changed GPUs, the desired layout,
   progress) durably before the first call;
4. per changed GPU: destroy the instances not wanted, create the missing ones
   at their placements largest first, verify the GPU holds exactly the desired
   set, record the progress; an instance in both layouts is never touched;
5. on any failure undo the apply on the GPUs touched: destroy only what it
   created, re-create only what it destroyed, verify the checkpoint, and
   report ``Failed`` with the reason and whether the restore worked; delete
   the journal (it is kept only when the restore itself failed).

NVML creates and destroys single GPU instances while other instances of the
same GPU run work; only an instance being destroyed must be idle (NVIDIA MIG
user guide, "Destroying GPU Instances":
docs.nvidia.com/datacenter/tesla/mig-user-guide/). So a GPU that keeps
instances in use can still change around them.

:func:`recover` handles a journal left by a crash: it undoes the apply in the
same way (the next pass applies the layout again).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from optsched.agent.backend import BackendError, MigControl
from optsched.agent.devices import MigInstance
from optsched.agent.mig_journal import (
    Journal,
    JournalError,
    JournalSlot,
    delete_journal,
    read_journal,
    write_journal,
)
from optsched.agent.mig_users import Holders
from optsched.mig.layout import MigSlot, layout_problems
from optsched.mig.profiles import MigModel

_COMPUTE = re.compile(r"^(\d+)g\.")


@dataclass(frozen=True)
class MigApplyResult:
    """What an apply (or a recovery) did, for ``NodeGPUs.status.migLayout``."""

    state: Literal["Success", "Failed"]
    message: str
    changed: tuple[int, ...]
    """GPUs whose layout was (or would have been) changed."""
    rolled_back: bool = False
    """True when the layout from before the apply was restored."""


class _Mismatch(Exception):
    """A GPU's instances after the calls are not the set they should be."""


def _gpus(gpus: Iterable[int]) -> str:
    """``GPU 0`` or ``GPUs 0, 1``."""
    listed = [str(g) for g in gpus]
    return f"GPU{'s' if len(listed) != 1 else ''} {', '.join(listed)}"


def _describe(slots: Iterable[JournalSlot]) -> str:
    return ", ".join(f"{s.profile}@{s.start}" for s in sorted(slots, key=lambda s: s.start)) or "no instances"


def _key(slots: Iterable[JournalSlot | MigInstance | MigSlot]) -> list[tuple[str, int]]:
    return sorted((s.profile, s.start) for s in slots)


def changed_gpus(
    current: Mapping[int, Iterable[MigInstance]], desired: Mapping[int, Sequence[MigSlot]]
) -> tuple[int, ...]:
    """The GPUs in ``desired`` whose instances (profile and start, each counted) differ from it."""
    return tuple(gpu for gpu in sorted(desired) if _key(current.get(gpu, ())) != _key(desired[gpu]))


def apply_layout(
    mig: MigControl,
    models: Mapping[int, MigModel | None],
    desired: Mapping[int, Sequence[MigSlot]],
    holders: Holders,
    journal: Path,
) -> MigApplyResult:
    """Bring the GPUs in ``desired`` to their layouts, never removing what ``holders`` says is in use."""
    if journal.exists():
        return MigApplyResult(
            "Failed", f"an interrupted MIG apply left its journal {journal}; it is recovered first", ()
        )
    try:
        current = {gpu: mig.instances(gpu) for gpu in sorted(desired)}
    except BackendError as exc:
        return MigApplyResult("Failed", f"cannot read the MIG instances: {exc}; nothing was changed", ())
    changed = changed_gpus(current, desired)
    if not changed:
        return MigApplyResult("Success", "the MIG layout is already in place", ())
    refusals = _refusals(models, desired, holders, current, changed)
    if refusals:
        return MigApplyResult("Failed", "refused, nothing was changed: " + "; ".join(refusals), changed)
    plan = Journal(
        checkpoint={
            gpu: tuple(JournalSlot(i.profile, i.start, i.size) for i in current[gpu]) for gpu in changed
        },
        desired={gpu: _sized(models[gpu], desired[gpu]) for gpu in changed},
    )
    try:
        write_journal(journal, plan)
    except OSError as exc:
        return MigApplyResult(
            "Failed", f"cannot write the MIG apply journal {journal}: {exc}; nothing was changed", changed
        )
    return _run(mig, plan, journal, changed)


def _refusals(
    models: Mapping[int, MigModel | None],
    desired: Mapping[int, Sequence[MigSlot]],
    holders: Holders,
    current: Mapping[int, tuple[MigInstance, ...]],
    changed: tuple[int, ...],
) -> list[str]:
    reasons = []
    for gpu in changed:
        model = models.get(gpu)
        if model is None:
            reasons.append(f"GPU {gpu}: its product has no MIG profile table, so it takes no MIG layout")
        else:
            reasons.extend(f"GPU {gpu}: {problem}" for problem in layout_problems(model, desired[gpu]))
        reasons.extend(holders.blocking(gpu, current[gpu], desired[gpu]))
    return reasons


def _sized(model: MigModel | None, slots: Sequence[MigSlot]) -> tuple[JournalSlot, ...]:
    assert model is not None  # _refusals refused a GPU without a model
    out = []
    for slot in slots:
        profile = model.profile(slot.profile)
        assert profile is not None  # layout_problems refused an unknown profile
        out.append(JournalSlot(slot.profile, slot.start, profile.memory_slices))
    return tuple(out)


def _run(mig: MigControl, plan: Journal, journal: Path, changed: tuple[int, ...]) -> MigApplyResult:
    touched: list[int] = []
    try:
        for gpu in changed:
            touched.append(gpu)
            plan = replace(plan, touched=tuple(touched))
            write_journal(journal, plan)
            _converge(mig, gpu, plan.desired[gpu])
            plan = replace(plan, done=(*plan.done, gpu))
            write_journal(journal, plan)
    except (BackendError, OSError, _Mismatch) as exc:
        return _roll_back(mig, plan, journal, touched, changed, str(exc))
    try:
        delete_journal(journal)
    except OSError as exc:
        return MigApplyResult(
            "Failed",
            f"the MIG layout was applied and verified on {_gpus(changed)}, but its journal {journal} "
            f"could not be removed ({exc}); the next start rolls it back and applies it again",
            changed,
        )
    return MigApplyResult("Success", f"the MIG layout was applied on {_gpus(changed)}", changed)


def _largest_first(slots: Iterable[JournalSlot]) -> list[JournalSlot]:
    def compute(slot: JournalSlot) -> int:
        match = _COMPUTE.match(slot.profile)
        return int(match[1]) if match else 0

    return sorted(slots, key=lambda s: (-s.size, -compute(s), s.start))


def _converge(mig: MigControl, gpu: int, want: tuple[JournalSlot, ...]) -> None:
    """Destroy what ``gpu`` holds beyond ``want``, create what it lacks (largest first), then verify.

    An instance in ``want`` is left as it is; one to destroy that came into use
    since the checks stops the apply (it is never destroyed).
    """
    wanted = {(s.profile, s.start) for s in want}
    have = set()
    for instance in mig.instances(gpu):
        if (instance.profile, instance.start) in wanted:
            have.add((instance.profile, instance.start))
        elif instance.in_use:
            raise BackendError(
                f"GPU {gpu}: the MIG instance {instance.profile} at start {instance.start} came into use; "
                "it is not destroyed"
            )
        else:
            mig.destroy(gpu, instance.start)
    for slot in _largest_first(want):
        if (slot.profile, slot.start) not in have:
            mig.create(gpu, slot.profile, slot.start)
    _verify(mig, gpu, want)


def _undo(
    mig: MigControl, gpu: int, before: tuple[JournalSlot, ...], wanted: tuple[JournalSlot, ...]
) -> None:
    """Bring ``gpu`` back to ``before``: destroy only what the apply made, re-create only what it destroyed.

    An instance in both layouts (kept by the apply) is never touched, nor is
    one in neither (not the apply's: a mismatch that needs a person).
    """
    keep = {(s.profile, s.start) for s in before}
    made = {(s.profile, s.start) for s in wanted} - keep
    have = set()
    for instance in mig.instances(gpu):
        if (instance.profile, instance.start) in made:
            mig.destroy(gpu, instance.start)
        else:
            have.add((instance.profile, instance.start))
    for slot in _largest_first(before):
        if (slot.profile, slot.start) not in have:
            mig.create(gpu, slot.profile, slot.start)
    _verify(mig, gpu, before)


def _verify(mig: MigControl, gpu: int, want: tuple[JournalSlot, ...]) -> None:
    got = mig.instances(gpu)
    if _key(got) != _key(want):
        found = _describe(JournalSlot(i.profile, i.start, i.size) for i in got)
        raise _Mismatch(f"GPU {gpu} holds {found} after the apply, expected {_describe(want)}")


def _restore(mig: MigControl, plan: Journal, gpus: Iterable[int]) -> list[str]:
    """Undo the apply on ``gpus``; one sentence per GPU that could not be restored."""
    problems = []
    for gpu in sorted(gpus):
        try:
            _undo(mig, gpu, plan.checkpoint[gpu], plan.desired.get(gpu, ()))
        except (BackendError, _Mismatch) as exc:
            problems.append(f"GPU {gpu} needs attention, its layout could not be restored: {exc}")
    return problems


def _roll_back(
    mig: MigControl, plan: Journal, journal: Path, touched: list[int], changed: tuple[int, ...], reason: str
) -> MigApplyResult:
    problems = _restore(mig, plan, touched)
    if problems:
        return MigApplyResult(
            "Failed",
            f"the MIG apply failed: {reason}; restoring the previous layout failed too: "
            f"{'; '.join(problems)}; the journal {journal} is kept",
            changed,
        )
    kept = _try_delete(journal)
    return MigApplyResult(
        "Failed",
        f"the MIG apply failed: {reason}; the previous layout was restored on {_gpus(touched)}{kept}",
        changed,
        rolled_back=True,
    )


def _try_delete(journal: Path) -> str:
    """Delete the journal; '' when done, else a clause for the message."""
    try:
        delete_journal(journal)
    except OSError as exc:
        return f" (its journal {journal} could not be removed: {exc})"
    return ""


def recover(mig: MigControl, journal: Path) -> MigApplyResult | None:
    """Roll back an apply a crash interrupted, from its journal; None when no apply was interrupted."""
    try:
        plan = read_journal(journal)
    except JournalError as exc:
        return MigApplyResult("Failed", f"{exc}; the GPUs' MIG layouts need attention; it is kept", ())
    if plan is None:
        return None
    changed = tuple(sorted(plan.checkpoint))
    problems = _restore(mig, plan, [gpu for gpu in plan.touched if gpu in plan.checkpoint])
    if problems:
        return MigApplyResult(
            "Failed",
            f"an interrupted MIG apply on {_gpus(changed)} could not be rolled back: "
            f"{'; '.join(problems)}; the journal {journal} is kept",
            changed,
        )
    kept = _try_delete(journal)
    return MigApplyResult(
        "Failed",
        f"an interrupted MIG apply on {_gpus(changed)} was rolled back to the layout before it{kept}; "
        "it is applied again on the next pass",
        changed,
        rolled_back=True,
    )
