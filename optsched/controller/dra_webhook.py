"""The webhook's DRA part, pure: the refusal of pods naming optsched's claims, and the claim a pod gets.

Only optsched names its claims: any pod arriving at CREATE whose
``spec.resourceClaims`` names a ``resourceClaimName`` starting with
``optsched-`` is refused (whatever its queue), since the claim selects the
devices planned for another pod. The one exception is the pod this webhook
converted itself, seen again when the API server reinvokes it: its entry is
``optsched-gpus`` and names a claim derived from its own labels (plan id,
PodSet, completion index), judged without any read so that a lagging
informer never refuses it.

A pod carrying the plan-id label whose slot is on a DRA node (its record's
slot has ``enforcement: dra`` and UUIDs) gets the ``optsched-gpus`` entry
and its containers' GPU requests moved onto it: ``nvidia.com/gpu`` leaves
their limits and requests, an entry naming a ResourceClaimTemplate of whole
GPUs leaves ``spec.resourceClaims``, and each such container refers to
request ``gpus-<position>`` of the claim instead (at ungate time the request
names are read back from each container's own entry, so a container another
webhook inserts later shifts nothing). An indexed pod's slot is its
completion index where that index is one slot of its PodSet and unique in
it; any other pod (not indexed, a JobSet's, whose completion indices repeat
in each child Job, or one whose index is past the slots) is converted only
when every slot of its PodSet is on DRA nodes, its slot taken at ungate
time. Anything else is left as it is and stays node-pinned only
(enforcement ``none``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from optsched.controller.claims import (
    ClaimForm,
    claim_form,
    gpu_requests,
    indexed_claim_name,
    is_optsched_claim,
    unindexed_claim_name,
)
from optsched.kueue.placement_record import PlacementRecord
from optsched.model.names import (
    COMPLETION_INDEX_LABEL,
    GPU_RESOURCE,
    JOBSET_JOB_INDEX_LABEL,
    KUEUE_PODSET_LABEL,
    PLAN_ID_LABEL,
    POD_CLAIM_NAME,
    PODSET_LABEL,
)
from optsched.model.placement import Enforcement, PodPlacement

RecordLookup = Callable[[str, str], PlacementRecord | None]
"""``(namespace, plan id)`` to the workload's placement record, None where it is not known."""
TemplateLookup = Callable[[str, str], int | None]
"""``(namespace, template name)`` to its whole-GPU count, None where it is not a template of GPUs."""


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


@dataclass(frozen=True)
class PodSlot:
    """Where a plan-id pod stands by its own labels: its plan, PodSet, completion and JobSet job index."""

    plan_id: str
    pod_set: str
    index: int | None
    job_index: int | None = None


def _digits(raw: Any) -> int | None:
    return int(raw) if isinstance(raw, str) and raw.isascii() and raw.isdigit() else None


def pod_slot(pod: Mapping[str, Any]) -> PodSlot | None:
    """Read from the pod's labels alone (the plan-id and PodSet labels our check's podSetUpdates put on
    every pod); None where either is missing."""
    meta = _map(pod.get("metadata"))
    labels, annotations = _map(meta.get("labels")), _map(meta.get("annotations"))
    plan_id = labels.get(PLAN_ID_LABEL)
    pod_set = labels.get(PODSET_LABEL) or labels.get(KUEUE_PODSET_LABEL)
    if not isinstance(plan_id, str) or not plan_id or not isinstance(pod_set, str) or not pod_set:
        return None
    index = _digits(labels.get(COMPLETION_INDEX_LABEL) or annotations.get(COMPLETION_INDEX_LABEL))
    job = _digits(labels.get(JOBSET_JOB_INDEX_LABEL) or annotations.get(JOBSET_JOB_INDEX_LABEL))
    return PodSlot(plan_id, pod_set, index, job)


def on_dra(slot: PodPlacement) -> bool:
    """A slot whose devices a claim can select: planned on a DRA node, with UUIDs."""
    return slot.enforcement == Enforcement.DRA and bool(slot.gpu_uuids)


def refusal(pod: Mapping[str, Any], namespace: str, who: str) -> str | None:
    """Why the pod may not be created (it names an optsched claim not made for it); None if it may."""
    for entry in _list(_map(pod.get("spec")).get("resourceClaims")):
        claim = _map(entry).get("resourceClaimName")
        if is_optsched_claim(claim) and not _own(pod, namespace, _map(entry)):
            return (
                f"pod {who}: spec.resourceClaims names ResourceClaim {claim}, and only optsched names "
                "claims starting with 'optsched-' (each selects the GPUs planned for one pod); "
                "remove that entry"
            )
    return None


def _own(pod: Mapping[str, Any], namespace: str, entry: Mapping[str, Any]) -> bool:
    """The entry this webhook wrote into this very pod (seen again on a reinvocation), judged from the
    pod's own labels only, so a lagging informer or a failed read never refuses it: the claim of its
    completion index, or one of its plan's PodSet whose slot is taken at ungate time."""
    where = pod_slot(pod)
    if entry.get("name") != POD_CLAIM_NAME or where is None:
        return False
    claim = str(entry.get("resourceClaimName"))
    index = where.index if where.job_index is None else None
    form = claim_form(claim, namespace, where.plan_id, where.pod_set, index)
    return form != ClaimForm.FOREIGN


def _already_converted(pod: Mapping[str, Any]) -> bool:
    return any(
        _map(e).get("name") == POD_CLAIM_NAME for e in _list(_map(pod.get("spec")).get("resourceClaims"))
    )


def claim_name(where: PodSlot, record: PlacementRecord, namespace: str, request_uid: str) -> str | None:
    """The claim a pod gets, None where it gets none: named by its completion index when that index is
    one slot of its PodSet (and not repeated across a JobSet's child Jobs), that slot being on a DRA
    node; otherwise a name whose slot is taken at ungate time, only when every slot of its PodSet is
    on DRA nodes (whichever it takes, a claim enforces it)."""
    slots = {s.index: s for s in record.slots(where.pod_set)}
    if where.index is not None and where.job_index is None and where.index in slots:
        if not on_dra(slots[where.index]):
            return None
        return indexed_claim_name(namespace, where.plan_id, where.pod_set, where.index)
    if not slots or not all(on_dra(s) for s in slots.values()):
        return None
    hint = f"j{where.job_index}-{where.index}" if where.job_index is not None else ""
    return unindexed_claim_name(namespace, where.plan_id, where.pod_set, request_uid, hint=hint)


def claim_patch(
    pod: Mapping[str, Any],
    namespace: str,
    request_uid: str,
    records: RecordLookup,
    templates: TemplateLookup,
) -> tuple[list[dict[str, Any]], str | None]:
    """The JSON patch moving the pod's GPUs onto its optsched claim (empty when it gets none), and why
    it gets none where that deserves a warning."""
    where = pod_slot(pod)
    if where is None or _already_converted(pod):
        return [], None
    record = records(namespace, where.plan_id)
    if record is None:
        return [], (
            f"the placement record of plan {where.plan_id} is not known yet; its GPUs are node-pinned only"
        )
    if where.pod_set not in record.pod_sets:
        return [], None
    name = claim_name(where, record, namespace, request_uid)
    if name is None:
        return [], None
    spec = _map(pod.get("spec"))
    counts = {}
    for entry in _list(spec.get("resourceClaims")):
        template = _map(entry).get("resourceClaimTemplateName")
        count = templates(namespace, template) if isinstance(template, str) else None
        if count is not None:
            counts[str(template)] = count
    requests = gpu_requests(spec, counts)
    if isinstance(requests, str):
        return [], f"{requests}; its GPUs are node-pinned only"
    if not requests:
        return [], None
    return _moved(spec, name, requests), None


def _moved(spec: Mapping[str, Any], claim: str, requests: Any) -> list[dict[str, Any]]:
    """The patch: the pod's claim entries and containers with the GPU requests on ``claim``."""
    by_container = {r.container: r for r in requests}
    moved_entries = {r.entry for r in requests if r.entry}
    entries = [e for e in _list(spec.get("resourceClaims")) if _map(e).get("name") not in moved_entries]
    entries.append({"name": POD_CLAIM_NAME, "resourceClaimName": claim})
    containers = []
    for raw in _list(spec.get("containers")):
        container = dict(_map(raw))
        request = by_container.get(str(container.get("name", "")))
        if request is not None:
            resources = dict(_map(container.get("resources")))
            for key in ("limits", "requests"):
                if key in resources:
                    kept = {k: v for k, v in _map(resources[key]).items() if k != GPU_RESOURCE}
                    if kept:
                        resources[key] = kept
                    else:
                        resources.pop(key)
            refs = [r for r in _list(resources.get("claims")) if _map(r).get("name") not in moved_entries]
            resources["claims"] = [*refs, {"name": POD_CLAIM_NAME, "request": request.name}]
            container["resources"] = resources
        containers.append(container)
    return [
        {"op": "add", "path": "/spec/resourceClaims", "value": entries},
        {"op": "replace", "path": "/spec/containers", "value": containers},
    ]
