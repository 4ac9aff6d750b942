"""The ResourceClaims of DRA mode, pure part: their names, what a pod asks for, their spec, and what to do
with one that exists already.

On a DRA node the GPUs a plan names are the devices the container gets:
the webhook names a claim in the pod at creation (``spec.resourceClaims``
is immutable afterwards), and at ungate time the controller creates that
claim, owned by the pod, with one request per container that asked for GPUs
(``gpus-<position>``), each selecting exactly its planned devices by UUID.
kube-scheduler's DRA allocator can then allocate nothing else; it fails
closed. optsched never writes ``status.allocation``.

Names: ``optsched-<hash of namespace/plan id/PodSet>-<completion index>``
for an indexed pod (the same on every call, so a webhook call repeated or a
pod recreated for its index names the same claim); a non-indexed pod is
given ``optsched-<hash>-u<suffix>``, the suffix unique to its admission
request (so is a JobSet's pod, whose completion index repeats in every
child Job of its PodSet, and a pod whose index is past its PodSet's slots),
and its slot is taken at ungate time by the leader (the lowest free
slot, as for every pod) and written on the claim (``optsched.io/slot``) and
the pod (``optsched.io/pod-index``).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from optsched.errors import InputError
from optsched.model.names import (
    CLAIM_PLAN_LABEL,
    CLAIM_PREFIX,
    CLAIM_SLOT_ANNOTATION,
    DRA_GPU_DEVICE_CLASS,
    DRA_GPU_DRIVER,
    DRA_UUID_ATTRIBUTE,
    GPU_RESOURCE,
    RESOURCE_API,
)
from optsched.model.placement import PodPlacement
from optsched.snapshot.dra_demand import read_template

UUID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")
"""What a GPU UUID may look like before it goes into a CEL expression (``GPU-`` and hex, MIG-…)."""


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _digest(*parts: str, size: int = 10) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:size]


def claim_stem(namespace: str, plan_id: str, pod_set: str) -> str:
    """``optsched-<hash>-``: what every claim of one PodSet of one plan starts with."""
    return f"{CLAIM_PREFIX}{_digest(namespace, plan_id, pod_set)}-"


def indexed_claim_name(namespace: str, plan_id: str, pod_set: str, index: int) -> str:
    """The claim of an indexed pod: deterministic from namespace, plan id, PodSet and completion index."""
    return f"{claim_stem(namespace, plan_id, pod_set)}{index}"


UNINDEXED_MARKER = "u"
"""After the stem, what marks a claim whose slot is taken at ungate time (an index never starts with it)."""


def unindexed_claim_name(namespace: str, plan_id: str, pod_set: str, unique: str, *, hint: str = "") -> str:
    """The claim of a pod whose slot is taken at ungate time: the PodSet's stem, the unindexed marker,
    ``hint`` (a JobSet pod's ``j<job index>-<completion index>``) and a suffix from ``unique`` (the
    admission request's uid)."""
    tag = f"{hint}-" if hint else ""
    return f"{claim_stem(namespace, plan_id, pod_set)}{UNINDEXED_MARKER}{tag}{_digest(unique, size=12)}"


class ClaimForm(StrEnum):
    """What a claim name a pod carries is, for the PodSet of the plan it belongs to."""

    INDEXED = "indexed"
    """The claim of the pod's completion index: the pod takes that slot or waits."""
    UNINDEXED = "unindexed"
    """A claim whose slot is taken at ungate time (the lowest free one)."""
    FOREIGN = "foreign"
    """Not a name optsched gives a pod of that PodSet: nothing is created or deleted for it."""


def claim_form(name: str, namespace: str, plan_id: str, pod_set: str, index: int | None) -> ClaimForm:
    """Whether ``name`` is the claim optsched names for a pod of ``pod_set`` with completion ``index``."""
    if index is not None and name == indexed_claim_name(namespace, plan_id, pod_set, index):
        return ClaimForm.INDEXED
    if name.startswith(claim_stem(namespace, plan_id, pod_set) + UNINDEXED_MARKER):
        return ClaimForm.UNINDEXED
    return ClaimForm.FOREIGN


def is_optsched_claim(name: Any) -> bool:
    return isinstance(name, str) and name.startswith(CLAIM_PREFIX)


def _count(raw: Any) -> int | None:
    """A whole GPU count from a quantity (``2``, ``"2"``); None if it is none."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw
    if isinstance(raw, str) and raw.isascii() and raw.isdigit():
        return int(raw)
    return None


@dataclass(frozen=True)
class GpuRequest:
    """What one container asks of the GPUs: the container (by name), how many, and its claim request."""

    container: str
    count: int
    request: str
    """The claim request the container names (``gpus-<position>`` when the webhook wrote it; read back
    from the container's own ``resources.claims`` entry at ungate time)."""
    template: str | None = None
    """The ResourceClaimTemplate it came from (its selectors are copied); None: ``nvidia.com/gpu``."""
    entry: str | None = None
    """The pod's ``spec.resourceClaims`` entry that named the template."""

    @property
    def name(self) -> str:
        return self.request


def template_gpu_request(template: dict[str, Any]) -> tuple[int, tuple[dict[str, Any], ...]] | str:
    """A ResourceClaimTemplate asking whole GPUs, read by the planner's own reader
    (:func:`optsched.snapshot.dra_demand.read_template`): (count, its selectors), or why it cannot be
    moved."""
    name = _map(template.get("metadata")).get("name", "?")
    try:
        demand = read_template(template)
    except InputError as exc:
        where = f"field {exc.field}: " if exc.field else ""
        return f"ResourceClaimTemplate {name}: {where}{exc.detail}"
    if len(demand.requests) != 1 or demand.constrained:
        return f"ResourceClaimTemplate {name}: only one request and no constraints can be moved to a claim"
    (request,) = demand.requests
    if request.gpus < 1:
        return f"ResourceClaimTemplate {name}: its request is not of DeviceClass {DRA_GPU_DEVICE_CLASS}"
    return request.gpus, request.selectors


def gpu_requests(spec: Mapping[str, Any], gpu_templates: Mapping[str, int]) -> tuple[GpuRequest, ...] | str:
    """Per container, the whole GPUs it asks (``nvidia.com/gpu``, or a claim from a GPU template), each
    given request ``gpus-<position>``; a string says why the pod cannot be moved to one claim.

    ``gpu_templates`` maps the names of the ResourceClaimTemplates known to ask
    whole GPUs to their count; a pod entry naming another template is left as it is.
    """
    entries = {
        str(e.get("name")): str(e.get("resourceClaimTemplateName"))
        for e in _list(spec.get("resourceClaims"))
        if isinstance(e, dict) and e.get("resourceClaimTemplateName") in gpu_templates
    }
    for container in _list(spec.get("initContainers")):
        if _container_gpus(_map(container), entries, gpu_templates):
            return "an init container asks for GPUs (only regular containers are moved to a claim)"
    out: list[GpuRequest] = []
    for position, raw in enumerate(_list(spec.get("containers"))):
        container = _map(raw)
        found = _container_gpus(container, entries, gpu_templates)
        if len(found) > 1:
            return f"container {container.get('name', position)} asks for GPUs in more than one way"
        if found:
            count, template, entry = found[0]
            name = str(container.get("name", ""))
            out.append(GpuRequest(name, count, f"gpus-{position}", template=template, entry=entry))
    return tuple(out)


def _container_gpus(
    container: Mapping[str, Any], entries: Mapping[str, str], gpu_templates: Mapping[str, int]
) -> list[tuple[int, str | None, str | None]]:
    resources = _map(container.get("resources"))
    found: list[tuple[int, str | None, str | None]] = []
    limits, requests = _map(resources.get("limits")), _map(resources.get("requests"))
    plain = _count(limits.get(GPU_RESOURCE) or requests.get(GPU_RESOURCE))
    if plain:
        found.append((plain, None, None))
    for ref in _list(resources.get("claims")):
        entry = str(_map(ref).get("name", ""))
        if entry in entries:
            found.append((gpu_templates[entries[entry]], entries[entry], entry))
    return found


def uuid_selector(uuids: Sequence[str]) -> dict[str, Any]:
    """The CEL selector that only the devices with these UUIDs pass."""
    listed = ", ".join(json.dumps(u) for u in uuids)
    attribute = f'device.attributes["{DRA_GPU_DRIVER}"].{DRA_UUID_ATTRIBUTE}'
    return {"cel": {"expression": f"{attribute} in [{listed}]"}}


@dataclass(frozen=True)
class ClaimPlan:
    """The claim one pod's slot needs, all but the selectors of user templates (read at ungate time)."""

    name: str
    namespace: str
    plan_id: str
    pod_set: str
    slot: PodPlacement
    requests: tuple[GpuRequest, ...]
    pod_name: str
    pod_uid: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def problem(self) -> str | None:
        """Why the slot cannot be enforced by this claim (counts or UUIDs do not fit); None if it can."""
        uuids = self.slot.gpu_uuids or ()
        asked = sum(r.count for r in self.requests)
        if asked != len(uuids) or not uuids:
            return (
                f"pod {self.namespace}/{self.pod_name}: its containers ask {asked} "
                f"GPU(s) but slot {self.pod_set}/{self.slot.index} names {len(uuids)} UUID(s)"
            )
        bad = [u for u in uuids if not UUID_PATTERN.match(u)]
        if bad:
            return f"slot {self.pod_set}/{self.slot.index}: {bad[0]!r} is not a GPU UUID"
        return None

    def body(self, selectors: Mapping[str, Sequence[Mapping[str, Any]]] | None = None) -> dict[str, Any]:
        """The ResourceClaim (``selectors``: each template's own, copied into its requests)."""
        extra = selectors or {}
        uuids = list(self.slot.gpu_uuids or ())
        requests = []
        for request in self.requests:
            mine, uuids = uuids[: request.count], uuids[request.count :]
            chosen = [uuid_selector(mine), *(dict(s) for s in extra.get(request.template or "", ()))]
            exactly = {
                "deviceClassName": DRA_GPU_DEVICE_CLASS,
                "allocationMode": "ExactCount",
                "count": request.count,
                "selectors": chosen,
            }
            requests.append({"name": request.name, "exactly": exactly})
        owner = {"apiVersion": "v1", "kind": "Pod", "name": self.pod_name, "uid": self.pod_uid}
        return {
            "apiVersion": RESOURCE_API,
            "kind": "ResourceClaim",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "labels": {CLAIM_PLAN_LABEL: self.plan_id},
                "annotations": {CLAIM_SLOT_ANNOTATION: f"{self.pod_set}/{self.slot.index}"},
                "ownerReferences": [{**owner, "controller": True}],
            },
            "spec": {"devices": {"requests": requests}},
        }


class ClaimVerdict(StrEnum):
    """What to do with the claim a pin needs."""

    CREATE = "create"
    """None exists: create it, then ungate."""
    KEEP = "keep"
    """It exists, owned by this pod, with this slot's spec (a pass interrupted before the ungate)."""
    DELETE = "delete"
    """It exists but is not this slot's and holds no device: delete it, recreate on the next pass."""
    WAIT = "wait"
    """It is being deleted: the next pass creates it afresh."""
    CONFLICT = "conflict"
    """It holds other devices for someone else: this slot cannot be enforced, re-plan."""


def owner_uid(claim: Mapping[str, Any]) -> str:
    refs = _list(_map(claim.get("metadata")).get("ownerReferences"))
    return next((str(r.get("uid", "")) for r in refs if isinstance(r, dict) and r.get("controller")), "")


def allocated(claim: Mapping[str, Any]) -> bool:
    return bool(_map(_map(claim.get("status")).get("allocation")))


def same_slot(existing: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Same requests and the same slot annotation (server defaults on the requests are not compared)."""

    def shape(claim: Mapping[str, Any]) -> tuple[Any, ...]:
        requests = _list(_map(_map(claim.get("spec")).get("devices")).get("requests"))
        key = [
            (
                _map(r).get("name"),
                _map(_map(r).get("exactly")).get("count"),
                json.dumps(_map(_map(r).get("exactly")).get("selectors"), sort_keys=True),
            )
            for r in requests
        ]
        slot = _map(_map(claim.get("metadata")).get("annotations")).get(CLAIM_SLOT_ANNOTATION)
        return (slot, tuple(key))

    return shape(existing) == shape(wanted)


def judge(existing: Mapping[str, Any] | None, wanted: Mapping[str, Any], *, owner_live: bool) -> ClaimVerdict:
    """What to do given the claim of that name found (``None``: none); ``owner_live``: its owner pod runs."""
    if existing is None:
        return ClaimVerdict.CREATE
    if _map(existing.get("metadata")).get("deletionTimestamp"):
        return ClaimVerdict.WAIT
    pod_uid = owner_uid(wanted)
    if owner_uid(existing) == pod_uid and same_slot(existing, wanted):
        return ClaimVerdict.KEEP
    if not allocated(existing) or (owner_uid(existing) != pod_uid and not owner_live):
        return ClaimVerdict.DELETE
    return ClaimVerdict.CONFLICT


REQUEST_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
"""A claim request's name: a DNS label."""


def requests_for(
    refs: Sequence[tuple[str, str]], entries: Set[str], template_spec: Mapping[str, Any]
) -> tuple[GpuRequest, ...] | str:
    """The requests of a pod the webhook moved onto its claim, read back at ungate time.

    ``refs`` are the pod's containers referring to ``optsched-gpus``, as
    (container name, the request its own ``resources.claims`` entry names),
    so a container another webhook inserted later shifts nothing; ``entries``
    the names of its ``spec.resourceClaims``. The counts come from the
    container of the same name in its PodSet's template in the Workload (what
    Kueue charged): ``nvidia.com/gpu``, or the ResourceClaimTemplate of the
    entry the pod no longer names (its count is read with the template,
    ``count`` 0 until then).
    """
    templates = {
        str(e.get("name")): str(e.get("resourceClaimTemplateName"))
        for e in _list(template_spec.get("resourceClaims"))
        if isinstance(e, dict) and e.get("resourceClaimTemplateName")
    }
    planned = {str(_map(c).get("name", "")): _map(c) for c in _list(template_spec.get("containers"))}
    out: list[GpuRequest] = []
    for container, request in refs:
        if not REQUEST_NAME.match(request) or any(r.request == request for r in out):
            return f"container {container}: its claim request {request!r} is not a distinct DNS label"
        if container not in planned:
            return f"container {container} of the pod is not in its PodSet's template"
        resources = _map(planned[container].get("resources"))
        plain = _count(_map(resources.get("limits")).get(GPU_RESOURCE)) or _count(
            _map(resources.get("requests")).get(GPU_RESOURCE)
        )
        moved = [
            str(_map(r).get("name"))
            for r in _list(resources.get("claims"))
            if _map(r).get("name") in templates and _map(r).get("name") not in entries
        ]
        if plain:
            out.append(GpuRequest(container, plain, request))
        elif len(moved) == 1:
            out.append(GpuRequest(container, 0, request, template=templates[moved[0]], entry=moved[0]))
        else:
            return f"container {container}: its GPU request is not found in its PodSet's template"
    return tuple(out)


def with_template_counts(
    requests: Sequence[GpuRequest], counts: Mapping[str, int]
) -> tuple[GpuRequest, ...] | str:
    """``requests`` with the counts of the templates they came from filled in."""
    out = []
    for request in requests:
        if request.template is None:
            out.append(request)
        elif request.template in counts:
            out.append(replace(request, count=counts[request.template]))
        else:
            return f"ResourceClaimTemplate {request.template} cannot be read"
    return tuple(out)
