"""The ``optsched`` command line: ``plan``, ``snapshot``, ``agent``, ``run`` and ``bench``.

Exit codes are the same for every verb: 0 success (a plan that defers work is
a success), 2 a file that cannot be read at all, an unreachable cluster or a
wrong command line, 1 an internal error. These print one line naming the file,
object and field, never a traceback; an object that cannot be read is only a
warning (it is left out and the rest is planned). ``--debug`` shows the
traceback of an internal error.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence

import yaml

from optsched import __version__
from optsched.bench import cli as bench_cli
from optsched.commands import agent, plan, snapshot
from optsched.commands.common import PROG, say
from optsched.commands.run import register_run
from optsched.errors import InputError, PlanValidationError

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2


def _add_debug(parser: argparse.ArgumentParser, *, top: bool) -> None:
    # On sub-parsers the default is suppressed so "--debug plan" is not reset by "plan".
    parser.add_argument(
        "--debug",
        action="store_true",
        default=False if top else argparse.SUPPRESS,
        help="show the traceback of an internal error",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Joint placement of GPU gangs for Kubernetes and Kueue: plan, explain, compare.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    _add_debug(parser, top=True)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    plan.register(subparsers)
    snapshot.register(subparsers)
    agent.register(subparsers)
    register_run(subparsers)
    bench_cli.register(subparsers)
    for sub in subparsers.choices.values():
        _add_debug(sub, top=False)
    return parser


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit code (the console script exits with it)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse reports usage errors (2) and --help/--version (0) this way
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return int(func(args))
    except InputError as exc:
        say(f"error: {exc}")
        return EXIT_USAGE
    except yaml.YAMLError as exc:
        say(f"error: not valid YAML: {_first_line(exc)}")
        return EXIT_USAGE
    except PlanValidationError as exc:
        say("error: the plan failed validation, so nothing was output (this is a bug in the policy):")
        for violation in exc.violations:
            print(f"  - {violation}", file=sys.stderr)
        return EXIT_INTERNAL
    except KeyboardInterrupt:
        say("interrupted")
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:
        if args.debug:
            traceback.print_exc()
        say(f"internal error: {type(exc).__name__}: {_first_line(exc)} (run with --debug for the traceback)")
        return EXIT_INTERNAL
