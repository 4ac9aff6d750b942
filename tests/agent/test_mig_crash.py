"""A real crash in the middle of an apply: the process dies, the simulated hardware and journal stay."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from optsched.agent.mig_apply import apply_layout, recover
from optsched.agent.mig_journal import read_journal
from optsched.agent.mig_users import NO_HOLDERS
from optsched.agent.simulated_mig import SimulatedMig
from optsched.mig.layout import MigSlot

PRODUCTS = ["NVIDIA-A100-SXM4-40GB", "NVIDIA-A100-SXM4-40GB"]

APPLY = """
import sys
from pathlib import Path
from optsched.agent.mig_apply import apply_layout
from optsched.agent.mig_users import NO_HOLDERS
from optsched.agent.simulated_mig import SimulatedMig
from optsched.mig.layout import MigSlot
state, journal, crash_after = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
mig = SimulatedMig(PRODUCTS, 40536, state, "n1", crash_after_creates=crash_after)
desired = {0: [MigSlot("1g.5gb", s) for s in range(7)], 1: [MigSlot("3g.20gb", 0), MigSlot("3g.20gb", 4)]}
print(apply_layout(mig, mig.models, desired, NO_HOLDERS, journal))
"""


def _layout(mig: SimulatedMig) -> dict[int, list[tuple[str, int]]]:
    return {g: [(i.profile, i.start) for i in mig.instances(g)] for g in (0, 1)}


@pytest.mark.parametrize("crash_after", [1, 4, 8])
def test_a_killed_apply_is_rolled_back_on_restart_and_then_applied(tmp_path: Path, crash_after: int) -> None:
    state, journal = tmp_path / "hw" / "n1.json", tmp_path / "agent" / "journal.json"
    before = SimulatedMig(PRODUCTS, 40536, state, "n1")
    before.create(0, "7g.40gb", 0)
    before.create(1, "4g.20gb", 0)
    original = _layout(before)
    script = f"PRODUCTS = {PRODUCTS!r}\n{APPLY}"
    done = subprocess.run(
        [sys.executable, "-c", script, str(state), str(journal), str(crash_after)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 137, done.stdout + done.stderr
    plan = read_journal(journal)
    assert plan is not None and sorted(plan.checkpoint) == [0, 1]

    restarted = SimulatedMig(PRODUCTS, 40536, state, "n1")
    assert _layout(restarted) != original, "the crash left a half-applied layout"
    result = recover(restarted, journal)
    assert result is not None and result.rolled_back
    assert _layout(restarted) == original
    assert _layout(SimulatedMig(PRODUCTS, 40536, state, "n1")) == original, "the rollback is on disk"
    assert not journal.exists()

    desired = {0: [MigSlot("1g.5gb", s) for s in range(7)], 1: [MigSlot("3g.20gb", 0), MigSlot("3g.20gb", 4)]}
    again = apply_layout(restarted, restarted.models, desired, NO_HOLDERS, journal)
    assert again.state == "Success" and again.changed == (0, 1)
    assert _layout(restarted) == {0: [("1g.5gb", s) for s in range(7)], 1: [("3g.20gb", 0), ("3g.20gb", 4)]}
