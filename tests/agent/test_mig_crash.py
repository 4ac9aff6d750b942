"""A real crash in the middle of an apply: the process dies, the simulated hardware and journal stay."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from optsched.agent.mig_apply import apply_layout, recover
from optsched.agent.mig_journal import read_journal
from optsched.agent.mig_users import NO_HOLDERS
from optsched.agent.simulated_mig import SimulatedMig
from optsched.mig.layout import MigSlot
from tests.agent.faulty_mig import FaultyMig

PRODUCTS = ["NVIDIA-A100-SXM4-40GB", "NVIDIA-A100-SXM4-40GB"]

APPLY = """
import json
import sys
from pathlib import Path
from optsched.agent.mig_apply import apply_layout
from optsched.agent.mig_users import NO_HOLDERS
from optsched.agent.simulated_mig import SimulatedMig
from optsched.mig.layout import MigSlot
state, journal, crash_after = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
mig = SimulatedMig(PRODUCTS, 40536, state, "n1", crash_after_creates=crash_after)
desired = {int(g): [MigSlot(p, s) for p, s in slots] for g, slots in json.loads(sys.argv[4]).items()}
print(apply_layout(mig, mig.models, desired, NO_HOLDERS, journal))
"""


WANTED = {0: [("1g.5gb", s) for s in range(7)], 1: [("3g.20gb", 0), ("3g.20gb", 4)]}


def _crash(state: Path, journal: Path, crash_after: int, wanted: dict[int, list[tuple[str, int]]]) -> None:
    """Run an apply of ``wanted`` in a process that dies after its ``crash_after``-th create."""
    script = f"PRODUCTS = {PRODUCTS!r}\n{APPLY}"
    done = subprocess.run(
        [sys.executable, "-c", script, str(state), str(journal), str(crash_after), json.dumps(wanted)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 137, done.stdout + done.stderr


def _layout(mig: SimulatedMig) -> dict[int, list[tuple[str, int]]]:
    return {g: [(i.profile, i.start) for i in mig.instances(g)] for g in (0, 1)}


@pytest.mark.parametrize("crash_after", [1, 4, 8])
def test_a_killed_apply_is_rolled_back_on_restart_and_then_applied(tmp_path: Path, crash_after: int) -> None:
    state, journal = tmp_path / "hw" / "n1.json", tmp_path / "agent" / "journal.json"
    before = SimulatedMig(PRODUCTS, 40536, state, "n1")
    before.create(0, "7g.40gb", 0)
    before.create(1, "4g.20gb", 0)
    original = _layout(before)
    _crash(state, journal, crash_after, WANTED)
    plan = read_journal(journal)
    assert plan is not None and sorted(plan.checkpoint) == [0, 1]

    restarted = SimulatedMig(PRODUCTS, 40536, state, "n1")
    assert _layout(restarted) != original, "the crash left a half-applied layout"
    result = recover(restarted, journal)
    assert result is not None and result.rolled_back
    assert _layout(restarted) == original
    assert _layout(SimulatedMig(PRODUCTS, 40536, state, "n1")) == original, "the rollback is on disk"
    assert not journal.exists()

    desired = {g: [MigSlot(p, s) for p, s in slots] for g, slots in WANTED.items()}
    again = apply_layout(restarted, restarted.models, desired, NO_HOLDERS, journal)
    assert again.state == "Success" and again.changed == (0, 1)
    assert _layout(restarted) == {0: [("1g.5gb", s) for s in range(7)], 1: [("3g.20gb", 0), ("3g.20gb", 4)]}


@pytest.mark.parametrize("crash_after", [1, 2])
def test_a_killed_apply_around_a_kept_instance_never_touches_it(tmp_path: Path, crash_after: int) -> None:
    state, journal = tmp_path / "hw" / "n1.json", tmp_path / "agent" / "journal.json"
    before = SimulatedMig(PRODUCTS, 40536, state, "n1")
    before.create(0, "3g.20gb", 0)
    before.create(0, "3g.20gb", 4)
    before.create(1, "7g.40gb", 0)
    original = _layout(before)
    _crash(state, journal, crash_after, {0: [("3g.20gb", 0), ("2g.10gb", 4), ("1g.5gb", 6)]})
    restarted = SimulatedMig(PRODUCTS, 40536, state, "n1")
    assert ("3g.20gb", 0) in _layout(restarted)[0], "the crash left the kept instance in place"
    plan = read_journal(journal)
    assert plan is not None and sorted(plan.checkpoint) == [0]
    watched = FaultyMig(restarted)
    result = recover(watched, journal)
    assert result is not None and result.rolled_back and result.changed == (0,)
    assert _layout(restarted) == original
    assert [c for c in watched.log if (c[1], c[3]) == (0, 0)] == [], "the recovery never touched it"
    assert ("destroy", 0, "2g.10gb", 4) in watched.log, "what the apply made is undone"
