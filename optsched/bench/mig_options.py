"""The arguments of ``optsched bench mig`` (kept light: the top-level parser loads it for ``--help``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from optsched.bench.options import DEFAULT_OUT

POOLS = {"a100": "A100-80GB", "h100": "H100-80GB"}
"""Pool names on the command line -> the MIG model of optsched's profile table."""

MIG_POLICIES = ("all-1g.10gb", "all-balanced", "all-3g.40gb", "bestfit", "firstfit", "optimizer")


def register_mig(p: argparse.ArgumentParser) -> None:
    """Add every ``bench mig`` option to ``p``."""
    p.add_argument(
        "--trace-dir",
        type=Path,
        default=None,
        help="folder with the openb CSVs; default ../shared/traces/alibaba-gpu-v2023 next to the repo",
    )
    p.add_argument("--workload", default="default", help="openb task file to draw from; default 'default'")
    p.add_argument(
        "--pools", default="a100,h100", help=f"comma-separated, from {', '.join(POOLS)}; default both"
    )
    p.add_argument("--nodes", type=int, default=4, help="eight-GPU nodes per pool; default 4 (32 GPUs)")
    p.add_argument("--windows", type=int, default=24, help="planning windows per run; default 24")
    p.add_argument(
        "--window-s", type=int, default=900, help="seconds of trace time per window; default 900 (15 minutes)"
    )
    p.add_argument(
        "--load",
        type=float,
        default=1.0,
        help="offered load: memory slices x lifetime over the pool's slices; default 1.0",
    )
    p.add_argument(
        "--whole-gpu",
        action="store_true",
        help="also let the trace's one-GPU whole tasks in, as 7g requests (default: fractional tasks only)",
    )
    p.add_argument("--seeds", default="1-10", help="seeds, e.g. 1-10 or 3; default 1-10")
    p.add_argument(
        "--policies",
        default=",".join(MIG_POLICIES),
        help=f"comma-separated, from {', '.join(MIG_POLICIES)}; default all",
    )
    p.add_argument(
        "--time-limit",
        type=float,
        default=1.0,
        help="optimizer budget per window in CP-SAT deterministic seconds, one worker; default 1",
    )
    p.add_argument(
        "--plan-time",
        action="store_true",
        help="also plan one snapshot of a --plan-time-gpus MIG pool with a queue, MIG planning on and off",
    )
    p.add_argument("--plan-time-gpus", type=int, default=1000, help="GPUs of that pool; default 1000")
    p.add_argument("--json", type=Path, default=None, help="write every run's figures as JSON to this file")
    p.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="folder of the PNG figures; default bench-results/"
    )
    p.add_argument("--no-plots", action="store_true", help="skip the PNG figures")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
