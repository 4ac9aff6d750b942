"""``optsched bench trace`` end to end on a small trace: tables, stored results, clear input errors."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from optsched.bench.cli import main
from optsched.bench.expected import ALLOCATION_FILE, load_expected
from optsched.bench.options import parse_seeds
from optsched.errors import InputError
from tests.bench.conftest import write_synthetic


def _fake_expected(directory: Path) -> Path:
    """The authors' table format, with made-up values for two seeds of FGD and BestFit."""
    directory.mkdir(parents=True)
    with (directory / ALLOCATION_FILE).open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["workload", "sc_policy", "tune", "seed", "total_gpus", *range(131)])
        for policy, loss in (("05-BestFit", 7.0), ("06-FGD", 5.0)):
            for seed, jitter in ((42, 0.0), (43, 0.2)):
                values = [min(k, 100 - loss - jitter) for k in range(131)]
                writer.writerow(["openb_pod_list_default", policy, 1.3, seed, 6212, *values])
    return directory


def test_trace_command_prints_tables_and_merges_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = write_synthetic(tmp_path / "trace")
    expected = _fake_expected(tmp_path / "expected")
    out = tmp_path / "out"
    base = [
        "trace",
        "--trace-dir",
        str(trace),
        "--expected-dir",
        str(expected),
        "--seeds",
        "42",
        "--out",
        str(out),
        "--no-progress",
        "--no-plots",
    ]
    assert main([*base, "--policies", "fgd"]) == 0
    assert main([*base, "--policies", "bestfit"]) == 0
    printed = capsys.readouterr().out
    assert "| FGD | FGD authors | 2 |" in printed and "5.10 ± 0.14" in printed
    assert "**bestfit**" in printed and "inside" in printed
    stored = json.loads((out / "trace-results.json").read_text())["runs"]
    assert sorted((r["policy"], r["seed"]) for r in stored) == [("bestfit", 42), ("fgd", 42)]
    with (out / "trace-allocated.csv").open() as handle:
        rows = list(csv.reader(handle))
    assert rows[0][:5] == ["workload", "policy", "batch", "seed", "0"] and len(rows) == 3


def test_trace_command_plots(tmp_path: Path) -> None:
    trace = write_synthetic(tmp_path / "trace")
    out = tmp_path / "out"
    code = main(
        [
            "trace",
            "--trace-dir",
            str(trace),
            "--seeds",
            "42",
            "--policies",
            "bestfit",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert code == 0
    png = out / "trace-default-unallocated.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size < 200_000


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--trace-dir", "/nonexistent/trace"], "trace folder not found"),
        (["--seeds", "soon"], "--seeds"),
        (["--policies", "worstfit"], "unknown policy worstfit"),
        (["--batch", "8", "--policies", "fgd"], "--batch"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    trace = write_synthetic(tmp_path / "trace")
    code = main(["trace", "--trace-dir", str(trace), "--out", str(tmp_path / "out"), "--no-progress", *args])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and "Traceback" not in err


def test_parse_seeds() -> None:
    assert parse_seeds("42-44,50") == [42, 43, 44, 50]
    with pytest.raises(InputError):
        parse_seeds("44-42")


def test_expected_loader_names_bad_row(tmp_path: Path) -> None:
    expected = _fake_expected(tmp_path / "expected")
    path = expected / ALLOCATION_FILE
    lines = path.read_text().splitlines()
    lines[2] = lines[2].replace(",42,", ",forty-two,", 1)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match="row 3"):
        load_expected(expected)
