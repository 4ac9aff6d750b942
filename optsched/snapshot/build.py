"""Building the frozen :class:`~optsched.model.snapshot.Snapshot` from raw Kubernetes and Kueue objects.

Nodes, the usage of bound pods, pending Workloads, the Kueue queue objects and
the DRA objects (ResourceSlices, ResourceClaims, ResourceClaimTemplates:
:mod:`optsched.snapshot.dra_facts`) are parsed here, once; other kinds are
ignored. The same object twice (a
concatenated dump) is read once (:mod:`optsched.snapshot.dedupe`). An object
that cannot be read is left out with a warning
(:mod:`optsched.snapshot.reading`) and the rest is planned: a Node, Workload or
queue object simply goes missing, and a bound Pod that cannot be read takes
its node out of planning, since what it holds there is unknown.
``load_snapshot`` reads a file (:mod:`optsched.snapshot.documents`) and builds
from it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from optsched.kueue.unreadable_queues import hold_unreadable_queues
from optsched.kueue.workload_status import Lifecycle
from optsched.model.names import (
    DEFAULT_TOPOLOGY_LEVELS,
    GPU_TOPOLOGY_ANNOTATION,
    KUEUE_GROUP,
    NODE_GPUS_KIND,
    OPTSCHED_GROUP,
)
from optsched.model.snapshot import AssumedPod, Node, Snapshot, Workload
from optsched.snapshot.admitted import read_admitted
from optsched.snapshot.dedupe import dedupe
from optsched.snapshot.documents import read_documents
from optsched.snapshot.dra_facts import DRA_KINDS, DraFacts, read_dra, unsupported_dra_version
from optsched.snapshot.fields import describe, object_name, object_namespace
from optsched.snapshot.held import held_pods
from optsched.snapshot.kueue_objects import (
    parse_cluster_queue,
    parse_local_queue,
    parse_resource_flavor,
    parse_topology,
    parse_workload,
    workload_state,
)
from optsched.snapshot.node_gpus import NodeGpuFacts, read_node_gpus
from optsched.snapshot.nodes import parse_node
from optsched.snapshot.queue_state import with_admissibility
from optsched.snapshot.quota_usage import with_workload_usage
from optsched.snapshot.reading import KUEUE_KINDS, Reader, api_group, unsupported_version
from optsched.snapshot.usage import BoundPod, pod_node, pod_usage_request, usage_of

_T = TypeVar("_T")

READ_KINDS = frozenset({"Node", "Pod", "Namespace", NODE_GPUS_KIND, *KUEUE_KINDS, *DRA_KINDS})


def _by_kind(objects: Iterable[dict[str, Any]], reader: Reader) -> dict[str, list[dict[str, Any]]]:
    """Objects per kind; a Kueue kind or NodeGPUs of another group is not ours, other versions left out."""
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for obj in objects:
        kind = str(obj.get("kind"))
        if kind in KUEUE_KINDS or kind == NODE_GPUS_KIND:
            if api_group(obj) != (OPTSCHED_GROUP if kind == NODE_GPUS_KIND else KUEUE_GROUP):
                continue
            problem = unsupported_version(obj)
            if problem is not None:
                reader.leave_out(obj, f"{reader.source}: {describe(obj)}: {problem}")
                continue
        if kind in DRA_KINDS:
            problem = unsupported_dra_version(obj)
            if problem is not None:
                reader.leave_out(obj, f"{reader.source}: {describe(obj)}: {problem}")
                continue
        by_kind.setdefault(kind, []).append(obj)
    return by_kind


def _node_gpus(
    objects: list[dict[str, Any]], node_names: set[str], reader: Reader
) -> dict[str, NodeGpuFacts]:
    """The readable NodeGPUs by node; a malformed one is left out (its node reads its annotation instead)."""
    out: dict[str, NodeGpuFacts] = {}
    for obj in objects:
        name = object_name(obj)
        if name and name not in node_names:
            reader.notes.append(f"{describe(obj)}: no Node {name} in the input; ignored")
            continue
        unreadable = len(reader.left_out)
        facts = reader.read(obj, read_node_gpus)
        if len(reader.left_out) > unreadable:
            reader.notes.append(
                f"Node {name} falls back to its {GPU_TOPOLOGY_ANNOTATION} annotation (no NVLink without one)"
            )
        elif facts is not None:
            out[facts.node] = facts
            reader.notes.extend(facts.warnings)
    return out


def snapshot_from_objects(
    objects: Iterable[dict[str, Any]],
    *,
    source: str = "",
    default_topology_levels: tuple[str, ...] = DEFAULT_TOPOLOGY_LEVELS,
    assumed: Iterable[AssumedPod] = (),
    judge_admissibility: bool = True,
) -> Snapshot:
    """Build the frozen snapshot from raw objects (other kinds are ignored).

    ``assumed`` pods hold capacity like bound pods: placements the controller
    made whose pods are not bound yet. Admitted Workloads in ``objects`` give
    the ClusterQueues' usage and hold the nodes of their pods not bound yet
    (except the workloads ``assumed`` already covers). Pending Workloads Kueue
    could not admit as their queues stand are held
    (:mod:`optsched.kueue.admissibility`), unless ``judge_admissibility`` is
    off (the controller judges the queue it plans itself). Objects that cannot
    be read are left out, each with a warning naming ``source``, the object and
    the field.
    """
    unique, duplicate_warnings = dedupe(objects, READ_KINDS)
    assumed = tuple(assumed)
    reader = Reader(source)
    by_kind = _by_kind(unique, reader)

    def each(kind: str, parse: Callable[[dict[str, Any]], _T | None]) -> list[_T]:
        read = (reader.read(obj, parse) for obj in by_kind.get(kind, []))
        return [value for value in read if value is not None]

    raw_nodes = by_kind.get("Node", [])
    gpus = _node_gpus(by_kind.get(NODE_GPUS_KIND, []), {object_name(o) for o in raw_nodes}, reader)
    dra = read_dra(by_kind, reader)
    parsed = each("Node", lambda obj: parse_node(obj, gpus, dra.nodes))
    warnings = [*duplicate_warnings, *(warning for _, found in parsed for warning in found)]
    nodes = {node.name: node for node, _ in parsed if node is not None}
    pods = _readable_pods(by_kind.get("Pod", []), nodes, reader, gpus)
    admitted, admitted_warnings = read_admitted(by_kind.get("Workload", []), dra.templates)
    skip = {a.workload for a in assumed}
    held, held_warnings = held_pods(admitted, [p.obj for p in pods], nodes, skip=skip)
    usage, usage_warnings = usage_of(nodes, pods, (*assumed, *held), dra.claimed(nodes))
    pending = each("Workload", lambda obj: _pending_workload(obj, dra))
    cluster_queues, quota_warnings = with_workload_usage(each("ClusterQueue", parse_cluster_queue), admitted)
    warnings += [*admitted_warnings, *held_warnings, *quota_warnings, *usage_warnings]
    snapshot = Snapshot(
        nodes=tuple(sorted(nodes.values(), key=lambda n: n.name)),
        usage=usage,
        workloads=tuple(sorted(pending, key=lambda w: w.queue_key)),
        cluster_queues=tuple(cluster_queues),
        local_queues=tuple(each("LocalQueue", parse_local_queue)),
        flavors=tuple(each("ResourceFlavor", parse_resource_flavor)),
        topologies=tuple(each("Topology", parse_topology)),
        default_topology_levels=default_topology_levels,
        warnings=(*reader.warnings, *warnings),
        left_out=tuple(reader.left_out),
        source=source,
    )
    return _judged(snapshot, by_kind) if judge_admissibility else snapshot


def _judged(snapshot: Snapshot, by_kind: dict[str, list[dict[str, Any]]]) -> Snapshot:
    """Pending Workloads of unreadable queues, then those Kueue could not admit, moved to ``held``."""
    readable_queues = hold_unreadable_queues(snapshot)
    return with_admissibility(readable_queues, (obj for listed in by_kind.values() for obj in listed))


def _readable_pods(
    pods: list[dict[str, Any]], nodes: dict[str, Node], reader: Reader, gpus: dict[str, NodeGpuFacts]
) -> list[BoundPod]:
    """Bound pods whose usage can be read; a node with one that cannot be read leaves planning.

    Leaving the pod out alone would count its node as emptier than it is, so
    the node goes with it (the warning names both). Each pod carries the
    devices its node's NodeGPUs says it really holds (none on a HAMi node,
    whose own records say that).
    """
    readable = []
    for pod in pods:
        node_name = pod_node(pod)
        if node_name is None or node_name not in nodes:
            continue
        request = reader.read(pod, pod_usage_request)
        if request is None:
            del nodes[node_name]
            reader.notes.append(f"Node {node_name} is left out of planning: a pod bound to it cannot be read")
            continue
        facts = None if nodes[node_name].hami else gpus.get(node_name)
        held = facts.held_by(object_namespace(pod), object_name(pod)) if facts is not None else None
        readable.append(BoundPod(pod, node_name, request, held))
    return readable


def _pending_workload(obj: dict[str, Any], dra: DraFacts) -> Workload | None:
    """The Workload if it still waits (not admitted, finished or inactive), else None."""
    return parse_workload(obj, dra.templates) if workload_state(obj) == Lifecycle.PENDING else None


def load_snapshot(
    path: str | Path, *, default_topology_levels: tuple[str, ...] = DEFAULT_TOPOLOGY_LEVELS
) -> Snapshot:
    """Read a snapshot file; a file that cannot be read at all is an :class:`InputError` naming it."""
    notes: list[str] = []
    objects = read_documents(path, warnings=notes)
    snapshot = snapshot_from_objects(
        objects, source=str(path), default_topology_levels=default_topology_levels
    )
    return snapshot.model_copy(update={"warnings": (*notes, *snapshot.warnings)}) if notes else snapshot
