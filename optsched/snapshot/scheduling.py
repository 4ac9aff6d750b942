"""Node-selection parts of a pod spec: taints, tolerations, node affinity."""

from __future__ import annotations

from typing import Any

from optsched.errors import InputError
from optsched.model.snapshot import NodeSelectorTerm, SelectorRequirement, Taint, Toleration
from optsched.snapshot.fields import describe

_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def parse_taints(raw: Any, *, obj: dict[str, Any], field: str) -> tuple[Taint, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InputError("expected a list of taints", obj=describe(obj), field=field)
    taints = []
    for number, item in enumerate(raw):
        where = f"{field}[{number}]"
        if not isinstance(item, dict) or "key" not in item:
            raise InputError("a taint needs a key", obj=describe(obj), field=where)
        effect = item.get("effect")
        if effect not in _EFFECTS:
            raise InputError(
                f"effect must be one of {', '.join(_EFFECTS)}, got {effect!r}",
                obj=describe(obj),
                field=f"{where}.effect",
            )
        taints.append(Taint(key=str(item["key"]), value=str(item.get("value") or ""), effect=effect))
    return tuple(taints)


def parse_tolerations(raw: Any, *, obj: dict[str, Any], field: str) -> tuple[Toleration, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InputError("expected a list of tolerations", obj=describe(obj), field=field)
    out = []
    for number, item in enumerate(raw):
        if not isinstance(item, dict):
            raise InputError("a toleration must be a mapping", obj=describe(obj), field=f"{field}[{number}]")
        operator = item.get("operator") or "Equal"
        if operator not in ("Equal", "Exists"):
            raise InputError(
                f"operator must be Equal or Exists, got {operator!r}",
                obj=describe(obj),
                field=f"{field}[{number}].operator",
            )
        out.append(
            Toleration(
                key=item.get("key") or None,
                operator=operator,
                value=None if item.get("value") is None else str(item["value"]),
                effect=item.get("effect") or None,
            )
        )
    return tuple(out)


def parse_required_affinity(
    spec: dict[str, Any], *, obj: dict[str, Any], field: str
) -> tuple[NodeSelectorTerm, ...]:
    """``affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms``."""
    node_affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms_raw = required.get("nodeSelectorTerms") or []
    if not isinstance(terms_raw, list):
        raise InputError("nodeSelectorTerms must be a list", obj=describe(obj), field=field)
    terms = []
    for number, term in enumerate(terms_raw):
        exprs = []
        for index, expr in enumerate((term or {}).get("matchExpressions") or []):
            where = f"{field}.nodeSelectorTerms[{number}].matchExpressions[{index}]"
            operator = expr.get("operator") if isinstance(expr, dict) else None
            if not isinstance(expr, dict) or "key" not in expr or operator not in _OPERATORS:
                raise InputError(
                    f"needs a key and an operator in {', '.join(_OPERATORS)}", obj=describe(obj), field=where
                )
            exprs.append(
                SelectorRequirement(
                    key=expr["key"], operator=operator, values=tuple(str(v) for v in expr.get("values") or ())
                )
            )
        for index, expr in enumerate((term or {}).get("matchFields") or []):
            if isinstance(expr, dict) and expr.get("key") == "metadata.name":
                exprs.append(
                    SelectorRequirement(
                        key="kubernetes.io/hostname",
                        operator=expr.get("operator", "In"),
                        values=tuple(str(v) for v in expr.get("values") or ()),
                    )
                )
            else:
                raise InputError(
                    "only matchFields on metadata.name are supported",
                    obj=describe(obj),
                    field=f"{field}.nodeSelectorTerms[{number}].matchFields[{index}]",
                )
        terms.append(NodeSelectorTerm(match_expressions=tuple(exprs)))
    return tuple(terms)


def extended_resource_tolerations(spec: dict[str, Any]) -> tuple[Toleration, ...]:
    """The tolerations Kubernetes' ExtendedResourceToleration admission plugin adds to such a pod.

    For every extended resource a container or init container requests (a
    name with a domain outside ``kubernetes.io``, e.g. ``nvidia.com/gpu`` or
    ``nvidia.com/mig-1g.10gb``), the pod tolerates ``NoSchedule`` taints with
    that key, whatever their value. Limits count as requests: the API server
    defaults an extended resource's request to its limit before admission.
    Managed clusters (GKE among them) taint GPU nodes ``nvidia.com/gpu`` and
    rely on this, so Workload templates never carry the toleration.
    """
    names: set[str] = set()
    for key in ("containers", "initContainers"):
        containers = spec.get(key)
        for container in containers if isinstance(containers, list) else ():
            resources = container.get("resources") if isinstance(container, dict) else None
            if not isinstance(resources, dict):
                continue
            for part in ("requests", "limits"):
                values = resources.get(part)
                if isinstance(values, dict):
                    names.update(str(name) for name in values if _is_extended(str(name)))
    return tuple(Toleration(key=name, operator="Exists", effect="NoSchedule") for name in sorted(names))


def _is_extended(name: str) -> bool:
    """Kubernetes' rule: a domain-prefixed name outside ``kubernetes.io``, not a quota ``requests.`` name."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")
