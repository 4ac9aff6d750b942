"""Simulated MIG hardware: NVIDIA's placement rules enforced, state that survives a restart, stable UUIDs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from optsched.agent.backend import BackendError, MigControl
from optsched.agent.simulated_mig import SimulatedMig, mig_uuid

A100_80 = "NVIDIA-A100-SXM4-80GB"
H100 = "NVIDIA-H100-80GB-HBM3"


def _mig(
    state: Path | None = None, node: str = "n1", products: tuple[str, ...] = (A100_80, H100)
) -> SimulatedMig:
    return SimulatedMig(products, 81920, state, node)


def test_it_is_a_mig_control() -> None:
    control: MigControl = _mig()
    assert control.instances(0) == ()


def test_instances_come_back_ordered_by_start_with_their_size_and_uuid() -> None:
    mig = _mig()
    mig.create(0, "1g.10gb", 6)
    made = mig.create(0, "3g.40gb", 0)
    mig.create(0, "2g.20gb", 4)
    got = mig.instances(0)
    assert [(i.profile, i.start, i.size) for i in got] == [
        ("3g.40gb", 0, 4),
        ("2g.20gb", 4, 2),
        ("1g.10gb", 6, 1),
    ]
    assert made == got[0]
    assert not any(i.in_use for i in got)
    assert mig.instances(1) == ()


def test_uuids_are_deterministic_and_distinct() -> None:
    assert mig_uuid("n1", 0, 0, "1g.10gb") == mig_uuid("n1", 0, 0, "1g.10gb")
    variants = {
        mig_uuid("n1", 0, 0, "1g.10gb"),
        mig_uuid("n2", 0, 0, "1g.10gb"),
        mig_uuid("n1", 1, 0, "1g.10gb"),
        mig_uuid("n1", 0, 1, "1g.10gb"),
        mig_uuid("n1", 0, 0, "1g.20gb"),
    }
    assert len(variants) == 5 and all(u.startswith("MIG-") for u in variants)
    mig = _mig()
    first = mig.create(0, "7g.80gb", 0).uuid
    mig.destroy(0, 0)
    assert mig.create(0, "7g.80gb", 0).uuid == first


@pytest.mark.parametrize(
    ("setup", "create", "expected"),
    [
        ([], ("2g.20gb", 6), "cannot start at memory slice 6"),
        ([], ("4g.40gb", 4), "allowed starts: 0)"),
        ([("4g.40gb", 0)], ("2g.20gb", 2), "overlap on memory slices 2..3"),
        ([("1g.10gb+me", 0)], ("1g.10gb+me", 3), "at most 1 fit"),
        ([], ("1g.5gb", 0), "has no MIG profile '1g.5gb'"),
        ([("7g.80gb", 0)], ("1g.10gb", 3), "overlap on memory slice 3"),
    ],
)
def test_it_refuses_what_the_hardware_refuses(
    setup: list[tuple[str, int]], create: tuple[str, int], expected: str
) -> None:
    mig = _mig()
    for profile, start in setup:
        mig.create(0, profile, start)
    before = mig.instances(0)
    with pytest.raises(BackendError) as caught:
        mig.create(0, *create)
    assert expected in str(caught.value)
    assert f"GPU 0: cannot create {create[0]} at start {create[1]}" in str(caught.value)
    assert mig.instances(0) == before


def test_a_gpu_without_mig_refuses_every_create() -> None:
    mig = SimulatedMig(["Tesla-T4"], 15360, None, "n1")
    assert mig.models == {0: None}
    with pytest.raises(BackendError, match="Tesla-T4 has no MIG"):
        mig.create(0, "1g.10gb", 0)


def test_unknown_gpus_and_missing_instances_are_errors() -> None:
    mig = _mig()
    with pytest.raises(BackendError, match="has no GPU 2"):
        mig.instances(2)
    with pytest.raises(BackendError, match="no GPU instance starts at memory slice 4"):
        mig.destroy(0, 4)


def test_a_product_not_listed_finds_its_model_by_memory() -> None:
    mig = SimulatedMig(["NVIDIA-A100-SXM-NEW"], 40536, None, "n1")
    model = mig.models[0]
    assert model is not None and model.name == "A100-40GB"


def test_the_state_survives_a_restart(tmp_path: Path) -> None:
    state = tmp_path / "mig" / "n1.json"
    mig = _mig(state)
    mig.create(0, "3g.40gb", 4)
    mig.create(1, "7g.80gb", 0)
    mig.destroy(0, 4)
    mig.create(0, "4g.40gb", 0)
    again = _mig(state)
    assert again.instances(0) == mig.instances(0)
    assert again.instances(1) == mig.instances(1)
    assert sorted(p.name for p in state.parent.iterdir()) == ["n1.json"], "no temporary file is left"
    with pytest.raises(BackendError, match="overlap"):
        again.create(0, "1g.10gb", 1)


def test_a_state_file_of_another_node_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "n1.json"
    _mig(state).create(0, "7g.80gb", 0)
    with pytest.raises(BackendError, match="belongs to node 'n1', not 'n2'"):
        _mig(state, node="n2")


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{not json", "cannot be read"),
        ('{"kind": "something-else", "version": 1}', "expected kind optsched-simulated-mig"),
        (
            '{"kind": "optsched-simulated-mig", "version": 1, "node": "n1", "gpus": {"5": []}}',
            "has no GPU 5",
        ),
        (
            '{"kind": "optsched-simulated-mig", "version": 1, "node": "n1",'
            ' "gpus": {"0": [{"profile": "4g.40gb", "start": 0}, {"profile": "3g.40gb", "start": 2}]}}',
            "GPU 0: 3g.40gb at start 2: 3g.40gb cannot start",
        ),
    ],
)
def test_a_broken_state_file_is_a_backend_error(tmp_path: Path, content: str, expected: str) -> None:
    state = tmp_path / "n1.json"
    state.write_text(content, encoding="utf-8")
    with pytest.raises(BackendError) as caught:
        _mig(state)
    assert str(state) in str(caught.value) and expected in str(caught.value)


CRASHING = """
import sys
from pathlib import Path
from optsched.agent.simulated_mig import SimulatedMig
mig = SimulatedMig(["NVIDIA-A100-SXM4-80GB"], 81920, Path(sys.argv[1]), "n1", crash_after_creates=2)
for start in range(7):
    mig.create(0, "1g.10gb", start)
print("not reached")
"""


def test_crash_after_creates_kills_the_process_after_that_many_creates(tmp_path: Path) -> None:
    state = tmp_path / "n1.json"
    done = subprocess.run(
        [sys.executable, "-c", CRASHING, str(state)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 137, done.stderr
    assert "not reached" not in done.stdout
    assert [i.start for i in _mig(state).instances(0)] == [0, 1]
    saved = json.loads(state.read_text(encoding="utf-8"))
    assert saved["gpus"]["0"] == [{"profile": "1g.10gb", "start": 0}, {"profile": "1g.10gb", "start": 1}]
