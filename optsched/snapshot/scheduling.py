"""Node-selection parts of a pod spec: taints, tolerations, node affinity."""

from __future__ import annotations

from typing import Any

from optsched.errors import InputError
from optsched.model.snapshot import NodeSelectorTerm, SelectorRequirement, Taint, Toleration
from optsched.snapshot.fields import as_list, as_map, as_str, describe, mappings

_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def parse_taints(raw: Any, *, obj: dict[str, Any], field: str) -> tuple[Taint, ...]:
    taints = []
    for where, item in mappings(raw, obj=obj, field=field):
        if "key" not in item:
            raise InputError("a taint needs a key", obj=describe(obj), field=where)
        effect = item.get("effect")
        if effect not in _EFFECTS:
            raise InputError(
                f"effect must be one of {', '.join(_EFFECTS)}, got {effect!r}",
                obj=describe(obj),
                field=f"{where}.effect",
            )
        taints.append(
            Taint(
                key=as_str(item["key"], obj=obj, field=f"{where}.key"),
                value=as_str(item.get("value"), obj=obj, field=f"{where}.value"),
                effect=effect,
            )
        )
    return tuple(taints)


def parse_tolerations(raw: Any, *, obj: dict[str, Any], field: str) -> tuple[Toleration, ...]:
    out = []
    for where, item in mappings(raw, obj=obj, field=field):
        operator = item.get("operator") or "Equal"
        if operator not in ("Equal", "Exists"):
            raise InputError(
                f"operator must be Equal or Exists, got {operator!r}",
                obj=describe(obj),
                field=f"{where}.operator",
            )
        value = item.get("value")
        out.append(
            Toleration(
                key=as_str(item.get("key"), obj=obj, field=f"{where}.key") or None,
                operator=operator,
                value=None if value is None else as_str(value, obj=obj, field=f"{where}.value"),
                effect=as_str(item.get("effect"), obj=obj, field=f"{where}.effect") or None,
            )
        )
    return tuple(out)


def _values(expr: dict[str, Any], *, obj: dict[str, Any], where: str) -> tuple[str, ...]:
    listed = as_list(expr.get("values"), obj=obj, field=f"{where}.values")
    return tuple(as_str(v, obj=obj, field=f"{where}.values[{i}]") for i, v in enumerate(listed))


def _expression(expr: dict[str, Any], *, obj: dict[str, Any], where: str) -> SelectorRequirement:
    operator = expr.get("operator")
    if "key" not in expr or operator not in _OPERATORS:
        raise InputError(
            f"needs a key and an operator in {', '.join(_OPERATORS)}", obj=describe(obj), field=where
        )
    key = as_str(expr["key"], obj=obj, field=f"{where}.key")
    return SelectorRequirement(key=key, operator=operator, values=_values(expr, obj=obj, where=where))


def _field_expression(expr: dict[str, Any], *, obj: dict[str, Any], where: str) -> SelectorRequirement:
    """``matchFields`` on ``metadata.name`` read as the node's hostname label (the only field it supports)."""
    operator = expr.get("operator", "In")
    if expr.get("key") != "metadata.name" or operator not in ("In", "NotIn"):
        raise InputError(
            "only matchFields on metadata.name with In or NotIn are supported", obj=describe(obj), field=where
        )
    return SelectorRequirement(
        key="kubernetes.io/hostname", operator=operator, values=_values(expr, obj=obj, where=where)
    )


def parse_required_affinity(
    spec: dict[str, Any], *, obj: dict[str, Any], field: str
) -> tuple[NodeSelectorTerm, ...]:
    """``affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms``."""
    node_affinity = as_map(
        as_map(spec.get("affinity"), obj=obj, field=field).get("nodeAffinity"),
        obj=obj,
        field=f"{field}.nodeAffinity",
    )
    where = f"{field}.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    required = as_map(
        node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution"), obj=obj, field=where
    )
    terms = []
    for term_where, term in mappings(
        required.get("nodeSelectorTerms"), obj=obj, field=f"{where}.nodeSelectorTerms"
    ):
        exprs = [
            _expression(expr, obj=obj, where=w)
            for w, expr in mappings(
                term.get("matchExpressions"), obj=obj, field=f"{term_where}.matchExpressions"
            )
        ]
        exprs += [
            _field_expression(expr, obj=obj, where=w)
            for w, expr in mappings(term.get("matchFields"), obj=obj, field=f"{term_where}.matchFields")
        ]
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
