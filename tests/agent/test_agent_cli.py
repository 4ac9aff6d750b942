"""``optsched agent`` on the command line: ``--once --print`` prints the annotation and nothing else."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optsched.cli import main


def test_print_once_writes_only_the_annotation_value(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["agent", "--simulate", "--hardware", "a100-pcie-bridged", "--node", "n1", "--once", "--print"]
    )
    out, err = capsys.readouterr()
    assert code == 0 and err == ""
    (line,) = out.splitlines()
    value = json.loads(line)
    assert value["nvlinkIslands"] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert len(value["uuids"]) == len(value["pciBusIds"]) == 8


def test_a_bad_profile_is_exit_2_naming_file_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: optsched.io/v1alpha1\nkind: GPUHardwareProfile\nmetadata: {name: box}\n"
        "spec: {product: X, memoryMiB: 1024, count: 2, nvlink: {links: [[0, 2, 1]]}}\n"
    )
    code = main(["agent", "--simulate", "--hardware", str(bad), "--node", "n1", "--once", "--print"])
    err = capsys.readouterr().err
    assert code == 2
    assert str(bad) in err and "spec.nvlink.links[0]" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--simulate", "--node", "n"], "--hardware"),
        (["--hardware", "t4", "--node", "n"], "--simulate"),
        (["--simulate", "--hardware", "t4", "--once", "--print"], "--node"),
        (["--simulate", "--hardware", "t4", "--node", "n", "--print"], "--once"),
        (["--node", "a", "--node", "b", "--once", "--print"], "one node"),
    ],
)
def test_wrong_usage_is_exit_2_with_what_to_do(
    args: list[str], says: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NODE_NAME", raising=False)
    assert main(["agent", *args]) == 2
    assert says in capsys.readouterr().err


def test_without_a_driver_the_real_agent_says_so_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("pynvml")
    code = main(["agent", "--node", "n1", "--once", "--print"])
    err = capsys.readouterr().err
    if code == 0:
        pytest.skip("this machine has an NVIDIA driver")
    assert code == 2 and "NVML" in err and "--simulate" in err
