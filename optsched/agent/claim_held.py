"""The GPUs pods hold on a DRA node, read from the ResourceClaims kube-scheduler allocated: pure values.

On a DRA node no device plugin hands GPUs out: kube-scheduler's DRA allocator
writes them into each claim's ``status.allocation`` (driver, pool, device
name), and NVIDIA's kubelet plugin gives the container exactly those. So the
devices a container holds are the allocated devices of the claim requests it
names: a ``resources.claims`` entry (``{name, request}``, naming one of the
pod's ``spec.resourceClaims``), or, for ``nvidia.com/gpu`` served through a
DeviceClass's extended resource name, the request mapping kube-scheduler wrote
into ``status.extendedResourceClaimStatus``. A claim counts only for the pods
it is reserved for; device names are matched to GPUs by minor number.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from optsched.agent.devices import Discovery
from optsched.agent.podresources import ContainerDevices, PodDevices
from optsched.errors import InputError
from optsched.model.names import DRA_GPU_DRIVER, GPU_RESOURCE
from optsched.snapshot.dra import allocation_results

ClaimKey = tuple[str, str]


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _results(claim: Mapping[str, Any], node: str) -> list[tuple[str, str]]:
    """The claim's allocated ``gpu.nvidia.com`` devices in the node's pool, as (request, device name),
    read by the snapshot's reader (a claim it cannot read holds nothing here)."""
    try:
        allocated = allocation_results(dict(claim))
    except InputError:
        return []
    return [
        (request, device)
        for driver, pool, device, request in allocated
        if (driver, pool) == (DRA_GPU_DRIVER, node)
    ]


def _reserved_for(claim: Mapping[str, Any], uid: str) -> bool:
    reserved = _list(_dict(claim.get("status")).get("reservedFor"))
    return any(_dict(r).get("resource") == "pods" and _dict(r).get("uid") == uid for r in reserved)


def _claim_names(pod: Mapping[str, Any]) -> dict[str, str]:
    """The pod's claim entry names -> ResourceClaim names (direct, or generated from a template)."""
    out: dict[str, str] = {}
    for entry in _list(_dict(pod.get("spec")).get("resourceClaims")):
        name, claim = _dict(entry).get("name"), _dict(entry).get("resourceClaimName")
        if isinstance(name, str) and isinstance(claim, str):
            out[name] = claim
    for entry in _list(_dict(pod.get("status")).get("resourceClaimStatuses")):
        name, claim = _dict(entry).get("name"), _dict(entry).get("resourceClaimName")
        if isinstance(name, str) and isinstance(claim, str):
            out.setdefault(name, claim)
    return out


def _request_of(request: str) -> str:
    """A result's request; a subrequest of a prioritized list (``gpus/big``) counts for its request."""
    return request.split("/", 1)[0]


def _requests(pod: Mapping[str, Any]) -> dict[str, list[tuple[str, str | None]]]:
    """Per container, the (ResourceClaim name, request or None for all of it) it uses."""
    wanted: dict[str, list[tuple[str, str | None]]] = {}
    names = _claim_names(pod)
    for container in _list(_dict(pod.get("spec")).get("containers")):
        container_name = str(_dict(container).get("name", ""))
        for ref in _list(_dict(_dict(container).get("resources")).get("claims")):
            claim = names.get(str(_dict(ref).get("name", "")))
            if claim is not None:
                request = _dict(ref).get("request")
                wanted.setdefault(container_name, []).append(
                    (claim, request if isinstance(request, str) else None)
                )
    extended = _dict(_dict(pod.get("status")).get("extendedResourceClaimStatus"))
    extended_claim = extended.get("resourceClaimName")
    if isinstance(extended_claim, str):
        for mapping in _list(extended.get("requestMappings")):
            target, mapped = _dict(mapping).get("containerName"), _dict(mapping).get("requestName")
            if isinstance(target, str) and isinstance(mapped, str):
                wanted.setdefault(target, []).append((extended_claim, mapped))
    return wanted


def _pod_holdings(
    pod: Mapping[str, Any],
    claims: Mapping[ClaimKey, Mapping[str, Any]],
    node: str,
    uuid_of: Mapping[str, str],
) -> PodDevices | None:
    meta = _dict(pod.get("metadata"))
    namespace, uid = str(meta.get("namespace", "")), str(meta.get("uid", ""))
    containers = []
    for container_name, refs in _requests(pod).items():
        ids: list[str] = []
        for name, request in refs:
            claim = claims.get((namespace, name))
            if claim is None or not _reserved_for(claim, uid):
                continue
            for allocated, device in _results(claim, node):
                gpu = uuid_of.get(device)
                if gpu is not None and gpu not in ids and request in (None, _request_of(allocated)):
                    ids.append(gpu)
        if ids:
            containers.append(ContainerDevices(container_name, ((GPU_RESOURCE, tuple(ids)),)))
    if not containers:
        return None
    return PodDevices(namespace, str(meta.get("name", "")), tuple(containers))


def claim_holdings(
    node: str, pods: Sequence[Mapping[str, Any]], claims: Sequence[Mapping[str, Any]], discovery: Discovery
) -> list[PodDevices]:
    """The whole GPUs each pod on ``node`` holds through its allocated claims (pods holding none left out)."""
    uuid_of = {f"gpu-{g.minor}": g.uuid for g in discovery.gpus}
    by_key: dict[ClaimKey, Mapping[str, Any]] = {}
    for claim in claims:
        meta = _dict(claim.get("metadata"))
        by_key[(str(meta.get("namespace", "")), str(meta.get("name", "")))] = claim
    held = (_pod_holdings(pod, by_key, node, uuid_of) for pod in pods)
    return [p for p in held if p is not None]


def claims_on(node: str, claims: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The claims with at least one ``gpu.nvidia.com`` device allocated in ``node``'s pool."""
    return [c for c in claims if _results(c, node)]
