"""A small trace in the openb CSV schema: synthetic, or a slice of the real trace when it is present."""

from __future__ import annotations

import csv
import random
from pathlib import Path

import pytest

from optsched.bench.trace import default_trace_dir
from optsched.bench.trace_data import NODE_FILE, pod_file

POD_HEADER = [
    "name",
    "cpu_milli",
    "memory_mib",
    "num_gpu",
    "gpu_milli",
    "gpu_spec",
    "qos",
    "pod_phase",
    "creation_time",
    "deletion_time",
    "scheduled_time",
]


def write_synthetic(directory: Path, *, nodes: int = 60, pods: int = 300, seed: int = 0) -> Path:
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / NODE_FILE).open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["sn", "cpu_milli", "memory_mib", "gpu", "model"])
        for i in range(nodes):
            if i % 3 == 0:
                writer.writerow([f"node-{i:03d}", 104_000, 524_288, 2, "T4"])
            else:
                writer.writerow([f"node-{i:03d}", 96_000, 393_216, 8, "G2"])
    with (directory / pod_file("default")).open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(POD_HEADER)
        for i in range(pods):
            kind = rng.random()
            spec = ""
            if kind < 0.12:
                gpus, milli = 0, 0
            elif kind < 0.45:
                gpus, milli = 1, rng.choice([230, 320, 470, 650, 810])
            elif kind < 0.92:
                gpus, milli = 1, 1000
                spec = "T4" if rng.random() < 0.15 else ""
            else:
                gpus, milli = rng.choice([2, 4, 8]), 1000
            cpu = rng.choice([3_152, 4_000, 8_000, 11_300, 12_000])
            mem = rng.choice([8_192, 16_384, 32_768])
            writer.writerow([f"pod-{i:04d}", cpu, mem, gpus, milli, spec, "LS", "Running", 0, "", 0])
    return directory


def write_real_slice(directory: Path, source: Path, *, nodes: int = 60, pods: int = 300) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, keep in ((NODE_FILE, nodes), (pod_file("default"), pods)):
        lines = (source / name).read_text().splitlines()[: keep + 1]
        (directory / name).write_text("\n".join(lines) + "\n")
    return directory


@pytest.fixture(params=["synthetic", "real"])
def trace_dir(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A few hundred tasks on a few dozen nodes, in the trace's own CSV schema."""
    if request.param == "synthetic":
        return write_synthetic(tmp_path / "trace")
    source = default_trace_dir()
    if not (source / NODE_FILE).is_file():
        pytest.skip(f"the Alibaba trace is not at {source}")
    return write_real_slice(tmp_path / "trace", source)
