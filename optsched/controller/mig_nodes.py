"""Each node's MIG layout requests as the controller acts on them: the spec, the agent's answer, our record.

The controller carries a planned layout change out by writing
``NodeGPUs.spec.migLayout``; the node agent answers in ``status.migLayout``
(one state for the whole object, Pending | Applying | Success | Failed, with the
generation it answers) and reports each GPU's instances in ``status.gpus``.

Which workloads a change was written for is kept on the same object, in the
annotation ``optsched.io/mig-changes``, written in the same patch as the spec
entry, so the two never disagree and a restarted controller knows which
changes are its own and whom they serve. Its format::

    {"changes": [{"gpu": 0, "to": [{"profile": "3g.40gb", "start": 4}],
                  "for": {"team/notebook": "<workload uid>"}, "writtenAt": 1767225600.0,
                  "failedGeneration": 0}]}

A change without a record (a person wrote the spec, or the record is
unreadable) is never touched by the controller. Pure: raw objects in, values out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from optsched.model.names import MIG_PREFIX, NODE_GPUS_KIND

MIG_CHANGES_ANNOTATION = "optsched.io/mig-changes"

Layout = tuple[tuple[str, int], ...]
"""``(profile, start)`` pairs in start order: the value two layouts are compared by."""


def layout_of(instances: Any) -> Layout | None:
    """A layout from ``[{profile, start}, ...]``; None where it cannot be read."""
    if not isinstance(instances, list):
        return None
    pairs = []
    for item in instances:
        if not isinstance(item, dict):
            return None
        profile, start = item.get("profile"), item.get("start")
        if not isinstance(profile, str) or isinstance(start, bool) or not isinstance(start, int):
            return None
        pairs.append((profile, start))
    return tuple(sorted(pairs, key=lambda p: (p[1], p[0])))


def as_instances(layout: Layout) -> list[dict[str, Any]]:
    return [{"profile": p, "start": s} for p, s in layout]


def shown(layout: Layout) -> str:
    """``3g.40gb@4, 1g.10gb@0`` as a person reads a layout; ``empty`` for none."""
    return ", ".join(f"{p}@{s}" for p, s in layout) or "empty"


@dataclass(frozen=True)
class ChangeRecord:
    """One layout change the controller wrote, and the workloads (``namespace/name`` -> uid) it serves."""

    gpu: int
    to: Layout
    workloads: Mapping[str, str] = field(default_factory=dict)
    written_at: float = 0.0
    """Epoch seconds of the write."""
    failed_generation: int = 0
    """The generation whose failure was already reported (0: none)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu,
            "to": as_instances(self.to),
            "for": dict(sorted(self.workloads.items())),
            "writtenAt": self.written_at,
            "failedGeneration": self.failed_generation,
        }


def records_annotation(records: Iterable[ChangeRecord]) -> str | None:
    """The annotation value for ``records`` (None: remove the annotation)."""
    items = sorted(records, key=lambda r: r.gpu)
    if not items:
        return None
    return json.dumps({"changes": [r.as_dict() for r in items]}, sort_keys=True, separators=(",", ":"))


def _record(item: Any) -> ChangeRecord | None:
    if not isinstance(item, dict):
        return None
    gpu, to, served = item.get("gpu"), layout_of(item.get("to")), item.get("for")
    at, failed = item.get("writtenAt", 0.0), item.get("failedGeneration", 0)
    if isinstance(gpu, bool) or not isinstance(gpu, int) or to is None or not isinstance(served, dict):
        return None
    if not isinstance(at, int | float) or not isinstance(failed, int):
        return None
    workloads = {str(k): str(v) for k, v in served.items()}
    return ChangeRecord(gpu=gpu, to=to, workloads=workloads, written_at=float(at), failed_generation=failed)


def parse_records(value: object) -> tuple[dict[int, ChangeRecord], str | None]:
    """The records in the annotation by GPU index, and why they cannot be read (None: they can)."""
    if not value:
        return {}, None
    if not isinstance(value, str):
        return {}, f"annotation {MIG_CHANGES_ANNOTATION}: expected a string"
    try:
        raw = json.loads(value)
    except ValueError as exc:
        return {}, f"annotation {MIG_CHANGES_ANNOTATION} is not JSON ({exc})"
    items = raw.get("changes") if isinstance(raw, dict) else None
    if not isinstance(items, list):
        return {}, f'annotation {MIG_CHANGES_ANNOTATION}: expected {{"changes": [...]}}'
    out: dict[int, ChangeRecord] = {}
    for number, item in enumerate(items):
        record = _record(item)
        if record is None:
            return {}, f"annotation {MIG_CHANGES_ANNOTATION}: changes[{number}] cannot be read"
        out[record.gpu] = record
    return out, None


@dataclass(frozen=True)
class MigNode:
    """One ``NodeGPUs`` object as the MIG rules read it, with what its Node advertises."""

    name: str
    uid: str = ""
    resource_version: str = ""
    generation: int = 0
    spec: Mapping[int, Layout] | None = None
    """``spec.migLayout`` by GPU index; None when absent."""
    spec_problem: str | None = None
    """Why ``spec.migLayout`` cannot be read: the controller then never rewrites it."""
    state: str = ""
    message: str = ""
    observed_generation: int = 0
    current: Mapping[int, Layout] = field(default_factory=dict)
    """Each MIG-enabled GPU's instances as the agent reports them."""
    uuids: Mapping[int, str] = field(default_factory=dict)
    records: Mapping[int, ChangeRecord] = field(default_factory=dict)
    record_problem: str | None = None
    advertised: Mapping[str, int] = field(default_factory=dict)
    """The Node's allocatable ``nvidia.com/mig-<profile>`` counts."""
    heartbeat: float | None = None
    """When the agent last published (``status.heartbeat``, epoch seconds); None if unreadable."""

    @property
    def answered(self) -> bool:
        """The agent's state answers the spec as it stands now."""
        return self.observed_generation == self.generation and bool(self.state)

    @property
    def failed(self) -> bool:
        return self.answered and self.state == "Failed"

    @property
    def applying(self) -> bool:
        """The agent said ``Applying``, for this generation or an earlier one: it may be changing GPUs
        now (it publishes again only once the apply is over), so nothing it works on is taken back."""
        return self.state == "Applying"

    def silent(self, now: float, limit: float) -> bool:
        """The agent's last publication (``status.heartbeat``) is more than ``limit`` seconds old."""
        return self.heartbeat is not None and now - self.heartbeat > limit

    def desired(self, gpu: int) -> Layout | None:
        return (self.spec or {}).get(gpu)

    def now(self, gpu: int) -> Layout:
        return self.current.get(gpu, ())

    def advertises(self, layout: Layout) -> bool:
        """The Node advertises at least as many instances of each profile as its GPUs report."""
        counts: dict[str, int] = {}
        for gpu_layout in self.current.values():
            for profile, _ in gpu_layout:
                counts[profile] = counts.get(profile, 0) + 1
        return all(self.advertised.get(p, 0) >= counts.get(p, 0) for p, _ in layout)


def _spec(obj: Mapping[str, Any]) -> tuple[dict[int, Layout] | None, str | None]:
    raw = (obj.get("spec") or {}).get("migLayout") if isinstance(obj.get("spec"), dict) else None
    if raw is None:
        return None, None
    if not isinstance(raw, list):
        return None, "spec.migLayout: expected a list of {gpu, instances}"
    out: dict[int, Layout] = {}
    for number, entry in enumerate(raw):
        gpu = entry.get("gpu") if isinstance(entry, dict) else None
        layout = layout_of(entry.get("instances", [])) if isinstance(entry, dict) else None
        if isinstance(gpu, bool) or not isinstance(gpu, int) or layout is None or gpu in out:
            return None, f"spec.migLayout[{number}]: expected {{gpu, instances}} with a GPU listed once"
        out[gpu] = layout
    return out, None


def _gpus(obj: Mapping[str, Any]) -> tuple[dict[int, Layout], dict[int, str]]:
    status = obj.get("status") if isinstance(obj.get("status"), dict) else {}
    current: dict[int, Layout] = {}
    uuids: dict[int, str] = {}
    listed = status.get("gpus") if isinstance(status, dict) else None
    for entry in listed if isinstance(listed, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("index"), int):
            continue
        mig = entry.get("mig")
        if isinstance(mig, dict) and mig.get("enabled") is True:
            current[entry["index"]] = layout_of(mig.get("instances") or []) or ()
        uuids[entry["index"]] = str(entry.get("uuid") or "")
    return current, uuids


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _advertised(node: Mapping[str, Any] | None) -> dict[str, int]:
    status = (node or {}).get("status")
    allocatable = status.get("allocatable") if isinstance(status, dict) else None
    out = {}
    for key, value in allocatable.items() if isinstance(allocatable, dict) else []:
        if isinstance(key, str) and key.startswith(MIG_PREFIX):
            try:
                out[key.removeprefix(MIG_PREFIX)] = int(str(value))
            except ValueError:
                continue
    return out


def read_mig_node(obj: Mapping[str, Any], node: Mapping[str, Any] | None = None) -> MigNode:
    """One NodeGPUs object (and its Node, for the slices it advertises), read tolerantly."""
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    spec, spec_problem = _spec(obj)
    status = obj.get("status") if isinstance(obj.get("status"), dict) else {}
    state = (status or {}).get("migLayout")
    state = state if isinstance(state, dict) else {}
    current, uuids = _gpus(obj)
    annotations = meta.get("annotations") if isinstance(meta.get("annotations"), dict) else {}
    records, record_problem = parse_records((annotations or {}).get(MIG_CHANGES_ANNOTATION))
    return MigNode(
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        resource_version=str(meta.get("resourceVersion", "")),
        generation=_int(meta.get("generation")),
        spec=spec,
        spec_problem=spec_problem,
        state=str(state.get("state", "")),
        message=str(state.get("message", "")),
        observed_generation=_int(state.get("observedGeneration")),
        current=current,
        uuids=uuids,
        records=records,
        record_problem=record_problem,
        advertised=_advertised(node),
        heartbeat=_when((status or {}).get("heartbeat")),
    )


def _when(value: object) -> float | None:
    """An RFC 3339 timestamp as epoch seconds; None where it does not parse."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("name", "")) if isinstance(meta, dict) else ""


def mig_nodes(objects: Iterable[Mapping[str, Any]]) -> dict[str, MigNode]:
    """Every NodeGPUs object of the read, by node name, with its Node's advertised slices."""
    listed = [o for o in objects if isinstance(o, Mapping)]
    nodes = {_name(o): o for o in listed if o.get("kind") == "Node"}
    return {
        _name(obj): read_mig_node(obj, nodes.get(_name(obj)))
        for obj in listed
        if obj.get("kind") == NODE_GPUS_KIND and _name(obj)
    }
