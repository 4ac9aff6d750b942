"""The placement record kept on a Workload: what a plan chose for each of its pods.

The controller writes the record to the Workload's ``optsched.io/placement``
annotation *before* our admission check turns Ready (``controller.records``
makes it from a plan); it is read here, below the snapshot reader, because
both sides need it: the controller pins pods from it, and a snapshot of an
admitted workload whose pods do not exist yet holds its capacity where the
record says.

Format (JSON)::

    {"planId": "3f9c...", "podSets": {"workers": [{"index": 0, "node": "h100-001", "gpus": [0, 1]}]}}
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from optsched.model.names import PLACEMENT_ANNOTATION
from optsched.model.placement import PodPlacement


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
    metadata = workload.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    raw = annotations.get(PLACEMENT_ANNOTATION) if isinstance(annotations, dict) else None
    if raw is None:
        return None
    try:
        return PlacementRecord.model_validate(json.loads(raw))
    except (ValueError, TypeError, ValidationError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise RecordError(
            f"annotation {PLACEMENT_ANNOTATION} is not a valid placement record ({first})"
        ) from None
