"""The trace loader turns bad CSV cells into clear errors naming file, row and column."""

from __future__ import annotations

from pathlib import Path

import pytest

from optsched.bench.trace_data import NODE_FILE, load_nodes, load_pods, pod_file
from optsched.errors import InputError
from tests.bench.conftest import write_synthetic


def _corrupt(path: Path, row: int, column: str, value: str) -> None:
    lines = path.read_text().splitlines()
    header = lines[0].split(",")
    cells = lines[row - 1].split(",")
    cells[header.index(column)] = value
    lines[row - 1] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n")


def test_loads_requests_and_gpu_spec(tmp_path: Path) -> None:
    trace = write_synthetic(tmp_path)
    pods = load_pods(trace, "default")
    assert len(pods) == 300 and len(load_nodes(trace)) == 60
    constrained = [p for p in pods if p.request.products]
    assert constrained and all(p.request.products == frozenset({"T4"}) for p in constrained)
    cpu_only = [p for p in pods if p.request.gpus == 0]
    assert cpu_only and all(not p.request.is_share for p in cpu_only)


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        ("cpu_milli", "lots", "not an integer"),
        ("num_gpu", "-1", "must be between"),
        ("gpu_milli", "", "missing"),
    ],
)
def test_malformed_pod_cell_names_file_row_and_column(
    tmp_path: Path, column: str, value: str, message: str
) -> None:
    trace = write_synthetic(tmp_path)
    path = trace / pod_file("default")
    _corrupt(path, 5, column, value)
    with pytest.raises(InputError) as caught:
        load_pods(trace, "default")
    text = str(caught.value)
    assert str(path) in text and "row 5" in text and column in text and message in text


def test_share_on_several_gpus_is_rejected(tmp_path: Path) -> None:
    trace = write_synthetic(tmp_path)
    path = trace / pod_file("default")
    _corrupt(path, 3, "num_gpu", "2")
    _corrupt(path, 3, "gpu_milli", "500")
    with pytest.raises(InputError, match=r"row 3.*gpu_milli"):
        load_pods(trace, "default")


def test_missing_column_and_missing_file(tmp_path: Path) -> None:
    trace = write_synthetic(tmp_path)
    node_path = trace / NODE_FILE
    node_path.write_text(node_path.read_text().replace("cpu_milli", "cpus", 1))
    with pytest.raises(InputError, match=r"missing column.*cpu_milli"):
        load_nodes(trace)
    with pytest.raises(InputError, match="file not found"):
        load_pods(trace, "gpushare40")
