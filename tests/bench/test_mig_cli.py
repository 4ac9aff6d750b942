"""``optsched bench mig`` end to end on a small synthetic trace: table, JSON, figures, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optsched.bench.cli import main
from tests.bench.conftest import write_synthetic


def test_a_small_run_prints_the_table_and_writes_json_and_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = write_synthetic(tmp_path / "trace")
    out = tmp_path / "out"
    code = main(
        [
            "mig", "--trace-dir", str(trace), "--seeds", "1-2", "--nodes", "1", "--windows", "4",
            "--policies", "all-3g.40gb,bestfit,firstfit,optimizer", "--time-limit", "0.2",
            "--json", str(out / "mig.json"), "--out", str(out), "--no-progress",
        ]
    )  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    assert "smallest profile" in printed and "rejected" in printed
    assert "| A100-80GB (8 GPUs) | bestfit |" in printed and "| H100-80GB (8 GPUs) | optimizer |" in printed
    assert "running instances destroyed by the optimizer" in printed
    document = json.loads((out / "mig.json").read_text())
    runs = document["runs"]
    assert len(runs) == 2 * 2 * 4
    assert all(len(r["acceptanceSeries"]) == 4 and r["podsMoved"] == 0 for r in runs)
    assert (out / "mig-acceptance.png").stat().st_size > 0 and (out / "mig-gpus-in-use.png").is_file()


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [("--pools", "v100", "--pools"), ("--policies", "random", "--policies"), ("--nodes", "0", "--nodes")],
)
def test_bad_options_exit_2_naming_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str, message: str
) -> None:
    trace = write_synthetic(tmp_path / "trace")
    code = main(["mig", "--trace-dir", str(trace), "--seeds", "1", "--no-plots", flag, value])
    assert code == 2
    assert message in capsys.readouterr().err
