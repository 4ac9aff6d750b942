"""One object per identity: dumps that were concatenated hold some objects twice.

The identity is the API group, kind, namespace and name. Of several copies,
the one with the newer ``metadata.resourceVersion`` is kept (compared as
integers where both are, as the API server issues them; otherwise the later
one in the input wins), at the place of the first copy, with a warning naming
the object. Without this a duplicate Node doubles capacity, a duplicate Pod
doubles usage and a duplicate Workload is planned twice.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

Identity = tuple[str, str, str, str]
"""(API group, kind, namespace, name)."""

_LISTED = 5
"""A kind with more duplicates than this gets one warning listing the first few."""

CLUSTER_SCOPED = frozenset(
    {"Node", "NodeGPUs", "ClusterQueue", "ResourceFlavor", "Topology", "AdmissionCheck"}
)
"""Kinds read without a namespace (a stray one on them is ignored, as the API server does)."""


def _identity(obj: dict[str, Any]) -> Identity | None:
    """(group, kind, namespace, name); None for an object without a usable name."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        return None
    kind = str(obj.get("kind", ""))
    api_version = str(obj.get("apiVersion", ""))
    group = api_version.split("/")[0] if "/" in api_version else ""
    namespace = "" if kind in CLUSTER_SCOPED else str(meta.get("namespace") or "default")
    return group, kind, namespace, meta["name"]


def _version(obj: dict[str, Any]) -> int | None:
    raw = obj["metadata"].get("resourceVersion")
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    return int(raw) if isinstance(raw, str) and raw.isascii() and raw.isdigit() else None


def dedupe(
    objects: Iterable[dict[str, Any]], kinds: Collection[str]
) -> tuple[list[dict[str, Any]], list[str]]:
    """The objects with each identity of ``kinds`` once, and a warning per kind that had copies."""
    out: list[dict[str, Any]] = []
    slot: dict[Identity, int] = {}
    copies: dict[Identity, int] = {}
    # Whether every copy so far had an integer resourceVersion (then the newest is kept).
    by_version: dict[Identity, bool] = {}
    for obj in objects:
        kind = obj.get("kind") if isinstance(obj, dict) else None
        identity = _identity(obj) if isinstance(kind, str) and kind in kinds else None
        if identity is None:
            out.append(obj)
            continue
        if identity not in slot:
            slot[identity] = len(out)
            out.append(obj)
            by_version[identity] = _version(obj) is not None
            continue
        copies[identity] = copies.get(identity, 1) + 1
        ours, theirs = _version(obj), _version(out[slot[identity]])
        by_version[identity] = by_version[identity] and ours is not None
        if ours is None or theirs is None or ours >= theirs:
            out[slot[identity]] = obj
    kept = {identity: (n, out[slot[identity]], by_version[identity]) for identity, n in copies.items()}
    return out, _warnings(kept)


def _name(identity: Identity) -> str:
    _, _, namespace, name = identity
    return f"{namespace}/{name}" if namespace else name


def _warnings(kept: dict[Identity, tuple[int, dict[str, Any], bool]]) -> list[str]:
    """One warning per object; a kind with many duplicates gets one warning naming them."""
    by_kind: dict[str, list[Identity]] = {}
    for identity in kept:
        by_kind.setdefault(identity[1], []).append(identity)
    out = []
    for kind, identities in by_kind.items():
        if len(identities) > _LISTED:
            names = ", ".join(_name(i) for i in identities[:_LISTED])
            out.append(
                f"{len(identities)} {kind} objects appear more than once in the input ({names} and "
                f"{len(identities) - _LISTED} more); kept the newest copy of each (by resourceVersion, "
                "else the last one in the input) and ignored the others"
            )
            continue
        for identity in identities:
            copies, obj, newest = kept[identity]
            if newest:
                which = f"the newest (resourceVersion {_version(obj)})"
            else:
                which = "the last one in the input (resourceVersions not all comparable)"
            out.append(
                f"{kind} {_name(identity)} appears {copies} times in the input; "
                f"kept {which} and ignored the other copies"
            )
    return out
