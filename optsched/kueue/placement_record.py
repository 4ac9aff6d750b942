"""The placement record kept on a Workload: what a plan chose for each of its pods.

The controller writes the record to the Workload's ``optsched.io/placement``
annotation *before* our admission check turns Ready (``controller.records``
makes it from a plan); it is read here, below the snapshot reader, because
both sides need it: the controller pins pods from it, and a snapshot of an
admitted workload whose pods do not exist yet holds its capacity where the
record says.

Format (JSON)::

    {"planId": "v2-3f9c...", "flavors": {"workers": "h100"},
     "podSets": {"workers": [{"index": 0, "node": "h100-001", "gpus": [0, 1]}]}}

Compatible both ways across versions, since two replicas of different
versions may hold the Lease in turn during a rolling update or a rollback:

* fields a newer version adds are ignored (slots are cut to the fields a
  reader knows), so an older reader reads this record too; ``plannedAt`` and
  the slots' ``gpuUUIDs``, ``enforcement`` and ``nodeOrder`` were added so;
* a plan id starting ``v2-`` is a digest of the Workload's uid and the slots
  (:func:`plan_id_of`), ``v3-`` the same covering the slots' GPU UUIDs too:
  a record whose slots were edited no longer matches it and is not trusted.
  Ids of another scheme (older ones have no prefix, a newer one another
  ``vN-``) are trusted as read, which is why UUIDs got a scheme of their own;
* a record whose JSON would exceed :data:`MAX_ANNOTATION_BYTES` is stored
  compressed (``zlib:`` then base64), which only this version reads: a gang
  of tens of thousands of pods then still fits the API server's 256 KiB for
  all annotations; one that would not fit even so is refused before it is
  written.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import zlib
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from optsched.model.names import PLACEMENT_ANNOTATION
from optsched.model.placement import PodPlacement


class _Record(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True, extra="ignore")


PLAN_ID_SCHEME = "v2-"
"""Prefix of plan ids of slots without GPU UUIDs (the ids older versions make and verify)."""
PLAN_ID_SCHEME_UUIDS = "v3-"
"""Prefix of plan ids that cover GPU UUIDs too. A new scheme, so an older version (which trusts ids
of schemes it does not know, as read) never mistakes such a record for an altered ``v2-`` one."""
PLAN_ID_SCHEMES = (PLAN_ID_SCHEME, PLAN_ID_SCHEME_UUIDS)
"""The schemes this version makes and verifies."""
MAX_ANNOTATION_BYTES = 200 * 1024
"""The largest record written: the API server allows 256 KiB for all of an object's annotations.
A record whose JSON is larger is stored compressed."""
COMPRESS_ABOVE_BYTES = MAX_ANNOTATION_BYTES
_COMPRESSED = "zlib:"


def plan_id_of(uid: str, pod_sets: Iterable[tuple[str, Iterable[PodPlacement]]]) -> str:
    """A deterministic id for one placement of one workload: same uid and slots, same id.

    Deterministic so that re-running a cycle after a crash rewrites the same
    record instead of producing a second one; canonical (PodSets and slots
    sorted) so a reader can recompute it; a label value (<= 63 chars).
    """
    listed = [(name, list(pods)) for name, pods in pod_sets]
    named = any(p.gpu_uuids is not None for _, pods in listed for p in pods)
    scheme = PLAN_ID_SCHEME_UUIDS if named else PLAN_ID_SCHEME
    slots = sorted((name, sorted(_slot_key(p, named) for p in pods)) for name, pods in listed)
    digest = hashlib.sha256(json.dumps([scheme, uid, slots]).encode()).hexdigest()
    return scheme + digest[:20]


def _slot_key(pod: PodPlacement, named: bool) -> tuple[object, ...]:
    """What of a slot its plan id covers: index, node, GPU indices, and (``v3-``) the GPU UUIDs, the
    devices a ResourceClaim will select."""
    key: tuple[object, ...] = (pod.index, pod.node, pod.gpus or ())
    return (*key, pod.gpu_uuids) if named else key


class PlacementRecord(_Record):
    plan_id: str = Field(min_length=1, max_length=63)
    pod_sets: dict[str, tuple[PodPlacement, ...]] = Field(default_factory=dict)
    flavors: dict[str, str] = Field(default_factory=dict)
    planned_at: float = 0.0
    """When the plan was made (seconds since the epoch): on a device-plugin node, pods of older records
    get their GPUs first, as the later plan assumed they would."""

    def verified(self, uid: str) -> bool:
        """The plan id matches the Workload's uid and these slots (true of ids of another scheme)."""
        if not self.plan_id.startswith(PLAN_ID_SCHEMES):
            return True
        return self.plan_id == plan_id_of(uid, self.pod_sets.items())

    def to_annotation(self) -> str:
        """The annotation value: JSON, compressed when large (may exceed :data:`MAX_ANNOTATION_BYTES`)."""
        text = json.dumps(
            self.model_dump(mode="json", by_alias=True, exclude_defaults=False),
            separators=(",", ":"),
            sort_keys=True,
        )
        if len(text) <= COMPRESS_ABOVE_BYTES:
            return text
        return _COMPRESSED + base64.b64encode(zlib.compress(text.encode(), 9)).decode()

    def slots(self, pod_set: str) -> tuple[PodPlacement, ...]:
        return self.pod_sets.get(pod_set, ())

    @property
    def pod_count(self) -> int:
        return sum(len(slots) for slots in self.pod_sets.values())


class RecordError(ValueError):
    """The annotation is present but unusable; the message says why."""


_SLOT_FIELDS = frozenset(field.alias or name for name, field in PodPlacement.model_fields.items())
"""A slot's fields as written (``index``, ``node``, ``gpus``, ``gpuUUIDs``, ...)."""


def _known_slot_fields(data: Any) -> Any:
    """The record with each slot cut to the fields this version reads (a newer one may add some)."""
    if not isinstance(data, dict) or not isinstance(data.get("podSets"), dict):
        return data
    pod_sets = {
        name: [{k: v for k, v in s.items() if k in _SLOT_FIELDS} if isinstance(s, dict) else s for s in slots]
        if isinstance(slots, list)
        else slots
        for name, slots in data["podSets"].items()
    }
    return {**data, "podSets": pod_sets}


def _decompressed(raw: str) -> str:
    """The JSON of a compressed record; refuses anything that inflates past a sane bound."""
    inflater = zlib.decompressobj()
    text = inflater.decompress(base64.b64decode(raw[len(_COMPRESSED) :], validate=True), 64 * 1024 * 1024)
    if inflater.unconsumed_tail:
        raise ValueError("compressed record inflates beyond 64 MiB")
    return text.decode()


def record_of(workload: Mapping[str, Any]) -> PlacementRecord | None:
    """The record on a raw Workload; None if absent; :class:`RecordError` if malformed."""
    metadata = workload.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    raw = annotations.get(PLACEMENT_ANNOTATION) if isinstance(annotations, dict) else None
    if raw is None:
        return None
    try:
        text = _decompressed(raw) if isinstance(raw, str) and raw.startswith(_COMPRESSED) else raw
        return PlacementRecord.model_validate(_known_slot_fields(json.loads(text)))
    except (ValueError, TypeError, ValidationError, zlib.error, binascii.Error) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise RecordError(
            f"annotation {PLACEMENT_ANNOTATION} is not a valid placement record ({first})"
        ) from None
