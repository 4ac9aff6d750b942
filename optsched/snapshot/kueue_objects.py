"""Parsing Kueue ``v1beta2`` (and ``v1beta1``) objects into the snapshot model.

Only what placement needs is read. Quotas are converted to the solver's
units (CPU millicores, memory MiB, counts otherwise) once, here.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from optsched.errors import InputError
from optsched.kueue import workload_status as ws
from optsched.model.names import (
    ALLOW_MIXED_ANNOTATION,
    KUEUE_PREFERRED_TOPOLOGY_ANNOTATION,
    KUEUE_REQUIRED_TOPOLOGY_ANNOTATION,
    NVLINK_ANNOTATION,
    OPTSCHED_PREFERRED_TOPOLOGY_ANNOTATION,
    OPTSCHED_REQUIRED_TOPOLOGY_ANNOTATION,
)
from optsched.model.snapshot import (
    ClusterQueue,
    FlavorQuota,
    LocalQueue,
    PodSet,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Topology,
    Workload,
)
from optsched.snapshot.fields import describe, get_int, get_list, get_map, get_str, string_map
from optsched.snapshot.pods import pod_request
from optsched.snapshot.quantity import count, cpu_milli, memory_mib
from optsched.snapshot.scheduling import (
    extended_resource_tolerations,
    parse_required_affinity,
    parse_taints,
    parse_tolerations,
)


def quota_amount(resource: str, value: Any, *, obj: dict[str, Any], field: str) -> int:
    try:
        if resource == "cpu":
            return cpu_milli(value, round_up=False)
        if resource == "memory":
            return memory_mib(value, round_up=False)
        return count(value)
    except InputError as exc:
        raise InputError(exc.detail, obj=describe(obj), field=field) from None


def _created(obj: dict[str, Any]) -> datetime:
    raw = get_str(obj, "metadata.creationTimestamp")
    if not raw:
        return datetime(1970, 1, 1, tzinfo=UTC)
    created = ws.parse_time(raw)
    if created is None:
        raise InputError(
            f"'{raw}' is not an RFC 3339 time", obj=describe(obj), field="metadata.creationTimestamp"
        )
    return created


def _check_status_fields(obj: dict[str, Any]) -> None:
    """Name a status field of the wrong type (Kueue's own status is read by ``workload_status``)."""
    get_list(obj, "status.conditions")
    get_list(obj, "status.admissionChecks")
    get_map(obj, "status.admission")


def workload_state(obj: dict[str, Any]) -> ws.Lifecycle:
    """Pending, admitted, finished or inactive; a status field of the wrong type is an InputError."""
    _check_status_fields(obj)
    return ws.lifecycle(obj)


def _pod_set(obj: dict[str, Any], raw: Any, number: int) -> PodSet:
    field = f"spec.podSets[{number}]"
    if not isinstance(raw, dict):
        raise InputError("expected a mapping", obj=describe(obj), field=field)
    name = raw.get("name") or "main"
    pod_count = raw.get("count", 1)
    if isinstance(pod_count, bool) or not isinstance(pod_count, int) or pod_count < 1:
        raise InputError(
            f"expected a positive integer, got {pod_count!r}", obj=describe(obj), field=f"{field}.count"
        )
    min_count = raw.get("minCount")
    if min_count is not None and (
        isinstance(min_count, bool) or not isinstance(min_count, int) or not 1 <= min_count <= pod_count
    ):
        raise InputError(
            f"expected an integer in 1..{pod_count}, got {min_count!r}",
            obj=describe(obj),
            field=f"{field}.minCount",
        )
    template = raw.get("template")
    if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
        raise InputError("is required but missing", obj=describe(obj), field=f"{field}.template.spec")
    spec = template["spec"]
    annotations = string_map(
        (template.get("metadata") or {}).get("annotations"),
        obj=obj,
        field=f"{field}.template.metadata.annotations",
    )
    topology_request = raw.get("topologyRequest") or {}
    required = (
        topology_request.get("required")
        or annotations.get(KUEUE_REQUIRED_TOPOLOGY_ANNOTATION)
        or annotations.get(OPTSCHED_REQUIRED_TOPOLOGY_ANNOTATION)
    )
    preferred = (
        topology_request.get("preferred")
        or annotations.get(KUEUE_PREFERRED_TOPOLOGY_ANNOTATION)
        or annotations.get(OPTSCHED_PREFERRED_TOPOLOGY_ANNOTATION)
    )
    return PodSet(
        name=str(name),
        count=pod_count,
        min_count=min_count,
        request=pod_request(spec, obj=obj, field=f"{field}.template.spec"),
        node_selector=string_map(
            spec.get("nodeSelector"), obj=obj, field=f"{field}.template.spec.nodeSelector"
        ),
        affinity_terms=parse_required_affinity(spec, obj=obj, field=f"{field}.template.spec.affinity"),
        tolerations=parse_tolerations(
            spec.get("tolerations"), obj=obj, field=f"{field}.template.spec.tolerations"
        ),
        admission_tolerations=extended_resource_tolerations(spec),
        required_topology=required or None,
        preferred_topology=preferred or None,
        nvlink_required=annotations.get(NVLINK_ANNOTATION, "").lower() == "required",
        allow_mixed_products=annotations.get(ALLOW_MIXED_ANNOTATION, "").lower() == "true",
    )


def parse_workload(obj: dict[str, Any]) -> Workload:
    pod_sets_raw = get_list(obj, "spec.podSets", required=True)
    if not pod_sets_raw:
        raise InputError("must list at least one PodSet", obj=describe(obj), field="spec.podSets")
    _check_status_fields(obj)
    reservation = ws.reservation(obj)
    return Workload(
        namespace=get_str(obj, "metadata.namespace", default="default"),
        name=get_str(obj, "metadata.name", required=True),
        uid=get_str(obj, "metadata.uid"),
        queue_name=get_str(obj, "spec.queueName"),
        cluster_queue=reservation.cluster_queue if reservation else None,
        priority=get_int(obj, "spec.priority", default=0) or 0,
        created=_created(obj),
        pod_sets=tuple(_pod_set(obj, raw, i) for i, raw in enumerate(pod_sets_raw)),
        reservation=reservation,
        admission_checks=ws.check_states(obj),
    )


def parse_cluster_queue(obj: dict[str, Any]) -> ClusterQueue:
    spec = get_map(obj, "spec")
    groups = []
    for g, group in enumerate(get_list(obj, "spec.resourceGroups")):
        if not isinstance(group, dict):
            raise InputError("expected a mapping", obj=describe(obj), field=f"spec.resourceGroups[{g}]")
        flavors = []
        for f, flavor in enumerate(group.get("flavors") or []):
            resources = []
            for r, resource in enumerate(flavor.get("resources") or []):
                where = f"spec.resourceGroups[{g}].flavors[{f}].resources[{r}]"
                name = resource.get("name")
                if not name or "nominalQuota" not in resource:
                    raise InputError("needs name and nominalQuota", obj=describe(obj), field=where)
                borrowing = resource.get("borrowingLimit")
                lending = resource.get("lendingLimit")
                resources.append(
                    ResourceQuota(
                        name=name,
                        nominal=quota_amount(
                            name, resource["nominalQuota"], obj=obj, field=f"{where}.nominalQuota"
                        ),
                        borrowing_limit=None
                        if borrowing is None
                        else quota_amount(name, borrowing, obj=obj, field=f"{where}.borrowingLimit"),
                        lending_limit=None
                        if lending is None
                        else quota_amount(name, lending, obj=obj, field=f"{where}.lendingLimit"),
                    )
                )
            flavors.append(FlavorQuota(name=str(flavor.get("name")), resources=tuple(resources)))
        groups.append(
            ResourceGroup(
                covered_resources=tuple(group.get("coveredResources") or ()), flavors=tuple(flavors)
            )
        )
    usage: dict[str, dict[str, int]] = {}
    status = get_map(obj, "status")
    usage_list = status.get("flavorsReservation") or status.get("flavorsUsage") or []
    for flavor in usage_list:
        per_resource = usage.setdefault(str(flavor.get("name")), {})
        for resource in flavor.get("resources") or []:
            name = resource.get("name")
            if name and resource.get("total") is not None:
                per_resource[name] = quota_amount(
                    name, resource["total"], obj=obj, field="status.flavorsUsage"
                )
    strategy = (spec.get("admissionChecksStrategy") or {}).get("admissionChecks") or []
    checks = [str(c.get("name")) for c in strategy if isinstance(c, dict)]
    checks += [str(c) for c in spec.get("admissionChecks") or []]
    return ClusterQueue(
        name=get_str(obj, "metadata.name", required=True),
        cohort=spec.get("cohortName") or spec.get("cohort") or None,
        resource_groups=tuple(groups),
        usage=usage,
        admission_checks=tuple(checks),
    )


def parse_local_queue(obj: dict[str, Any]) -> LocalQueue:
    return LocalQueue(
        namespace=get_str(obj, "metadata.namespace", default="default"),
        name=get_str(obj, "metadata.name", required=True),
        cluster_queue=get_str(obj, "spec.clusterQueue", required=True),
    )


def parse_resource_flavor(obj: dict[str, Any]) -> ResourceFlavor:
    spec = get_map(obj, "spec")
    return ResourceFlavor(
        name=get_str(obj, "metadata.name", required=True),
        node_labels=string_map(spec.get("nodeLabels"), obj=obj, field="spec.nodeLabels"),
        node_taints=parse_taints(spec.get("nodeTaints"), obj=obj, field="spec.nodeTaints"),
        tolerations=parse_tolerations(spec.get("tolerations"), obj=obj, field="spec.tolerations"),
        topology_name=spec.get("topologyName") or None,
    )


def parse_topology(obj: dict[str, Any]) -> Topology:
    levels = []
    for number, level in enumerate(get_list(obj, "spec.levels", required=True)):
        if not isinstance(level, dict) or not level.get("nodeLabel"):
            raise InputError("needs nodeLabel", obj=describe(obj), field=f"spec.levels[{number}].nodeLabel")
        levels.append(str(level["nodeLabel"]))
    return Topology(name=get_str(obj, "metadata.name", required=True), levels=tuple(levels))
