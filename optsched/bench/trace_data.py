"""Loading the Alibaba openb GPU trace (the FGD paper's data) from its CSV files.

The CSVs are plain tables; a malformed cell must be reported as file, row and
column so a person can fix it, never as a traceback from deep in the replay.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from optsched.capacity.fragmentation import ProductRequest
from optsched.capacity.state import NodeState
from optsched.errors import InputError
from optsched.model.snapshot import FULL_GPU_MILLI, Node

NODE_FILE = "openb_node_list_gpu_node.csv"
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
WORKLOADS = (
    "default",
    "cpu050",
    "cpu100",
    "cpu200",
    "cpu250",
    "gpushare40",
    "gpushare60",
    "gpushare80",
    "gpushare100",
    "gpuspec10",
    "gpuspec20",
    "gpuspec25",
    "gpuspec33",
    "multigpu20",
    "multigpu30",
    "multigpu40",
    "multigpu50",
)
"""The workloads of the FGD paper's evaluation (the authors' results cover exactly these)."""


@dataclass(frozen=True)
class TracePod:
    """One task of the trace: its name and request (GPU model constraint included)."""

    name: str
    request: ProductRequest


def pod_file(workload: str) -> str:
    """The task file of one workload, as the trace names it."""
    return f"openb_pod_list_{workload}.csv"


def _int(path: Path, row: int, column: str, raw: str | None, *, low: int = 0, high: int | None = None) -> int:
    if raw is None or raw.strip() == "":
        raise InputError("missing value", source=str(path), obj=f"row {row}", field=column)
    try:
        value = int(raw.strip())
    except ValueError:
        raise InputError(
            f"{raw!r} is not an integer", source=str(path), obj=f"row {row}", field=column
        ) from None
    if value < low or (high is not None and value > high):
        bounds = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise InputError(f"{value} must be {bounds}", source=str(path), obj=f"row {row}", field=column)
    return value


def _rows(path: Path, required: tuple[str, ...]) -> list[tuple[int, dict[str, str | None]]]:
    if not path.is_file():
        raise InputError("file not found", source=str(path))
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        header = reader.fieldnames or []
        missing = [c for c in required if c not in header]
        if missing:
            raise InputError(
                f"missing column(s) {', '.join(missing)}; header is {','.join(header) or '(empty)'}",
                source=str(path),
                obj="row 1",
            )
        # Data rows are numbered as a spreadsheet shows them: the header is row 1.
        return [(index, dict(row)) for index, row in enumerate(reader, start=2)]


def load_nodes(trace_dir: Path) -> list[NodeState]:
    """The GPU nodes of the trace as free-capacity states, in file order."""
    path = trace_dir / NODE_FILE
    nodes: list[NodeState] = []
    for row_no, row in _rows(path, NODE_COLUMNS):
        name = (row.get("sn") or "").strip()
        if not name:
            raise InputError("missing value", source=str(path), obj=f"row {row_no}", field="sn")
        cpu = _int(path, row_no, "cpu_milli", row.get("cpu_milli"), low=1)
        mem = _int(path, row_no, "memory_mib", row.get("memory_mib"), low=1)
        gpus = _int(path, row_no, "gpu", row.get("gpu"), low=0, high=64)
        model = (row.get("model") or "").strip()
        node = Node(
            name=name, cpu_milli=cpu, memory_mib=mem, max_pods=1_000, gpu_count=gpus, gpu_product=model
        )
        nodes.append(NodeState.from_node(node))
    if not nodes:
        raise InputError("no nodes", source=str(path))
    return nodes


def load_pods(trace_dir: Path, workload: str) -> list[TracePod]:
    """The tasks of one workload file, in file order."""
    path = trace_dir / pod_file(workload)
    pods: list[TracePod] = []
    for row_no, row in _rows(path, POD_COLUMNS):
        name = (row.get("name") or "").strip() or f"row-{row_no}"
        cpu = _int(path, row_no, "cpu_milli", row.get("cpu_milli"))
        mem = _int(path, row_no, "memory_mib", row.get("memory_mib"))
        gpus = _int(path, row_no, "num_gpu", row.get("num_gpu"), high=64)
        milli = _int(path, row_no, "gpu_milli", row.get("gpu_milli"), high=FULL_GPU_MILLI)
        if gpus > 0 and milli == 0:
            raise InputError(
                f"num_gpu is {gpus} but gpu_milli is 0",
                source=str(path),
                obj=f"row {row_no}",
                field="gpu_milli",
            )
        if gpus > 1 and milli < FULL_GPU_MILLI:
            raise InputError(
                f"a share below 1000 milli needs num_gpu 1, not {gpus}",
                source=str(path),
                obj=f"row {row_no}",
                field="gpu_milli",
            )
        spec = (row.get("gpu_spec") or "").strip()
        products = frozenset(p for p in spec.split("|") if p) if gpus else frozenset()
        request = ProductRequest(
            cpu_milli=cpu,
            memory_mib=mem,
            gpus=gpus,
            gpu_milli=milli if gpus else FULL_GPU_MILLI,
            products=products,
        )
        pods.append(TracePod(name=name, request=request))
    if not pods:
        raise InputError("no pods", source=str(path))
    return pods
