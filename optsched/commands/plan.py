"""``optsched plan``: snapshot -> policy -> check_plan -> a view of the plan.

The same pipeline the controller runs, stopped before anything is applied:
it never writes to a cluster. A plan that fails ``check_plan`` is a bug and is
never printed; the violations go to stderr and the exit code is 1.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from typing import Any

from optsched.commands.common import (
    add_admission_arguments,
    add_source_arguments,
    is_terminal,
    load_input,
    use_colour,
    warn,
    write_output,
)
from optsched.commands.compare import run_compare
from optsched.errors import InputError
from optsched.model.plan import Plan
from optsched.model.snapshot import Snapshot
from optsched.render import FORMATS
from optsched.render.html import render_html
from optsched.render.json import render_json
from optsched.render.table import DEFAULT_WIDTH, render_table
from optsched.render.yaml import render_yaml
from optsched.settings import Settings

DEFAULT_POLICY = "optimizer"


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text}")
    return value


MAX_SEED = 2**31 - 1


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"must be in 0..{MAX_SEED}, got {text}")
    return value


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "plan",
        help="plan the pending queue of a snapshot or live cluster (dry run)",
        description="Plan which pending workloads to admit, on which nodes and GPUs, and why the "
        "rest waits. Reads a snapshot file or a live cluster (read-only); writes nothing to "
        "the cluster.",
    )
    add_source_arguments(parser, snapshot_flag=True)
    parser.add_argument(
        "--format", "-o", choices=FORMATS, default="table", help="output view (default: table)"
    )
    parser.add_argument("--out", metavar="PATH", help="write the output here instead of stdout")
    parser.add_argument(
        "--time-limit",
        type=_positive_seconds,
        metavar="SECONDS",
        help="solver search budget (default: the Settings default, 10); counted in CP-SAT's deterministic "
        "time unless --wall-clock is given",
    )
    parser.add_argument(
        "--policy",
        default=DEFAULT_POLICY,
        metavar="NAME",
        help="optimizer (default) or a baseline: firstfit, bestfit, fgd, tas, leastallocated",
    )
    parser.add_argument(
        "--explain",
        action="store_true",
        help="add every reason, excluded-node counts and the solver's stage objectives",
    )
    parser.add_argument(
        "--compare",
        action="store_true",
        help="run every policy on the same snapshot and print them side by side",
    )
    parser.add_argument(
        "--seed", type=_seed, metavar="N", help=f"solver random seed, 0..{MAX_SEED} (CP-SAT's is 32-bit)"
    )
    clock = parser.add_mutually_exclusive_group()
    clock.add_argument(
        "--deterministic",
        action="store_true",
        help="the default: count --time-limit in CP-SAT's deterministic time with one search worker, so "
        "the same snapshot gives the same plan on every run, however loaded the machine",
    )
    clock.add_argument(
        "--wall-clock",
        action="store_true",
        help="count --time-limit in wall-clock seconds on every core, as the controller does: faster "
        "on a quiet machine, but two runs may differ",
    )
    add_admission_arguments(parser)
    parser.set_defaults(func=run)


def settings_from(args: argparse.Namespace) -> Settings:
    values: dict[str, Any] = {}
    if args.time_limit is not None:
        values["time_limit_s"] = args.time_limit
    if args.seed is not None:
        values["random_seed"] = args.seed
    if not args.wall_clock:
        values.update(deterministic_time=True, workers=1)
    if not args.extended_resource_toleration:
        values["extended_resource_toleration"] = False
    return Settings(**values)


def check_input(snapshot: Snapshot) -> None:
    """Surface the snapshot's warnings (objects left out, values clamped) on stderr."""
    for message in snapshot.warnings:
        warn(message)


def render(fmt: str, snapshot: Snapshot, plan: Plan, *, explain: bool, colour: bool, width: int) -> str:
    if fmt == "json":
        return render_json(snapshot, plan)
    if fmt == "yaml":
        return render_yaml(snapshot, plan)
    if fmt == "html":
        return render_html(snapshot, plan)
    return render_table(snapshot, plan, explain=explain, color=colour, width=width)


def run(args: argparse.Namespace) -> int:
    # Deferred on purpose: planning imports OR-Tools, which takes about a second; --help stays instant.
    from optsched import planning

    if args.compare and args.format == "html":
        raise InputError("--compare prints table, json or yaml", field="--format")
    snapshot = load_input(args)
    check_input(snapshot)
    policies = planning.POLICIES
    if not args.compare and args.policy not in policies:
        raise InputError(
            f"unknown policy {args.policy!r}; choose one of: {', '.join(policies)}", field="--policy"
        )
    settings = settings_from(args)
    if args.compare:
        return run_compare(snapshot, settings, policies, fmt=args.format, out=args.out)
    plan = planning.plan(snapshot, settings, args.policy)
    to_terminal = args.out in (None, "-") and is_terminal(sys.stdout)
    colour = to_terminal and use_colour(sys.stdout)
    width = shutil.get_terminal_size().columns if to_terminal else DEFAULT_WIDTH
    text = render(args.format, snapshot, plan, explain=args.explain, colour=colour, width=width)
    write_output(text, args.out)
    return 0
