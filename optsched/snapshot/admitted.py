"""Workloads holding a Kueue quota reservation, read from their ``status.admission`` as Kueue reads it.

Kueue's cache counts a reservation per PodSetAssignment: ``resourceUsage`` is
the total for the whole PodSet at admission, over ``count`` pods (the PodSet's
own count where an older Kueue left it out), scaled down to the pods still
needed when ``status.reclaimablePods`` lists finished ones; each resource is
charged to the flavor ``flavors`` names for it. Where ``resourceUsage`` is
absent, the PodSet's request times its count stands in. A workload counts
while ``QuotaReserved`` is True and it has not finished: an evicted workload
keeps its quota until Kueue releases it (then ``QuotaReserved`` turns False).

Reading is tolerant on purpose: a malformed part of an admission is a warning
naming the workload and the field, and the rest of the reservation still
counts, so one odd status never makes a plan promise quota that is taken.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from optsched.errors import InputError
from optsched.kueue import workload_status as ws
from optsched.kueue.placement_record import PlacementRecord, RecordError, record_of
from optsched.kueue.quota import pod_quota_amounts
from optsched.kueue.topology_assignment import read_topology_assignment
from optsched.kueue.workload_status import list_or_empty, map_or_empty
from optsched.model.admitted import AdmittedWorkload, PodSetAdmission, TopologyAssignment
from optsched.model.snapshot import PodRequest
from optsched.snapshot.dra_demand import ClaimTemplates
from optsched.snapshot.kueue_objects import parse_workload
from optsched.snapshot.quantity import MIB, parse_quantity


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def read_admitted(
    workloads: Iterable[dict[str, Any]], templates: ClaimTemplates | None = None
) -> tuple[list[AdmittedWorkload], list[str]]:
    """Every Workload that holds a reservation and has not finished, and a warning per odd field.

    ``templates`` count the GPUs pods ask for through ResourceClaimTemplates.
    """
    out: list[AdmittedWorkload] = []
    warnings: list[str] = []
    for obj in workloads:
        if not ws.holds_quota(obj) or ws.is_finished(obj):
            continue
        found = _admitted(obj, warnings, templates)
        if found is not None:
            out.append(found)
    return out, warnings


def _who(obj: dict[str, Any]) -> str:
    """``Workload namespace/name`` for messages, whatever the types in its metadata."""
    return f"Workload {ws.key_of(obj)}"


def _admitted(
    obj: dict[str, Any], notes: list[str], templates: ClaimTemplates | None = None
) -> AdmittedWorkload | None:
    who = _who(obj)
    admission = map_or_empty(map_or_empty(obj.get("status")).get("admission"))
    cluster_queue = admission.get("clusterQueue")
    if not isinstance(cluster_queue, str) or not cluster_queue:
        notes.append(
            f"{who}: QuotaReserved is True but status.admission.clusterQueue is missing; "
            "its reservation is not counted against any ClusterQueue"
        )
        return None
    assignments = list_or_empty(admission.get("podSetAssignments"))
    running = ws.lifecycle(obj) == ws.Lifecycle.ADMITTED
    without_usage = any(not map_or_empty(a).get("resourceUsage") for a in assignments)
    requests = _requests(obj, notes, templates) if running or without_usage else {}
    record = _record(obj, notes)
    context = _Context(who, requests, record, _spec_counts(obj), _reclaimed(obj))
    pod_sets = []
    for number, raw in enumerate(assignments):
        field = f"status.admission.podSetAssignments[{number}]"
        if not isinstance(raw, dict):
            notes.append(f"{who}: {field}: expected a mapping; this PodSet's reservation is not counted")
            continue
        pod_sets.append(_pod_set(raw, field, context, notes))
    meta = ws.meta(obj)
    return AdmittedWorkload(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid") or ""),
        cluster_queue=cluster_queue,
        running=running,
        pod_sets=tuple(pod_sets),
        owners=ws.owners_of(obj),
        plan_id=record.plan_id if record is not None else None,
    )


class _Context:
    """What every PodSetAssignment of one workload is read against."""

    def __init__(
        self,
        who: str,
        requests: dict[str, PodRequest],
        record: PlacementRecord | None,
        spec_counts: dict[str, int],
        reclaimed: dict[str, int],
    ) -> None:
        self.who = who
        self.requests = requests
        self.record = record
        self.spec_counts = spec_counts
        self.reclaimed = reclaimed


def _pod_set(raw: dict[str, Any], field: str, context: _Context, notes: list[str]) -> PodSetAdmission:
    name = str(raw.get("name") or "main")
    admitted = _count(raw.get("count"))
    if admitted is None:
        admitted = context.spec_counts.get(name, 1)
    current = max(0, admitted - context.reclaimed.get(name, 0))
    request = context.requests.get(name)
    flavors = {str(k): str(v) for k, v in map_or_empty(raw.get("flavors")).items() if v}
    usage = _usage(raw, field, admitted, current, request, context.who, notes)
    if "pods" in flavors and "pods" not in usage:
        usage["pods"] = Decimal(current)
    slots = context.record.slots(name) if context.record is not None else ()
    return PodSetAdmission(
        name=name,
        flavors=flavors,
        usage=usage,
        count=current,
        request=request,
        topology=_topology(raw, field, context.who, notes),
        placement=slots or None,
    )


def _usage(
    raw: dict[str, Any],
    field: str,
    admitted: int,
    current: int,
    request: PodRequest | None,
    who: str,
    notes: list[str],
) -> dict[str, Decimal]:
    """Resource -> total in base units: ``resourceUsage`` scaled to ``current`` pods, else request x count."""
    resource_usage = raw.get("resourceUsage")
    if isinstance(resource_usage, dict) and resource_usage:
        try:
            totals = {
                str(k): parse_quantity(v, field=f"{field}.resourceUsage.{k}")
                for k, v in resource_usage.items()
            }
        except InputError as exc:
            notes.append(f"{who}: {exc.field}: {exc.detail}; counted from the PodSet's requests instead")
        else:
            if admitted and current != admitted:
                totals = {k: v * current / admitted for k, v in totals.items()}
            return totals
    if request is None:
        notes.append(
            f"{who}: {field} has no usable resourceUsage and the PodSet's requests cannot be read; "
            "its reservation is not counted"
        )
        return {}
    return {name: _base_units(name, amount) * current for name, amount in pod_quota_amounts(request).items()}


def _base_units(resource: str, amount: int) -> Decimal:
    """A quota amount in the solver's units (millicores, MiB) back in Kubernetes base units."""
    if resource == "cpu":
        return Decimal(amount) / 1000
    if resource == "memory":
        return Decimal(amount) * MIB
    return Decimal(amount)


def _topology(raw: dict[str, Any], field: str, who: str, notes: list[str]) -> TopologyAssignment | None:
    if raw.get("topologyAssignment") is None:
        return None
    try:
        return read_topology_assignment(raw["topologyAssignment"])
    except ValueError as exc:
        notes.append(f"{who}: {field}.{exc}; its pods' nodes are unknown")
        return None


def _requests(
    obj: dict[str, Any], notes: list[str], templates: ClaimTemplates | None
) -> dict[str, PodRequest]:
    """One pod's request per PodSet; {} with a warning where the spec cannot be read."""
    try:
        workload = parse_workload(obj, templates)
    except InputError as exc:
        problem = f"field {exc.field}: {exc.detail}" if exc.field else exc.detail
    except (TypeError, AttributeError, ValueError) as exc:
        problem = f"spec.podSets is unreadable ({exc})"
    else:
        return {ps.name: ps.request for ps in workload.pod_sets}
    notes.append(f"{_who(obj)}: {problem}; its pods cannot hold node capacity")
    return {}


def _record(obj: dict[str, Any], notes: list[str]) -> PlacementRecord | None:
    try:
        return record_of(obj)
    except RecordError as exc:
        notes.append(f"{_who(obj)}: {exc}; its pods' nodes are taken from Kueue's admission only")
        return None


def _spec_counts(obj: dict[str, Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for raw in list_or_empty(map_or_empty(obj.get("spec")).get("podSets")):
        if isinstance(raw, dict):
            found = _count(raw.get("count", 1))
            out[str(raw.get("name") or "main")] = 1 if found is None else found
    return out


def _reclaimed(obj: dict[str, Any]) -> dict[str, int]:
    """``status.reclaimablePods``: per PodSet, pods whose reservation Kueue no longer needs."""
    out: dict[str, int] = {}
    for raw in list_or_empty(map_or_empty(obj.get("status")).get("reclaimablePods")):
        if isinstance(raw, dict) and _count(raw.get("count")) is not None:
            out[str(raw.get("name") or "main")] = raw["count"]
    return out
