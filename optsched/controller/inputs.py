"""From the raw objects of one cluster read to the Snapshot the planner sees.

Three jobs, all pure:

* drop malformed objects one by one (reported, never aborting the cycle), so
  one bad Node or Workload cannot stop the rest of the queue from admitting;
* keep only the workloads optsched decides: those of ClusterQueues that
  require our admission check and whose check is not already decided;
* add the *assumed* usage of workloads we admitted whose pods are not bound
  yet, as synthetic bound pods, so the next cycle does not hand the same GPUs
  out twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from optsched.controller.records import PlacementRecord, RecordError, record_of
from optsched.errors import InputError
from optsched.kueue import workload_status as ks
from optsched.model.names import (
    COMPLETION_INDEX_LABEL,
    DEFAULT_TOPOLOGY_LEVELS,
    GPUS_ANNOTATION,
    KUEUE_PODSET_LABEL,
    KUEUE_PREFERRED_TOPOLOGY_ANNOTATION,
    KUEUE_REQUIRED_TOPOLOGY_ANNOTATION,
    OPTSCHED_PREFERRED_TOPOLOGY_ANNOTATION,
    OPTSCHED_REQUIRED_TOPOLOGY_ANNOTATION,
    PLAN_ID_LABEL,
    POD_INDEX_ANNOTATION,
    PODSET_LABEL,
)
from optsched.model.snapshot import Snapshot
from optsched.snapshot.build import snapshot_from_objects
from optsched.snapshot.kueue_objects import (
    parse_cluster_queue,
    parse_local_queue,
    parse_resource_flavor,
    parse_topology,
    parse_workload,
)
from optsched.snapshot.nodes import parse_node
from optsched.snapshot.pods import pod_request


@dataclass(frozen=True)
class Report:
    """A problem with one object: logged, and published as a Kubernetes Event on it."""

    kind: str
    namespace: str
    name: str
    uid: str
    api_version: str
    reason: str
    message: str


def report_for(obj: Mapping[str, Any], reason: str, message: str) -> Report:
    m = ks.meta(obj)
    return Report(
        kind=str(obj.get("kind", "")),
        namespace=str(m.get("namespace") or ""),
        name=str(m.get("name", "")),
        uid=str(m.get("uid", "")),
        api_version=str(obj.get("apiVersion", "")),
        reason=reason,
        message=message,
    )


def _check_workload(obj: dict[str, Any]) -> None:
    parse_workload(obj)
    record_of(obj)


_PARSERS: dict[str, Any] = {
    "Workload": _check_workload,
    "ClusterQueue": parse_cluster_queue,
    "LocalQueue": parse_local_queue,
    "ResourceFlavor": parse_resource_flavor,
    "Topology": parse_topology,
    "Pod": lambda obj: pod_request((obj.get("spec") or {}), obj=obj, field="spec"),
}


def sanitize(objects: Iterable[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[Report]]:
    """Objects that parse, and a report for each one that does not (dropped)."""
    good: list[dict[str, Any]] = []
    reports: list[Report] = []
    for obj in objects:
        kind = str(obj.get("kind", ""))
        try:
            if kind == "Node":
                node, warnings = parse_node(obj)
                if node is None:
                    reports.append(report_for(obj, "InvalidNode", "; ".join(warnings)))
                    continue
            elif kind in _PARSERS:
                _PARSERS[kind](obj)
        except (InputError, RecordError) as exc:
            reports.append(report_for(obj, f"Invalid{kind}", str(exc)))
            continue
        except (TypeError, AttributeError, ValueError) as exc:
            reports.append(report_for(obj, f"Invalid{kind}", f"{ks.key_of(obj)}: unreadable ({exc})"))
            continue
        good.append(obj)
    return good, reports


def _pod_index(pod: Mapping[str, Any]) -> int | None:
    m = ks.meta(pod)
    for source in (m.get("annotations") or {}, m.get("labels") or {}):
        for key in (POD_INDEX_ANNOTATION,):
            raw = source.get(key)
            if isinstance(raw, str) and raw.isdigit():
                return int(raw)
    return None


def pod_set_of(pod: Mapping[str, Any]) -> str | None:
    labels = ks.meta(pod).get("labels") or {}
    value = labels.get(PODSET_LABEL) or labels.get(KUEUE_PODSET_LABEL)
    return str(value) if value else None


def completion_index(pod: Mapping[str, Any]) -> int | None:
    m = ks.meta(pod)
    for source in (m.get("labels") or {}, m.get("annotations") or {}):
        raw = source.get(COMPLETION_INDEX_LABEL)
        if isinstance(raw, str) and raw.isdigit():
            return int(raw)
    return None


def _is_bound(pod: Mapping[str, Any]) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return bool((pod.get("spec") or {}).get("nodeName")) and phase not in ("Succeeded", "Failed")


def pods_by_plan(pods: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    out: dict[str, list[Mapping[str, Any]]] = {}
    for pod in pods:
        plan_id = (ks.meta(pod).get("labels") or {}).get(PLAN_ID_LABEL)
        if plan_id:
            out.setdefault(str(plan_id), []).append(pod)
    return out


def assumed_pods(
    workload: Mapping[str, Any], record: PlacementRecord, pods: Iterable[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Synthetic bound pods for the planned slots no bound pod occupies yet.

    A slot counts as taken by a real pod when a bound pod of the same plan
    carries its index (``optsched.io/pod-index``); bound pods of the plan
    without an index (pinned by someone else) each release one slot, so
    capacity is never counted twice.
    """
    templates = ks.pod_set_templates(workload)
    m = ks.meta(workload)
    bound = [p for p in pods if _is_bound(p)]
    out: list[dict[str, Any]] = []
    for pod_set, slots in record.pod_sets.items():
        mine = [p for p in bound if pod_set_of(p) in (pod_set, None)]
        taken = {_pod_index(p) for p in mine} - {None}
        anonymous = sum(1 for p in mine if _pod_index(p) is None)
        free_slots = [s for s in slots if s.index not in taken]
        if anonymous:
            free_slots = free_slots[: max(0, len(free_slots) - anonymous)]
        spec = dict((templates.get(pod_set) or {}).get("spec") or {})
        for slot in free_slots:
            annotations = {GPUS_ANNOTATION: ",".join(str(g) for g in slot.gpus)} if slot.gpus else {}
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"{m.get('name')}-assumed-{pod_set}-{slot.index}",
                        "namespace": m.get("namespace", "default"),
                        "annotations": annotations,
                    },
                    "spec": {
                        "nodeName": slot.node,
                        "containers": spec.get("containers") or [],
                        "initContainers": spec.get("initContainers") or [],
                        "overhead": spec.get("overhead") or {},
                    },
                    "status": {"phase": "Pending"},
                }
            )
    return out


_TOPOLOGY_ALIASES = (
    (OPTSCHED_REQUIRED_TOPOLOGY_ANNOTATION, KUEUE_REQUIRED_TOPOLOGY_ANNOTATION),
    (OPTSCHED_PREFERRED_TOPOLOGY_ANNOTATION, KUEUE_PREFERRED_TOPOLOGY_ANNOTATION),
)


def with_topology_aliases(workload: dict[str, Any]) -> dict[str, Any]:
    """A copy whose PodSet templates state our topology annotations in Kueue's words.

    The planner reads Kueue's TAS annotations; on an optsched queue users write
    ``optsched.io/required-topology`` instead (Kueue's would make Kueue insist on
    a TAS flavor). The cluster object is never changed.
    """
    pod_sets = (workload.get("spec") or {}).get("podSets")
    if not isinstance(pod_sets, list):
        return workload
    changed = False
    new_sets = []
    for raw in pod_sets:
        template = raw.get("template") if isinstance(raw, dict) else None
        annotations = ((template or {}).get("metadata") or {}).get("annotations")
        if isinstance(annotations, dict) and any(ours in annotations for ours, _ in _TOPOLOGY_ALIASES):
            merged = dict(annotations)
            for ours, kueue in _TOPOLOGY_ALIASES:
                if ours in merged:
                    merged.setdefault(kueue, merged[ours])
            assert template is not None
            raw = {
                **raw,
                "template": {**template, "metadata": {**template["metadata"], "annotations": merged}},
            }
            changed = True
        new_sets.append(raw)
    if not changed:
        return workload
    return {**workload, "spec": {**workload["spec"], "podSets": new_sets}}


@dataclass
class PlanningInput:
    """What one cycle plans on, and what it needs to act afterwards."""

    snapshot: Snapshot
    workloads: dict[str, dict[str, Any]]
    """Every readable Workload by ``namespace/name`` (the raw objects actions are computed from)."""
    pods: list[dict[str, Any]]
    records: dict[str, PlacementRecord]
    """Workload key -> placement record, for workloads that carry one."""
    managed_queues: set[str]
    reports: list[Report]
    assumed: int = 0
    """Pods counted as assumed usage."""


def build_input(
    objects: Iterable[dict[str, Any]],
    check_names: Iterable[str],
    *,
    default_topology_levels: tuple[str, ...] = DEFAULT_TOPOLOGY_LEVELS,
    source: str = "cluster",
) -> PlanningInput:
    """Clean the raw objects, select our workloads, add assumed usage, build the snapshot."""
    names = frozenset(check_names)
    good, reports = sanitize(objects)
    managed = ks.cluster_queues_with_checks(good, names)
    local_queues = ks.local_queue_index(good)
    pods = [o for o in good if o.get("kind") == "Pod"]
    by_plan = pods_by_plan(pods)
    workloads: dict[str, dict[str, Any]] = {}
    records: dict[str, PlacementRecord] = {}
    planned: list[dict[str, Any]] = []
    assumed: list[dict[str, Any]] = []
    for obj in good:
        if obj.get("kind") != "Workload":
            planned.append(obj)
            continue
        key = ks.key_of(obj)
        workloads[key] = obj
        record = record_of(obj)
        if record is not None:
            records[key] = record
        entry = ks.check_entry(obj, names)
        if ks.is_finished(obj) or not ks.is_active(obj):
            continue
        if entry is not None and entry.state == "Ready" and record is not None:
            assumed += assumed_pods(obj, record, by_plan.get(record.plan_id, []))
            continue
        if entry is not None and entry.state in ("Ready", "Retry", "Rejected"):
            continue
        if ks.cluster_queue_of(obj, local_queues) not in managed:
            continue
        if ks.is_admitted(obj):
            continue
        planned.append(with_topology_aliases(obj))
    snapshot = snapshot_from_objects(
        [*planned, *assumed], source=source, default_topology_levels=default_topology_levels
    )
    return PlanningInput(
        snapshot=snapshot,
        workloads=workloads,
        pods=pods,
        records=records,
        managed_queues=managed,
        reports=reports,
        assumed=len(assumed),
    )
