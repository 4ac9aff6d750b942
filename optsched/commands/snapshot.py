"""``optsched snapshot``: save a live cluster's state in the snapshot file format.

Reads (never writes) Nodes, Pods that hold capacity, Namespaces, the node agents'
NodeGPUs and Kueue objects, and writes them as one ``v1 List`` that ``optsched plan
--snapshot`` replays, so a live decision can be reproduced and debugged offline.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from typing import Any

from optsched.commands.common import add_source_arguments, live_objects, say
from optsched.errors import InputError
from optsched.snapshot.documents import dump_objects
from optsched.snapshot.kubeyaml import dump_yaml


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "snapshot",
        help="save a live cluster's nodes, pods and Kueue objects to a snapshot file (read-only)",
        description="Read a live cluster through kubeconfig (GET requests only) and write the "
        "snapshot file format that 'optsched plan --snapshot' reads.",
    )
    parser.add_argument(
        "--out",
        required=True,
        metavar="FILE",
        help="snapshot file to write (.json for JSON, anything else YAML; - for stdout)",
    )
    add_source_arguments(parser, snapshot_flag=False)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    kubeconfig = args.kubeconfig if args.kubeconfig is not None else ""
    objects = live_objects(kubeconfig, args.namespace)
    counts = Counter(str(o.get("kind")) for o in objects)
    if args.out == "-":
        sys.stdout.write(dump_yaml({"apiVersion": "v1", "kind": "List", "items": objects}))
    else:
        try:
            dump_objects(objects, args.out)
        except OSError as exc:
            raise InputError(f"cannot write: {exc.strerror or exc}", source=args.out) from None
    summary = ", ".join(f"{n} {kind}" for kind, n in counts.items()) or "no objects"
    say(f"wrote {len(objects)} objects ({summary}) to {args.out}")
    return 0
