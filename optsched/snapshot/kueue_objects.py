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
    PodRequest,
    PodSet,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Topology,
    Workload,
)
from optsched.snapshot.dra_demand import ClaimTemplates
from optsched.snapshot.fields import (
    as_list,
    as_map,
    as_str,
    describe,
    get_int,
    get_list,
    get_map,
    get_str,
    mappings,
    object_namespace,
    string_map,
)
from optsched.snapshot.pods import pod_request
from optsched.snapshot.quantity import count, cpu_milli, memory_mib
from optsched.snapshot.scheduling import (
    extended_resource_tolerations,
    parse_required_affinity,
    parse_taints,
    parse_tolerations,
)

INT32_MAX = 2**31 - 1
"""Kueue's API types counts and priorities as int32."""


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


def _counts(obj: dict[str, Any], raw: dict[str, Any], field: str) -> tuple[int, int | None]:
    """``count`` (1 when absent) and ``minCount`` as Kueue's API types them: int32, 1 <= minCount <= count."""
    pod_count = raw.get("count", 1)
    if isinstance(pod_count, bool) or not isinstance(pod_count, int) or not 1 <= pod_count <= INT32_MAX:
        raise InputError(
            f"expected a positive 32-bit integer, got {pod_count!r}",
            obj=describe(obj),
            field=f"{field}.count",
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
    return pod_count, min_count


def _request(
    obj: dict[str, Any], spec: dict[str, Any], field: str, templates: ClaimTemplates | None
) -> PodRequest:
    """One pod's request: its containers' resources plus the GPUs its claim templates take."""
    request = pod_request(spec, obj=obj, field=field)
    if templates is None:
        return request
    claimed = templates.pod_gpus(spec, namespace=object_namespace(obj), obj=obj, field=field)
    if not claimed:
        return request
    if request.is_share:
        raise InputError(
            "asks for GPU shares and for whole GPUs through ResourceClaimTemplates; expected one of them",
            obj=describe(obj),
            field=f"{field}.resourceClaims",
        )
    return request.model_copy(update={"gpus": request.gpus + claimed, "dra_gpus": True})


def _pod_set(obj: dict[str, Any], raw: Any, number: int, templates: ClaimTemplates | None) -> PodSet:
    field = f"spec.podSets[{number}]"
    if not isinstance(raw, dict):
        raise InputError("expected a mapping", obj=describe(obj), field=field)
    name = as_str(raw.get("name"), obj=obj, field=f"{field}.name") or "main"
    pod_count, min_count = _counts(obj, raw, field)
    template = raw.get("template")
    if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
        raise InputError("is required but missing", obj=describe(obj), field=f"{field}.template.spec")
    spec = template["spec"]
    if not as_list(spec.get("containers"), obj=obj, field=f"{field}.template.spec.containers"):
        raise InputError(
            "must list at least one container", obj=describe(obj), field=f"{field}.template.spec.containers"
        )
    metadata = as_map(template.get("metadata"), obj=obj, field=f"{field}.template.metadata")
    annotations = string_map(
        metadata.get("annotations"), obj=obj, field=f"{field}.template.metadata.annotations"
    )
    topology_request = as_map(raw.get("topologyRequest"), obj=obj, field=f"{field}.topologyRequest")
    required = (
        as_str(topology_request.get("required"), obj=obj, field=f"{field}.topologyRequest.required")
        or annotations.get(KUEUE_REQUIRED_TOPOLOGY_ANNOTATION)
        or annotations.get(OPTSCHED_REQUIRED_TOPOLOGY_ANNOTATION)
    )
    preferred = (
        as_str(topology_request.get("preferred"), obj=obj, field=f"{field}.topologyRequest.preferred")
        or annotations.get(KUEUE_PREFERRED_TOPOLOGY_ANNOTATION)
        or annotations.get(OPTSCHED_PREFERRED_TOPOLOGY_ANNOTATION)
    )
    return PodSet(
        name=str(name),
        count=pod_count,
        min_count=min_count,
        request=_request(obj, spec, f"{field}.template.spec", templates),
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


def parse_workload(obj: dict[str, Any], templates: ClaimTemplates | None = None) -> Workload:
    """A Workload's PodSets and queue facts.

    With ``templates``, a pod template naming a ResourceClaimTemplate asks for
    the GPUs the template takes (:mod:`optsched.snapshot.dra_demand`); one
    that is missing is an :class:`InputError`. Without, claims are not read.
    """
    pod_sets_raw = get_list(obj, "spec.podSets", required=True)
    if not pod_sets_raw:
        raise InputError("must list at least one PodSet", obj=describe(obj), field="spec.podSets")
    _check_status_fields(obj)
    reservation = ws.reservation(obj)
    pod_sets = tuple(_pod_set(obj, raw, i, templates) for i, raw in enumerate(pod_sets_raw))
    names = [ps.name for ps in pod_sets]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise InputError(
            f"PodSet names must be unique; {', '.join(twice)} appears more than once",
            obj=describe(obj),
            field="spec.podSets",
        )
    priority = get_int(obj, "spec.priority", default=0) or 0
    if not -INT32_MAX - 1 <= priority <= INT32_MAX:
        raise InputError(
            f"expected a 32-bit integer, got {priority}", obj=describe(obj), field="spec.priority"
        )
    return Workload(
        namespace=get_str(obj, "metadata.namespace", default="default"),
        name=get_str(obj, "metadata.name", required=True),
        uid=get_str(obj, "metadata.uid"),
        queue_name=get_str(obj, "spec.queueName"),
        cluster_queue=reservation.cluster_queue if reservation else None,
        priority=priority,
        created=_created(obj),
        pod_sets=pod_sets,
        reservation=reservation,
        admission_checks=ws.check_states(obj),
    )


def _resource_quota(obj: dict[str, Any], resource: dict[str, Any], where: str) -> ResourceQuota:
    name = as_str(resource.get("name"), obj=obj, field=f"{where}.name")
    if not name or resource.get("nominalQuota") is None:
        raise InputError("needs name and nominalQuota", obj=describe(obj), field=where)

    def amount(key: str) -> int | None:
        value = resource.get(key)
        return None if value is None else quota_amount(name, value, obj=obj, field=f"{where}.{key}")

    nominal = quota_amount(name, resource["nominalQuota"], obj=obj, field=f"{where}.nominalQuota")
    return ResourceQuota(
        name=name,
        nominal=nominal,
        borrowing_limit=amount("borrowingLimit"),
        lending_limit=amount("lendingLimit"),
    )


def _resource_groups(obj: dict[str, Any]) -> tuple[ResourceGroup, ...]:
    groups = []
    for where, group in mappings(
        get_map(obj, "spec").get("resourceGroups"), obj=obj, field="spec.resourceGroups"
    ):
        flavors = []
        for flavor_where, flavor in mappings(group.get("flavors"), obj=obj, field=f"{where}.flavors"):
            resources = tuple(
                _resource_quota(obj, resource, resource_where)
                for resource_where, resource in mappings(
                    flavor.get("resources"), obj=obj, field=f"{flavor_where}.resources"
                )
            )
            name = as_str(flavor.get("name"), obj=obj, field=f"{flavor_where}.name")
            flavors.append(FlavorQuota(name=name, resources=resources))
        covered = as_list(group.get("coveredResources"), obj=obj, field=f"{where}.coveredResources")
        groups.append(
            ResourceGroup(
                covered_resources=tuple(
                    as_str(r, obj=obj, field=f"{where}.coveredResources[{i}]") for i, r in enumerate(covered)
                ),
                flavors=tuple(flavors),
            )
        )
    return tuple(groups)


def _status_usage(obj: dict[str, Any]) -> dict[str, dict[str, int]]:
    """``status.flavorsReservation`` (or ``flavorsUsage``): flavor -> resource -> quantity in use."""
    status = get_map(obj, "status")
    key = "flavorsReservation" if status.get("flavorsReservation") else "flavorsUsage"
    usage: dict[str, dict[str, int]] = {}
    for where, flavor in mappings(status.get(key), obj=obj, field=f"status.{key}"):
        per_resource = usage.setdefault(as_str(flavor.get("name"), obj=obj, field=f"{where}.name"), {})
        for resource_where, resource in mappings(
            flavor.get("resources"), obj=obj, field=f"{where}.resources"
        ):
            name = as_str(resource.get("name"), obj=obj, field=f"{resource_where}.name")
            if name and resource.get("total") is not None:
                per_resource[name] = quota_amount(
                    name, resource["total"], obj=obj, field=f"{resource_where}.total"
                )
    return usage


def _admission_checks(obj: dict[str, Any]) -> tuple[str, ...]:
    spec = get_map(obj, "spec")
    strategy = as_map(spec.get("admissionChecksStrategy"), obj=obj, field="spec.admissionChecksStrategy")
    field = "spec.admissionChecksStrategy.admissionChecks"
    checks = [
        as_str(entry.get("name"), obj=obj, field=f"{where}.name")
        for where, entry in mappings(strategy.get("admissionChecks"), obj=obj, field=field)
    ]
    listed = as_list(spec.get("admissionChecks"), obj=obj, field="spec.admissionChecks")
    checks += [as_str(c, obj=obj, field=f"spec.admissionChecks[{i}]") for i, c in enumerate(listed)]
    return tuple(checks)


def parse_cluster_queue(obj: dict[str, Any]) -> ClusterQueue:
    spec = get_map(obj, "spec")
    cohort = as_str(spec.get("cohortName") or spec.get("cohort"), obj=obj, field="spec.cohortName")
    return ClusterQueue(
        name=get_str(obj, "metadata.name", required=True),
        cohort=cohort or None,
        resource_groups=_resource_groups(obj),
        usage=_status_usage(obj),
        admission_checks=_admission_checks(obj),
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
        topology_name=as_str(spec.get("topologyName"), obj=obj, field="spec.topologyName") or None,
    )


def parse_topology(obj: dict[str, Any]) -> Topology:
    levels = []
    for number, level in enumerate(get_list(obj, "spec.levels", required=True)):
        if not isinstance(level, dict) or not level.get("nodeLabel"):
            raise InputError("needs nodeLabel", obj=describe(obj), field=f"spec.levels[{number}].nodeLabel")
        levels.append(str(level["nodeLabel"]))
    return Topology(name=get_str(obj, "metadata.name", required=True), levels=tuple(levels))
