"""Command-line values the benchmark verbs share: seed lists, policy lists, the results folder.

Each verb reads its options here, so a bad value gets the same one-line
message (naming the option) whichever verb or entry point it came through;
``bench scale`` takes the same arguments as ``python -m optsched.bench.scale``.
This module stays light: the top-level ``optsched`` parser loads it to build
``--help``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from optsched.errors import InputError

TRACE_POLICIES = (
    "fgd",
    "bestfit",
    "firstfit",
    "leastallocated",
    "random",
    "gpupacking",
    "dotprod",
    "optimizer",
)
"""Policies ``bench trace`` can replay: the online choosers and the batch-window optimizer."""

TOPOLOGY_POLICIES = ("optimizer", "tas", "bestfit", "fgd", "leastallocated", "firstfit")
"""Policies ``bench topology`` can simulate (each one a ``planning.plan`` policy)."""

SCALE_QUEUES = ("contended", "classic")
"""Instances ``bench scale`` can generate (see :mod:`optsched.bench.scale_cluster`)."""

DEFAULT_OUT = Path("bench-results")


def parse_seeds(text: str) -> list[int]:
    """``42-51``, ``42,45`` or ``42``."""
    seeds: list[int] = []
    try:
        for part in text.split(","):
            part = part.strip()
            if not part:
                continue
            if "-" in part:
                lo, hi = (int(x) for x in part.split("-", 1))
                if hi < lo:
                    raise ValueError(part)
                seeds.extend(range(lo, hi + 1))
            else:
                seeds.append(int(part))
    except ValueError:
        raise InputError(f"{text!r} is not a seed list like 42-51 or 42,43", field="--seeds") from None
    if not seeds:
        raise InputError("no seeds given", field="--seeds")
    return seeds


def parse_policies(text: str, allowed: Sequence[str]) -> list[str]:
    """A comma-separated policy list, lower-cased; an unknown or empty list is an input error."""
    names = [p.strip().lower() for p in text.split(",") if p.strip()]
    unknown = [p for p in names if p not in allowed]
    if unknown or not names:
        raise InputError(
            f"unknown policy {', '.join(unknown) or '(none)'}; choose from {', '.join(allowed)}",
            field="--policies",
        )
    return names


SCALE_POLICIES = ("optimizer", "bestfit", "fgd", "tas", "leastallocated")
"""The policies ``bench scale`` compares by default: the optimizer and the greedy policies peers use."""


def register_scale(subparser: argparse.ArgumentParser) -> None:
    """Arguments of ``optsched bench scale``, also read by ``python -m optsched.bench.scale``."""
    subparser.add_argument("--nodes", type=int, default=1000, help="GPU nodes; default 1000")
    subparser.add_argument("--workloads", type=int, default=1000, help="pending workloads; default 1000")
    subparser.add_argument(
        "--queue",
        choices=SCALE_QUEUES,
        default="contended",
        help="contended: a live-looking cluster whose queue asks 1.2-1.5x the free GPUs (default); "
        "classic: the mostly idle cluster and simple queue of earlier releases",
    )
    subparser.add_argument(
        "--seeds",
        "--seed",
        dest="seeds",
        default="1",
        help="seeds of the generated instance, e.g. 1-10 or 1,4; default 1",
    )
    subparser.add_argument(
        "--time-limit", type=float, default=5.0, help="optimizer time limit in s; default 5"
    )
    subparser.add_argument(
        "--workers", type=int, default=None, help="CP-SAT workers; default all cores (1 with --deterministic)"
    )
    subparser.add_argument(
        "--deterministic",
        action="store_true",
        help="count --time-limit in CP-SAT deterministic seconds on one worker: the same figures under load",
    )
    subparser.add_argument(
        "--policies",
        default=",".join(SCALE_POLICIES),
        help=f"comma-separated policies to compare; default {','.join(SCALE_POLICIES)}",
    )
    subparser.add_argument("--json", type=Path, default=None, help="write the figures as JSON to this file")
    subparser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="folder of the PNG figure; default bench-results/"
    )
    subparser.add_argument("--no-plots", action="store_true", help="skip the PNG figure")
    subparser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
