"""Building the frozen :class:`~optsched.model.snapshot.Snapshot` from raw Kubernetes and Kueue objects.

Nodes, the usage of bound pods, pending Workloads and the Kueue queue objects
are parsed here, once; other kinds are ignored. ``load_snapshot`` reads a file
(:mod:`optsched.snapshot.documents`) and builds from it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from optsched.errors import InputError
from optsched.kueue.workload_status import Lifecycle
from optsched.model.names import DEFAULT_TOPOLOGY_LEVELS, KUEUE_GROUP
from optsched.model.snapshot import AssumedPod, Snapshot, Workload
from optsched.snapshot.admitted import read_admitted
from optsched.snapshot.dedupe import dedupe
from optsched.snapshot.documents import read_documents
from optsched.snapshot.fields import describe
from optsched.snapshot.held import held_pods
from optsched.snapshot.kueue_objects import (
    parse_cluster_queue,
    parse_local_queue,
    parse_resource_flavor,
    parse_topology,
    parse_workload,
    workload_state,
)
from optsched.snapshot.nodes import node_usage, parse_node
from optsched.snapshot.queue_state import with_admissibility
from optsched.snapshot.quota_usage import with_workload_usage

_T = TypeVar("_T")

KUEUE_KINDS = ("Workload", "ClusterQueue", "LocalQueue", "ResourceFlavor", "Topology", "AdmissionCheck")
READ_KINDS = frozenset({"Node", "Pod", *KUEUE_KINDS})


def _group(obj: dict[str, Any]) -> str:
    api_version = str(obj.get("apiVersion", ""))
    return api_version.split("/")[0] if "/" in api_version else ""


def snapshot_from_objects(
    objects: Iterable[dict[str, Any]],
    *,
    source: str = "",
    default_topology_levels: tuple[str, ...] = DEFAULT_TOPOLOGY_LEVELS,
    assumed: Iterable[AssumedPod] = (),
) -> Snapshot:
    """Build and validate the frozen snapshot from raw objects (other kinds are ignored).

    ``assumed`` pods hold capacity like bound pods: placements the controller
    made whose pods are not bound yet. Admitted Workloads in ``objects`` give
    the ClusterQueues' usage and hold the nodes of their pods not bound yet
    (except the workloads ``assumed`` already covers). Pending Workloads Kueue
    could not admit as their queues stand are held
    (:mod:`optsched.kueue.admissibility`). Every problem is an
    :class:`InputError` naming ``source`` and the object.
    """
    unique, duplicate_warnings = dedupe(objects, READ_KINDS)
    assumed = tuple(assumed)
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for obj in unique:
        kind = str(obj.get("kind"))
        if kind in KUEUE_KINDS and _group(obj) != KUEUE_GROUP:
            continue
        by_kind.setdefault(kind, []).append(obj)

    def each(kind: str, parse: Callable[[dict[str, Any]], _T]) -> list[_T]:
        out = []
        for obj in by_kind.get(kind, []):
            try:
                out.append(parse(obj))
            except InputError as exc:
                raise exc.located(source=source, obj=describe(obj)) from None
        return out

    parsed = each("Node", parse_node)
    nodes = [node for node, _ in parsed if node is not None]
    warnings = [*duplicate_warnings, *(warning for _, found in parsed for warning in found)]
    admitted, admitted_warnings = read_admitted(by_kind.get("Workload", []))
    by_name = {n.name: n for n in nodes}
    held, held_warnings = held_pods(
        admitted, by_kind.get("Pod", []), by_name, skip={a.workload for a in assumed}
    )
    try:
        usage, usage_warnings = node_usage(by_name, by_kind.get("Pod", []), (*assumed, *held))
    except InputError as exc:
        raise exc.located(source=source) from None
    pending = [w for w in each("Workload", _pending_workload) if w is not None]
    cluster_queues, quota_warnings = with_workload_usage(each("ClusterQueue", parse_cluster_queue), admitted)
    warnings += [*admitted_warnings, *held_warnings, *quota_warnings]
    snapshot = Snapshot(
        nodes=tuple(sorted(nodes, key=lambda n: n.name)),
        usage=usage,
        workloads=tuple(sorted(pending, key=lambda w: w.queue_key)),
        cluster_queues=tuple(cluster_queues),
        local_queues=tuple(each("LocalQueue", parse_local_queue)),
        flavors=tuple(each("ResourceFlavor", parse_resource_flavor)),
        topologies=tuple(each("Topology", parse_topology)),
        default_topology_levels=default_topology_levels,
        warnings=(*warnings, *usage_warnings),
        source=source,
    )
    return with_admissibility(snapshot, (obj for listed in by_kind.values() for obj in listed))


def _pending_workload(obj: dict[str, Any]) -> Workload | None:
    """The Workload if it still waits (not admitted, finished or inactive), else None."""
    return parse_workload(obj) if workload_state(obj) == Lifecycle.PENDING else None


def load_snapshot(
    path: str | Path, *, default_topology_levels: tuple[str, ...] = DEFAULT_TOPOLOGY_LEVELS
) -> Snapshot:
    """Read a snapshot file; every problem is an :class:`InputError` naming file, object and field."""
    return snapshot_from_objects(
        read_documents(path), source=str(path), default_topology_levels=default_topology_levels
    )
