"""Reading a cluster snapshot: kubectl ``List`` or multi-document YAML/JSON -> :class:`Snapshot`.

The same function serves a file on disk and the objects read from a live
cluster, so any live decision can be replayed offline from the file
``optsched snapshot`` writes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from optsched.errors import InputError
from optsched.ingest.fields import describe
from optsched.ingest.nodes import node_usage, parse_node
from optsched.kueue import KUEUE_GROUP
from optsched.kueue.objects import (
    parse_cluster_queue,
    parse_local_queue,
    parse_resource_flavor,
    parse_topology,
    parse_workload,
    workload_state,
)
from optsched.model import DEFAULT_TOPOLOGY_LEVELS, Node, Snapshot
from optsched.yamlio import dump_yaml

_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

KUEUE_KINDS = ("Workload", "ClusterQueue", "LocalQueue", "ResourceFlavor", "Topology", "AdmissionCheck")


def read_documents(path: str | Path) -> list[dict[str, Any]]:
    """All objects in a YAML/JSON file, with ``List`` items flattened."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("no such file", source=source) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read: {exc}", source=source) from None
    try:
        documents = list(yaml.load_all(text, Loader=_LOADER))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise InputError(f"not valid YAML or JSON{where}", source=source) from None
    objects: list[dict[str, Any]] = []
    for number, document in enumerate(documents):
        if document is None:
            continue
        if not isinstance(document, dict):
            raise InputError(
                f"document {number + 1} is not a Kubernetes object (expected a mapping with "
                "apiVersion and kind)",
                source=source,
            )
        objects.extend(flatten(document, source=source))
    if not objects:
        raise InputError("holds no Kubernetes objects", source=source)
    return objects


def flatten(document: dict[str, Any], *, source: str = "") -> list[dict[str, Any]]:
    kind = document.get("kind")
    if not isinstance(kind, str) or "apiVersion" not in document:
        raise InputError("object without apiVersion/kind", source=source, obj=describe(document))
    if kind == "List" or kind.endswith("List"):
        items = document.get("items") or []
        if not isinstance(items, list):
            raise InputError("items must be a list", source=source, obj=kind, field="items")
        out = []
        for item in items:
            if not isinstance(item, dict):
                raise InputError("every item must be an object", source=source, obj=kind, field="items")
            item = dict(item)
            if "kind" not in item and kind.endswith("List") and kind != "List":
                item["kind"] = kind[: -len("List")]
            item.setdefault("apiVersion", document.get("apiVersion", "v1"))
            out.extend(flatten(item, source=source))
        return out
    return [document]


def _group(obj: dict[str, Any]) -> str:
    api_version = str(obj.get("apiVersion", ""))
    return api_version.split("/")[0] if "/" in api_version else ""


def snapshot_from_objects(
    objects: Iterable[dict[str, Any]],
    *,
    source: str = "",
    default_topology_levels: tuple[str, ...] = DEFAULT_TOPOLOGY_LEVELS,
) -> Snapshot:
    """Build and validate the frozen snapshot from raw objects (other kinds are ignored)."""
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for obj in objects:
        kind = str(obj.get("kind"))
        if kind in KUEUE_KINDS and _group(obj) != KUEUE_GROUP:
            continue
        by_kind.setdefault(kind, []).append(obj)

    def each(kind: str, parse: Any) -> list[Any]:
        out = []
        for obj in by_kind.get(kind, []):
            try:
                out.append(parse(obj))
            except InputError as exc:
                raise exc.located(source=source, obj=describe(obj)) from None
        return out

    warnings: list[str] = []
    nodes: list[Node] = []
    for obj in by_kind.get("Node", []):
        try:
            node, node_warnings = parse_node(obj)
        except InputError as exc:
            raise exc.located(source=source, obj=describe(obj)) from None
        warnings.extend(node_warnings)
        if node is not None:
            nodes.append(node)
    try:
        usage, usage_warnings = node_usage({n.name: n for n in nodes}, by_kind.get("Pod", []))
    except InputError as exc:
        raise exc.located(source=source) from None
    warnings.extend(usage_warnings)
    pending = []
    for obj in by_kind.get("Workload", []):
        try:
            if workload_state(obj) == "pending":
                pending.append(parse_workload(obj))
        except InputError as exc:
            raise exc.located(source=source, obj=describe(obj)) from None
    pending.sort(key=lambda w: (-w.priority, w.created, w.key))
    return Snapshot(
        nodes=tuple(sorted(nodes, key=lambda n: n.name)),
        usage=usage,
        workloads=tuple(pending),
        cluster_queues=tuple(each("ClusterQueue", parse_cluster_queue)),
        local_queues=tuple(each("LocalQueue", parse_local_queue)),
        flavors=tuple(each("ResourceFlavor", parse_resource_flavor)),
        topologies=tuple(each("Topology", parse_topology)),
        default_topology_levels=default_topology_levels,
        warnings=tuple(warnings),
        source=source,
    )


def load_snapshot(
    path: str | Path, *, default_topology_levels: tuple[str, ...] = DEFAULT_TOPOLOGY_LEVELS
) -> Snapshot:
    """Read a snapshot file; every problem is an :class:`InputError` naming file, object and field."""
    return snapshot_from_objects(
        read_documents(path), source=str(path), default_topology_levels=default_topology_levels
    )


def impossible_requests(snapshot: Snapshot) -> list[str]:
    """PodSets whose single pod exceeds what any node has at all: bad input, not a deferral."""
    if not snapshot.nodes:
        return []
    max_gpus = max(len(n.healthy_gpus) for n in snapshot.nodes)
    max_cpu = max(n.cpu_milli for n in snapshot.nodes)
    max_mem = max(n.memory_mib for n in snapshot.nodes)
    problems = []
    for workload in snapshot.workloads:
        for number, pod_set in enumerate(workload.pod_sets):
            req = pod_set.request
            field = f"spec.podSets[{number}] ({pod_set.name})"
            if req.gpus > max_gpus:
                problems.append(
                    f"Workload {workload.key}: {field} asks for {req.gpus} GPUs per pod; "
                    f"the largest node has {max_gpus}"
                )
            if req.cpu_milli > max_cpu:
                problems.append(
                    f"Workload {workload.key}: {field} asks for {req.cpu_milli}m CPU per pod; "
                    f"the largest node has {max_cpu}m"
                )
            if req.memory_mib > max_mem:
                problems.append(
                    f"Workload {workload.key}: {field} asks for {req.memory_mib}Mi memory per pod; "
                    f"the largest node has {max_mem}Mi"
                )
    return problems


def dump_objects(objects: list[dict[str, Any]], path: str | Path) -> None:
    """Write objects as one ``v1 List`` (YAML, or JSON for a ``.json`` path)."""
    document = {"apiVersion": "v1", "kind": "List", "items": objects}
    target = Path(path)
    if target.suffix == ".json":
        target.write_text(json.dumps(document, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    else:
        target.write_text(dump_yaml(document), encoding="utf-8")
