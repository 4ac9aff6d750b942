"""The facts that decide whether Kueue could admit a Workload at all, before any quota or node.

Kueue admits a Workload only through an existing, active LocalQueue that points
at an existing, active ClusterQueue whose ``namespaceSelector`` selects the
Workload's namespace; a ClusterQueue is active only while it is not stopped and
every ResourceFlavor and AdmissionCheck it names exists (and each check is
active). These values hold exactly the parts of the queue objects, Namespaces
and AdmissionChecks that this rule reads, as the snapshot source listed them;
:mod:`optsched.kueue.admissibility` applies the rule.

``kinds`` records which of those kinds the source held at all: a dump without a
single LocalQueue says nothing about whether a LocalQueue is missing, so a
reference to a kind the source did not list is never read as "missing".
"""

from __future__ import annotations

from pydantic import Field

from optsched.model.names import NAMESPACE_NAME_LABEL
from optsched.model.snapshot import Frozen, SelectorRequirement


class LabelSelector(Frozen):
    """A Kubernetes label selector: every ``matchLabels`` pair and every expression must hold."""

    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: tuple[SelectorRequirement, ...] = ()

    @property
    def empty(self) -> bool:
        """``{}``: selects everything."""
        return not self.match_labels and not self.match_expressions

    @property
    def keys(self) -> frozenset[str]:
        """The label keys the selector's answer depends on."""
        return frozenset(self.match_labels) | {r.key for r in self.match_expressions}

    def matches(self, labels: dict[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.match_labels.items()) and all(
            r.matches(labels) for r in self.match_expressions
        )

    def describe(self) -> str:
        """The selector as a person writes it: ``team=a, tier in (gold,silver)``."""
        parts = [f"{k}={v}" for k, v in sorted(self.match_labels.items())]
        for r in self.match_expressions:
            values = f" ({','.join(r.values)})" if r.values else ""
            parts.append(f"{r.key} {r.operator}{values}")
        return ", ".join(parts) or "{}"


class ActiveCondition(Frozen):
    """A ``status.conditions[]`` entry of type ``Active``, as its controller wrote it."""

    status: str
    reason: str = ""
    message: str = ""

    @property
    def inactive(self) -> bool:
        return self.status == "False"


class ClusterQueueState(Frozen):
    """What of a ClusterQueue decides admissibility (its flavors and checks are on the snapshot's)."""

    name: str
    namespace_selector: LabelSelector | None = None
    """None when the field is absent: Kueue reads a nil selector as selecting no namespace."""
    stop_policy: str = "None"
    terminating: bool = False
    """``metadata.deletionTimestamp`` is set."""
    active: ActiveCondition | None = None


class LocalQueueState(Frozen):
    namespace: str
    name: str
    cluster_queue: str = ""
    stop_policy: str = "None"
    terminating: bool = False

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class AdmissionCheckState(Frozen):
    name: str
    controller_name: str = ""
    active: ActiveCondition | None = None


class AdmissionFacts(Frozen):
    """Queue objects, flavors, checks and namespaces by name, and which of these kinds the source held."""

    kinds: frozenset[str] = frozenset()
    """Of LocalQueue, ClusterQueue, ResourceFlavor, AdmissionCheck and Namespace: those listed at all."""
    cluster_queues: dict[str, ClusterQueueState] = Field(default_factory=dict)
    local_queues: dict[str, LocalQueueState] = Field(default_factory=dict)
    """By ``namespace/name``."""
    flavors: frozenset[str] = frozenset()
    admission_checks: dict[str, AdmissionCheckState] = Field(default_factory=dict)
    namespaces: dict[str, dict[str, str]] = Field(default_factory=dict)
    """Namespace name -> its labels, the implicit ``kubernetes.io/metadata.name`` included."""

    def holds(self, kind: str) -> bool:
        return kind in self.kinds

    def local_queue(self, namespace: str, name: str) -> LocalQueueState | None:
        return self.local_queues.get(f"{namespace}/{name}")

    def namespace_labels(self, namespace: str) -> dict[str, str] | None:
        """The namespace's labels, or None where the source holds no Namespace object for it."""
        return self.namespaces.get(namespace)


def implicit_namespace_labels(namespace: str) -> dict[str, str]:
    """The label the API server puts on every Namespace: known even without the Namespace object."""
    return {NAMESPACE_NAME_LABEL: namespace}
