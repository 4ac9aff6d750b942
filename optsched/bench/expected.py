"""The FGD authors' published results (their artifact's cached tables), for side-by-side tables.

Each file has one row per (workload, policy, seed) and one column per arrival
percentage 0..130. ``analysis_allo_discrete.csv`` holds the allocated GPU
share; unallocated is 100 minus it.
"""

from __future__ import annotations

import csv
import statistics
from dataclasses import dataclass
from pathlib import Path

from optsched.errors import InputError

ALLOCATION_FILE = "analysis_allo_discrete.csv"
FRAGMENTATION_FILE = "analysis_frag_discrete.csv"
FRAG_RATE_FILE = "analysis_frag_ratio_discrete.csv"

AUTHOR_POLICIES = {
    "01-Random": "Random",
    "02-DotProd": "DotProd",
    "03-GpuClustering": "Clustering",
    "04-GpuPacking": "Packing",
    "05-BestFit": "BestFit",
    "06-FGD": "FGD",
}
"""The authors' policy ids and the labels their paper uses."""

OUR_TWIN = {
    "random": "01-Random",
    "dotprod": "02-DotProd",
    "gpupacking": "04-GpuPacking",
    "bestfit": "05-BestFit",
    "fgd": "06-FGD",
}
"""Our choosers that re-implement one of the authors' policies."""


@dataclass(frozen=True)
class Expected:
    """Per (workload, policy): one list of 131 values per seed."""

    values: dict[tuple[str, str], dict[int, list[float | None]]]

    def seeds(self, workload: str, policy: str) -> dict[int, list[float | None]]:
        return self.values.get((workload, policy), {})

    def workloads(self) -> list[str]:
        return sorted({w for w, _ in self.values})


def default_expected_dir(trace_dir: Path) -> Path:
    """The authors' result tables sit beside the trace folder in the shared data."""
    return trace_dir.parent / "fgd-atc23-expected-results"


def load_expected(directory: Path, file: str = ALLOCATION_FILE) -> Expected:
    """Read one of the authors' result tables; workloads are named as ours (``default``, ``cpu050``...)."""
    path = directory / file
    if not path.is_file():
        raise InputError("file not found (the FGD authors' expected results)", source=str(path))
    values: dict[tuple[str, str], dict[int, list[float | None]]] = {}
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        for row_no, row in enumerate(reader, start=2):
            try:
                workload = row["workload"].removeprefix("openb_pod_list_")
                policy = row["sc_policy"]
                seed = int(row["seed"])
                series = [_float(row.get(str(k))) for k in range(131)]
            except (KeyError, ValueError) as exc:
                raise InputError(f"bad value: {exc}", source=str(path), obj=f"row {row_no}") from None
            values.setdefault((workload, policy), {})[seed] = series
    return Expected(values)


def _float(raw: str | None) -> float | None:
    if raw is None or raw.strip() == "":
        return None
    return float(raw)


def mean_sd(values: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for a single value)."""
    if not values:
        return float("nan"), float("nan")
    if len(values) == 1:
        return values[0], 0.0
    return statistics.fmean(values), statistics.stdev(values)


def at(series_by_seed: dict[int, list[float | None]], k: int, *, complement: bool = False) -> list[float]:
    """The value at arrival ``k`` for every seed that has one (``100 - value`` with ``complement``)."""
    out = []
    for series in series_by_seed.values():
        value = series[k]
        if value is not None:
            out.append(100.0 - value if complement else value)
    return out
