"""What every verb shares: where the snapshot comes from, where output goes, how to talk on stderr.

Output (the plan, the snapshot) goes to stdout or ``--out``; everything meant
for the person at the terminal (what was read, warnings, where a file was
written) goes to stderr, so ``optsched plan --format json | jq`` stays clean.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

from optsched.errors import InputError
from optsched.model.snapshot import Snapshot
from optsched.snapshot.build import load_snapshot, snapshot_from_objects

EXAMPLE = "cluster-small.yaml"
PROG = "optsched"


def say(message: str, stream: TextIO | None = None) -> None:
    """One line for the person at the terminal, prefixed like every optsched message."""
    print(f"{PROG}: {message}", file=stream or sys.stderr)


def warn(message: str) -> None:
    say(f"warning: {message}")


def example_path() -> Path:
    """The bundled example snapshot: package data when installed, ``examples/`` in a checkout."""
    packaged = resources.files("optsched").joinpath("examples", EXAMPLE)
    if packaged.is_file():
        return Path(str(packaged))
    checkout = Path(__file__).resolve().parents[2] / "examples" / EXAMPLE
    if checkout.is_file():
        return checkout
    raise InputError(
        "the bundled example is missing from this installation; pass --snapshot FILE", source=EXAMPLE
    )


def add_source_arguments(parser: argparse.ArgumentParser, *, snapshot_flag: bool) -> None:
    """``--snapshot FILE`` or ``--kubeconfig PATH`` (never both) and ``--namespace``."""
    group = parser.add_mutually_exclusive_group()
    if snapshot_flag:
        group.add_argument(
            "--snapshot",
            metavar="FILE",
            help="snapshot file (kubectl List or multi-document YAML/JSON); "
            "default: the bundled example cluster",
        )
    group.add_argument(
        "--kubeconfig",
        metavar="PATH",
        nargs="?",
        const="",
        help="read a live cluster (read-only) through this kubeconfig; "
        "without PATH, the default kubeconfig ($KUBECONFIG or ~/.kube/config)",
    )
    parser.add_argument(
        "--namespace",
        "-n",
        action="append",
        default=[],
        metavar="NS",
        help="plan only the queue (Workloads, LocalQueues) of this namespace (repeatable); "
        "nodes, pods and cluster-scoped objects are always read whole",
    )


def add_admission_arguments(parser: argparse.ArgumentParser) -> None:
    """``--no-extended-resource-toleration``: plan without emulating that admission plugin."""
    parser.add_argument(
        "--no-extended-resource-toleration",
        dest="extended_resource_toleration",
        action="store_false",
        help="do not assume the API server runs the ExtendedResourceToleration admission plugin (by "
        "default a pod requesting nvidia.com/gpu, or any extended resource, tolerates NoSchedule "
        "taints with that key, as on GKE)",
    )


def live_objects(kubeconfig: str, namespaces: Sequence[str]) -> list[dict[str, Any]]:
    """Objects from a live cluster; notes about kinds the server lacks go to stderr."""
    from optsched.kube.reader import fetch_snapshot_objects  # deferred: only a live read loads the client

    objects, notes = fetch_snapshot_objects(kubeconfig or None, namespaces=namespaces)
    for note in notes:
        warn(note)
    return objects


def load_input(args: argparse.Namespace) -> Snapshot:
    """The snapshot the verb works on: a file, a live cluster, or the bundled example."""
    if getattr(args, "kubeconfig", None) is not None:
        objects = live_objects(args.kubeconfig, args.namespace)
        source = f"cluster via {args.kubeconfig or 'the default kubeconfig'}"
        return snapshot_from_objects(objects, source=source)
    path = args.snapshot
    if path is None:
        path = str(example_path())
        say(f"no --snapshot given: planning the bundled example {EXAMPLE}")
    snapshot = load_snapshot(path)
    if args.namespace:
        keep = set(args.namespace)
        snapshot = snapshot.model_copy(
            update={"workloads": tuple(w for w in snapshot.workloads if w.namespace in keep)}
        )
    return snapshot


def is_terminal(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def use_colour(stream: TextIO) -> bool:
    """Colour only for a person at a terminal, and never when NO_COLOR is set."""
    return is_terminal(stream) and not os.environ.get("NO_COLOR")


def write_output(text: str, out: str | None) -> None:
    """Write to ``--out`` (``-`` or none means stdout); a write failure is the user's path, exit 2."""
    if out in (None, "-"):
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    assert out is not None
    try:
        Path(out).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot write: {exc.strerror or exc}", source=out) from None
    say(f"wrote {out}")
