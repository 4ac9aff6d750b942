"""Reading what Kueue's admissibility rule needs from raw objects, and applying the rule to a snapshot.

LocalQueues, ClusterQueues, ResourceFlavors, AdmissionChecks and Namespaces
are read into :class:`~optsched.model.admission.AdmissionFacts`: names, stop
policies, ``Active`` conditions, namespace selectors and labels. Reading is
tolerant on purpose: an object is counted as existing as soon as it has a name,
and a field that cannot be read gives a warning naming the object and field
and the reading that keeps today's plan (a selector that cannot be read selects
every namespace, a stop policy that cannot be read is ``None``), because Kueue's
own validation makes such objects impossible in a real cluster.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from optsched.errors import InputError
from optsched.kueue import workload_status as ws
from optsched.kueue.admissibility import hold_inadmissible
from optsched.kueue.workload_status import map_or_empty
from optsched.model.admission import (
    ActiveCondition,
    AdmissionCheckState,
    AdmissionFacts,
    ClusterQueueState,
    LabelSelector,
    LocalQueueState,
    implicit_namespace_labels,
)
from optsched.model.names import KUEUE_GROUP, KUEUE_STOP_POLICIES
from optsched.model.snapshot import SelectorRequirement, Snapshot
from optsched.snapshot.fields import describe, string_map
from optsched.snapshot.reading import api_group

KUEUE_ADMISSION_KINDS = ("LocalQueue", "ClusterQueue", "ResourceFlavor", "AdmissionCheck")
_LABEL_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def with_admissibility(
    snapshot: Snapshot, objects: Iterable[dict[str, Any]], *, own_checks: Iterable[str] = ()
) -> Snapshot:
    """``snapshot`` with the Workloads Kueue could not admit held, judged against ``objects``."""
    facts, warnings = admission_facts(objects, source=snapshot.source)
    return hold_inadmissible(snapshot, facts, own_checks=own_checks, warnings=warnings)


def admission_facts(
    objects: Iterable[dict[str, Any]], *, source: str = ""
) -> tuple[AdmissionFacts, list[str]]:
    """The admission facts of ``objects`` (other kinds ignored), and a warning per unreadable field."""
    reader = _Reader(source)
    for obj in objects:
        kind = str(obj.get("kind", ""))
        name = _name(obj)
        if name is None or not _of_kind(obj, kind):
            continue
        reader.kinds.add(kind)
        if kind == "LocalQueue":
            lq = reader.local_queue(obj, name)
            reader.local_queues[lq.key] = lq
        elif kind == "ClusterQueue":
            reader.cluster_queues[name] = reader.cluster_queue(obj, name)
        elif kind == "ResourceFlavor":
            reader.flavors.add(name)
        elif kind == "AdmissionCheck":
            reader.checks[name] = reader.admission_check(obj, name)
        else:
            reader.namespaces[name] = reader.namespace_labels(obj, name)
    facts = AdmissionFacts(
        kinds=frozenset(reader.kinds),
        cluster_queues=reader.cluster_queues,
        local_queues=reader.local_queues,
        flavors=frozenset(reader.flavors),
        admission_checks=reader.checks,
        namespaces=reader.namespaces,
    )
    return facts, reader.warnings


def _name(obj: dict[str, Any]) -> str | None:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) and name else None


def _of_kind(obj: dict[str, Any], kind: str) -> bool:
    """A Kueue kind of Kueue's API group, or a core ``v1`` Namespace."""
    group = api_group(obj)
    if kind in KUEUE_ADMISSION_KINDS:
        return group == KUEUE_GROUP
    return kind == "Namespace" and group == ""


class _Reader:
    """Collects the facts and the warnings of one read."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.kinds: set[str] = set()
        self.cluster_queues: dict[str, ClusterQueueState] = {}
        self.local_queues: dict[str, LocalQueueState] = {}
        self.flavors: set[str] = set()
        self.checks: dict[str, AdmissionCheckState] = {}
        self.namespaces: dict[str, dict[str, str]] = {}
        self.warnings: list[str] = []

    def warn(self, obj: dict[str, Any], field: str, problem: str, reading: str) -> None:
        error = InputError(f"{problem}; {reading}", source=self.source, obj=describe(obj), field=field)
        self.warnings.append(str(error))

    def stop_policy(self, obj: dict[str, Any]) -> str:
        raw = map_or_empty(obj.get("spec")).get("stopPolicy")
        if raw is None:
            return "None"
        if raw not in KUEUE_STOP_POLICIES:
            expected = ", ".join(KUEUE_STOP_POLICIES)
            self.warn(obj, "spec.stopPolicy", f"expected one of {expected}, got {raw!r}", "read as None")
            return "None"
        return str(raw)

    def local_queue(self, obj: dict[str, Any], name: str) -> LocalQueueState:
        cluster_queue = map_or_empty(obj.get("spec")).get("clusterQueue")
        return LocalQueueState(
            namespace=str(ws.meta(obj).get("namespace") or "default"),
            name=name,
            cluster_queue=cluster_queue if isinstance(cluster_queue, str) else "",
            stop_policy=self.stop_policy(obj),
            terminating=bool(ws.meta(obj).get("deletionTimestamp")),
        )

    def cluster_queue(self, obj: dict[str, Any], name: str) -> ClusterQueueState:
        spec = map_or_empty(obj.get("spec"))
        selector: LabelSelector | None = None
        if spec.get("namespaceSelector") is not None:
            try:
                selector = label_selector(spec["namespaceSelector"], obj=obj, field="spec.namespaceSelector")
            except InputError as exc:
                self.warn(obj, exc.field, exc.detail, "read as {} (every namespace selected)")
                selector = LabelSelector()
        return ClusterQueueState(
            name=name,
            namespace_selector=selector,
            stop_policy=self.stop_policy(obj),
            terminating=bool(ws.meta(obj).get("deletionTimestamp")),
            active=active_condition(obj),
        )

    def admission_check(self, obj: dict[str, Any], name: str) -> AdmissionCheckState:
        controller = map_or_empty(obj.get("spec")).get("controllerName")
        return AdmissionCheckState(
            name=name,
            controller_name=controller if isinstance(controller, str) else "",
            active=active_condition(obj),
        )

    def namespace_labels(self, obj: dict[str, Any], name: str) -> dict[str, str]:
        try:
            labels = string_map(ws.meta(obj).get("labels"), obj=obj, field="metadata.labels")
        except InputError as exc:
            self.warn(obj, exc.field, exc.detail, "read with no labels but its name")
            labels = {}
        return {**labels, **implicit_namespace_labels(name)}


def active_condition(obj: dict[str, Any]) -> ActiveCondition | None:
    """The object's ``Active`` condition; None where there is none (or the list cannot be read)."""
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    for cond in conditions if isinstance(conditions, list) else []:
        if isinstance(cond, dict) and cond.get("type") == "Active" and isinstance(cond.get("status"), str):
            return ActiveCondition(
                status=cond["status"],
                reason=str(cond.get("reason") or ""),
                message=str(cond.get("message") or ""),
            )
    return None


def label_selector(raw: Any, *, obj: dict[str, Any], field: str) -> LabelSelector:
    """A ``metav1.LabelSelector``; an error names the field that is not one."""
    if not isinstance(raw, dict):
        raise InputError(
            "expected a label selector (matchLabels, matchExpressions)", obj=describe(obj), field=field
        )
    labels = string_map(raw.get("matchLabels"), obj=obj, field=f"{field}.matchLabels")
    expressions = raw.get("matchExpressions") or []
    if not isinstance(expressions, list):
        raise InputError("expected a list", obj=describe(obj), field=f"{field}.matchExpressions")
    return LabelSelector(
        match_labels=labels,
        match_expressions=tuple(
            _requirement(expr, obj=obj, field=f"{field}.matchExpressions[{number}]")
            for number, expr in enumerate(expressions)
        ),
    )


def _requirement(raw: Any, *, obj: dict[str, Any], field: str) -> SelectorRequirement:
    operator = raw.get("operator") if isinstance(raw, dict) else None
    if not isinstance(raw, dict) or not isinstance(raw.get("key"), str) or operator not in _LABEL_OPERATORS:
        expected = ", ".join(_LABEL_OPERATORS)
        raise InputError(f"needs a key and an operator in {expected}", obj=describe(obj), field=field)
    values = raw.get("values") or []
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise InputError("values must be a list of strings", obj=describe(obj), field=f"{field}.values")
    if (operator in ("In", "NotIn")) != bool(values):
        need = "needs values" if operator in ("In", "NotIn") else "takes no values"
        raise InputError(f"operator {operator} {need}", obj=describe(obj), field=f"{field}.values")
    return SelectorRequirement(key=raw["key"], operator=operator, values=tuple(values))
