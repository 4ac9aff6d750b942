"""The placement record kept on a Workload: what the plan chose for each of its pods.

The record is written to the Workload's ``optsched.io/placement`` annotation
*before* our admission check turns Ready. Pods only exist after the check is
Ready, so whenever a pod needs pinning its record is already durable: a
controller that crashes between the two writes, or restarts at any point,
finds everything it needs in the cluster itself.

Format (JSON)::

    {"planId": "3f9c...", "podSets": {"workers": [{"index": 0, "node": "h100-001", "gpus": [0, 1]}]}}
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from optsched.model.names import PLACEMENT_ANNOTATION
from optsched.model.placement import PodPlacement
from optsched.model.plan import WorkloadDecision


class _Record(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid")


class PlacementRecord(_Record):
    plan_id: str = Field(min_length=1, max_length=63)
    pod_sets: dict[str, tuple[PodPlacement, ...]] = Field(default_factory=dict)
    flavors: dict[str, str] = Field(default_factory=dict)

    def to_annotation(self) -> str:
        return json.dumps(
            self.model_dump(mode="json", by_alias=True, exclude_defaults=False),
            separators=(",", ":"),
            sort_keys=True,
        )

    def slots(self, pod_set: str) -> tuple[PodPlacement, ...]:
        return self.pod_sets.get(pod_set, ())

    @property
    def pod_count(self) -> int:
        return sum(len(slots) for slots in self.pod_sets.values())


class RecordError(ValueError):
    """The annotation is present but unusable; the message says why."""


def record_of(workload: Mapping[str, Any]) -> PlacementRecord | None:
    """The record on a raw Workload; None if absent; :class:`RecordError` if malformed."""
    annotations = (workload.get("metadata") or {}).get("annotations") or {}
    raw = annotations.get(PLACEMENT_ANNOTATION)
    if raw is None:
        return None
    try:
        return PlacementRecord.model_validate(json.loads(raw))
    except (ValueError, ValidationError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise RecordError(
            f"annotation {PLACEMENT_ANNOTATION} is not a valid placement record ({first})"
        ) from None


def plan_id_for(uid: str, decision: WorkloadDecision) -> str:
    """A deterministic id for one admission of one workload: same placement, same id.

    Deterministic so that re-running a cycle after a crash rewrites the same
    record instead of producing a second one; a label value (<= 63 chars).
    """
    placement = [(ps.name, [(p.index, p.node, p.gpus) for p in ps.pods]) for ps in decision.pod_sets]
    digest = hashlib.sha256(json.dumps([uid, decision.name, placement]).encode()).hexdigest()
    return digest[:20]


def record_from_decision(uid: str, decision: WorkloadDecision) -> PlacementRecord:
    """The record for an admitted workload decision."""
    return PlacementRecord(
        plan_id=plan_id_for(uid, decision),
        pod_sets={ps.name: tuple(sorted(ps.pods, key=lambda p: p.index)) for ps in decision.pod_sets},
        flavors={ps.name: ps.flavor for ps in decision.pod_sets if ps.flavor},
    )
