"""The GPUs a pod asks for through ResourceClaimTemplates of NVIDIA's DRA driver.

Besides ``nvidia.com/gpu: N``, a pod may ask for GPUs with a
``spec.resourceClaims[]`` entry naming a ResourceClaimTemplate (in the pod's
namespace) whose requests take ``exactly: {deviceClassName: gpu.nvidia.com,
allocationMode: ExactCount, count: N}``: kube-scheduler allocates a claim made
from it for each pod, so each such request is N whole GPUs of the pod,
whichever of its containers use them. Requests of other device classes take
no GPU. A GPU request the planner cannot count (``allocationMode: All``,
``firstAvailable``, which Kueue does not admit either) makes the template
unreadable, and a pod naming a template that is missing or unreadable cannot
be planned: its Workload is left out with the reason.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from optsched.errors import InputError
from optsched.model.names import DRA_GPU_DEVICE_CLASS
from optsched.snapshot.dra import Unreadable, is_dra_kind
from optsched.snapshot.fields import (
    as_map,
    as_str,
    describe,
    get_list,
    get_map,
    mappings,
    object_name,
    object_namespace,
)

__all__ = [
    "MAX_TEMPLATE_GPUS",
    "ClaimTemplates",
    "TemplateDemand",
    "TemplateRequest",
    "claim_templates",
    "read_template",
    "template_gpus",
]

MAX_TEMPLATE_GPUS = 1024
"""The most GPUs one request is read as asking for (more than any node holds)."""


def _request_gpus(entry: dict[str, Any], *, obj: dict[str, Any], where: str) -> int:
    """Whole GPUs of one request: its count where its device class is NVIDIA's, else 0."""
    for path, sub in mappings(entry.get("firstAvailable"), obj=obj, field=f"{where}.firstAvailable"):
        if (
            as_str(sub.get("deviceClassName"), obj=obj, field=f"{path}.deviceClassName")
            == DRA_GPU_DEVICE_CLASS
        ):
            raise InputError(
                f"firstAvailable with {DRA_GPU_DEVICE_CLASS} is not planned (Kueue does not admit it); "
                "ask with exactly",
                obj=describe(obj),
                field=f"{path}.deviceClassName",
            )
    exactly = as_map(entry.get("exactly"), obj=obj, field=f"{where}.exactly")
    if as_str(exactly.get("deviceClassName"), obj=obj, field=f"{where}.exactly.deviceClassName") != (
        DRA_GPU_DEVICE_CLASS
    ):
        return 0
    mode = as_str(exactly.get("allocationMode"), obj=obj, field=f"{where}.exactly.allocationMode")
    if mode not in ("", "ExactCount"):
        raise InputError(
            f"expected ExactCount (whole GPUs by count), got {mode!r}",
            obj=describe(obj),
            field=f"{where}.exactly.allocationMode",
        )
    count = exactly.get("count", 1)
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_TEMPLATE_GPUS:
        raise InputError(
            f"expected a whole number in 1..{MAX_TEMPLATE_GPUS}, got {count!r}",
            obj=describe(obj),
            field=f"{where}.exactly.count",
        )
    return count


@dataclass(frozen=True)
class TemplateRequest:
    """One request of a ResourceClaimTemplate: its name, whole GPUs (0: not NVIDIA's class), selectors."""

    name: str
    gpus: int
    selectors: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class TemplateDemand:
    """What one claim made from a ResourceClaimTemplate asks, request by request."""

    requests: tuple[TemplateRequest, ...]
    constrained: bool = False
    """It has ``spec.spec.devices.constraints`` (tying its requests' devices together)."""

    @property
    def gpus(self) -> int:
        return sum(r.gpus for r in self.requests)


def read_template(obj: dict[str, Any]) -> TemplateDemand:
    """A ResourceClaimTemplate's requests read (an :class:`InputError` names the field that is wrong).

    The one reader of templates: the planner counts :attr:`TemplateDemand.gpus`
    and the controller moves the same requests onto its claims.
    """
    field_path = "spec.spec.devices.requests"
    devices = get_map(obj, "spec.spec.devices")
    out: list[TemplateRequest] = []
    for where, entry in mappings(get_list(obj, field_path), obj=obj, field=field_path):
        name = as_str(entry.get("name"), obj=obj, field=f"{where}.name")
        if any(r.name == name for r in out):
            raise InputError(f"request name {name!r} appears twice", obj=describe(obj), field=f"{where}.name")
        gpus = _request_gpus(entry, obj=obj, where=where)
        exactly = entry.get("exactly")
        raw = exactly.get("selectors") if gpus and isinstance(exactly, dict) else None
        selectors = tuple(dict(s) for _, s in mappings(raw, obj=obj, field=f"{where}.exactly.selectors"))
        out.append(TemplateRequest(name=name, gpus=gpus, selectors=selectors))
    return TemplateDemand(requests=tuple(out), constrained=bool(devices.get("constraints")))


def template_gpus(obj: dict[str, Any]) -> int:
    """Whole GPUs one claim made from a ResourceClaimTemplate takes (0 when it asks for none)."""
    return read_template(obj).gpus


@dataclass(frozen=True)
class ClaimTemplates:
    """ResourceClaimTemplates by (namespace, name): GPUs a claim of each takes, or why it is unreadable."""

    gpus: dict[tuple[str, str], int] = field(default_factory=dict)
    unreadable: dict[tuple[str, str], str] = field(default_factory=dict)

    def pod_gpus(self, spec: dict[str, Any], *, namespace: str, obj: dict[str, Any], field: str) -> int:
        """Whole GPUs the templates a pod spec's ``resourceClaims`` name take, summed.

        A template that is not in the input or cannot be read is an
        :class:`InputError` naming the pod spec's field.
        """
        total = 0
        where = f"{field}.resourceClaims"
        for path, entry in mappings(spec.get("resourceClaims"), obj=obj, field=where):
            name = as_str(
                entry.get("resourceClaimTemplateName"), obj=obj, field=f"{path}.resourceClaimTemplateName"
            )
            if not name:
                continue
            key = (namespace, name)
            if key in self.unreadable:
                raise InputError(
                    f"names ResourceClaimTemplate {namespace}/{name}, which cannot be read "
                    f"({self.unreadable[key]})",
                    obj=describe(obj),
                    field=f"{path}.resourceClaimTemplateName",
                )
            if key not in self.gpus:
                raise InputError(
                    f"names ResourceClaimTemplate {namespace}/{name}, which is not in the input "
                    "(its GPUs cannot be counted)",
                    obj=describe(obj),
                    field=f"{path}.resourceClaimTemplateName",
                )
            total += self.gpus[key]
        return total


def claim_templates(
    objects: Iterable[dict[str, Any]], problems: list[Unreadable] | None = None
) -> ClaimTemplates:
    """Every ResourceClaimTemplate of ``objects`` read; one that cannot be read goes to ``problems``."""
    out = ClaimTemplates()
    for obj in objects:
        if obj.get("kind") != "ResourceClaimTemplate" or not is_dra_kind(obj):
            continue
        key = (object_namespace(obj), object_name(obj))
        try:
            out.gpus[key] = template_gpus(obj)
        except InputError as exc:
            out.unreadable[key] = f"field {exc.field}: {exc.detail}" if exc.field else exc.detail
            if problems is not None:
                problems.append(Unreadable(obj, exc))
    return out
