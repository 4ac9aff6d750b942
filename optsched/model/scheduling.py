"""Node-selection values shared by nodes, pod sets and flavors: taints, tolerations, selector terms.

Kept apart from the snapshot itself so the queue objects (:mod:`optsched.model.queues`)
and the snapshot can both use them. ``Frozen`` is the base of every snapshot value.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    """Base for snapshot values: immutable, strict about unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Taint(Frozen):
    key: str
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class Toleration(Frozen):
    key: str | None = None
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str | None = None
    effect: str | None = None

    def tolerates(self, taint: Taint) -> bool:
        """kube-scheduler's toleration matching rule."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key is None:
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return (self.value or "") == taint.value


class SelectorRequirement(Frozen):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.operator == "In":
            return present and value in self.values
        if self.operator == "NotIn":
            return not present or value not in self.values
        if self.operator == "Exists":
            return present
        if self.operator == "DoesNotExist":
            return not present
        if not present or value is None or not self.values:
            return False
        try:
            left, right = int(value), int(self.values[0])
        except ValueError:
            return False
        return left > right if self.operator == "Gt" else left < right


class NodeSelectorTerm(Frozen):
    """All requirements must hold (AND); a pod's terms are OR-ed."""

    match_expressions: tuple[SelectorRequirement, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        return all(req.matches(labels) for req in self.match_expressions)
