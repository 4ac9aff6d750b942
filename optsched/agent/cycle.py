"""One agent pass over one node: discover, judge health, read held devices, move MIG, say what to publish.

:class:`NodeAgent` keeps what must outlive a pass (sticky GPU health, drift
already reported, whether an interrupted MIG apply was looked for) and turns a
:class:`NodeView` (what the API server says about the node) into a
:class:`NodeReport` (what to write back). It touches the GPUs through its
backend and never the API server, so the whole pass runs in tests.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from optsched.agent.backend import GpuBackend
from optsched.agent.claim_held import claim_holdings
from optsched.agent.devices import Discovery, XidEvent
from optsched.agent.drift import Drift, find_drift, held_indices, planned_indices
from optsched.agent.health import HEALTHY, GpuHealth, critical_events, next_health
from optsched.agent.held import HeldDevices
from optsched.agent.islands import islands
from optsched.agent.mig_apply import recover
from optsched.agent.mig_step import MigOutcome, mig_step
from optsched.agent.mig_users import holders
from optsched.agent.podresources import PodDevices
from optsched.agent.publish import (
    advertised_resources,
    device_index,
    gfd_labels,
    gpus_view,
    pods_view,
    topology_annotation,
)
from optsched.agent.resource_slices import SliceWrite, devices, is_dra_node, slice_write
from optsched.agent.simulated import simulated_pcie_root
from optsched.model.events import Event, EventType


@dataclass(frozen=True)
class NodeView:
    """What the API server says about one node this pass."""

    node: Mapping[str, Any]
    node_gpus: Mapping[str, Any] | None
    pods: tuple[Mapping[str, Any], ...] = ()
    resource_slice: Mapping[str, Any] | None = None
    """The node's ``gpu.nvidia.com`` ResourceSlice (read only for simulated nodes)."""
    claims: tuple[Mapping[str, Any], ...] = ()
    """The ResourceClaims with GPUs allocated on the node (read only for simulated nodes)."""

    @property
    def name(self) -> str:
        return str((self.node.get("metadata") or {}).get("name", ""))


@dataclass(frozen=True)
class NodeReport:
    """Everything to publish for one node after one pass."""

    node: str
    annotation: str
    labels: dict[str, str]
    status: dict[str, Any]
    resources: tuple[dict[str, str], dict[str, str]] | None
    events: tuple[Event, ...]
    drift: tuple[Drift, ...]
    xids: tuple[XidEvent, ...]
    discovery_seconds: float
    mig: MigOutcome | None
    unhealthy: tuple[int, ...]
    ignored_xids: frozenset[int] = frozenset()
    resource_slice: SliceWrite | None = None
    """What to do with the node's ResourceSlice; None where the agent never writes one (real nodes)."""


def _meta(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    meta = (obj or {}).get("metadata")
    return meta if isinstance(meta, dict) else {}


def _part(obj: Mapping[str, Any] | None, key: str) -> Mapping[str, Any]:
    value = (obj or {}).get(key)
    return value if isinstance(value, dict) else {}


def seeded_health(status: Mapping[str, Any], discovery: Discovery) -> dict[int, GpuHealth]:
    """Unhealthy GPUs already published: a restarted agent keeps them unhealthy (the XID is not undone).

    Matched by UUID, not index: a replaced board or a renumbering never marks
    another GPU unhealthy. Deleting the node's ``NodeGPUs`` clears the memory.
    """
    index_of = {g.uuid: g.index for g in discovery.gpus}
    out: dict[int, GpuHealth] = {}
    gpus = status.get("gpus")
    for gpu in gpus if isinstance(gpus, list) else []:
        health = gpu.get("health") if isinstance(gpu, dict) else None
        index = index_of.get(str(gpu.get("uuid"))) if isinstance(gpu, dict) else None
        if isinstance(health, dict) and health.get("state") == "Unhealthy" and index is not None:
            out[index] = GpuHealth("Unhealthy", str(health.get("reason", "")))
    return out


@dataclass
class NodeAgent:
    """The long-lived state of the agent for one node."""

    node: str
    backend: GpuBackend
    held_source: HeldDevices
    backend_name: str
    journal: Path | None
    simulated: bool = False
    ignored_xids: frozenset[int] = frozenset()
    health: dict[int, GpuHealth] | None = None
    reported_drift: set[tuple[str, str, tuple[int, ...]]] = field(default_factory=set)
    recovered: bool = False
    recovery_said: str = ""
    """The last recovery message sent as an Event: a restore retried every pass is reported once."""

    def _recover(self, view: NodeView) -> list[Event]:
        """An apply a crash interrupted is rolled back before anything is read (retried while it fails)."""
        if self.recovered or self.journal is None:
            return []
        result = recover(self.backend.mig, self.journal)
        self.recovered = not self.journal.exists()
        if result is None or result.message == self.recovery_said:
            return []
        self.recovery_said = result.message
        reason = "MIGLayoutRolledBack" if result.rolled_back else "MIGRestoreFailed"
        return [self._node_event(view, reason, result.message)]

    def _discover(self) -> tuple[Discovery, float]:
        started = time.perf_counter()
        discovery = self.backend.discover()
        return discovery, time.perf_counter() - started

    def _judge_health(self, view: NodeView, discovery: Discovery) -> tuple[list[XidEvent], list[Event]]:
        if self.health is None:
            self.health = seeded_health(_part(view.node_gpus, "status"), discovery)
        xids = self.backend.xid_events()
        before = self.health
        self.health = next_health(before, critical_events(xids, self.ignored_xids), len(discovery.gpus))
        events = []
        for index, now in sorted(self.health.items()):
            if now.state == "Unhealthy" and before.get(index, HEALTHY).state != "Unhealthy":
                uuid = next((g.uuid for g in discovery.gpus if g.index == index), "")
                events.append(
                    self._node_event(
                        view,
                        "GPUUnhealthy",
                        f"GPU {index} ({uuid}) is unhealthy: {now.reason}; optsched places nothing new on it",
                    )
                )
        return xids, events

    def _node_event(
        self, view: NodeView, reason: str, message: str, kind: EventType = EventType.WARNING
    ) -> Event:
        return Event("Node", "v1", "", self.node, str(_meta(view.node).get("uid", "")), reason, message, kind)

    def _drift(
        self, view: NodeView, held: list[PodDevices], discovery: Discovery
    ) -> tuple[list[Drift], list[Event]]:
        planned = {}
        uids = {}
        for pod in view.pods:
            meta = _meta(pod)
            key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
            indices = planned_indices(pod)
            if indices is not None:
                planned[key] = indices
                uids[key] = str(meta.get("uid", ""))
        found = find_drift(planned, held_indices(held, device_index(discovery)))
        giver = "kube-scheduler allocated its claims" if self.dra(view) else "the device plugin gave"
        events = []
        for d in found:
            seen = (d.namespace, d.name, d.held)
            if seen in self.reported_drift:
                continue
            self.reported_drift.add(seen)
            events.append(
                Event(
                    "Pod",
                    "v1",
                    d.namespace,
                    d.name,
                    uids.get((d.namespace, d.name), ""),
                    "GPUDrift",
                    f"planned GPUs {_csv(d.planned)} (optsched.io/gpus) on {self.node}, but {giver} "
                    f"GPUs {_csv(d.held)}; the next plan counts the GPUs it really holds",
                )
            )
        return found, events

    def dra(self, view: NodeView) -> bool:
        """A simulated DRA node: its GPUs go out through a ResourceSlice, not a device plugin."""
        return self.simulated and is_dra_node(view.node)

    def _held(self, view: NodeView, discovery: Discovery, unhealthy: frozenset[int]) -> list[PodDevices]:
        if self.dra(view):
            return claim_holdings(self.node, view.pods, view.claims, discovery)
        return self.held_source.held(view.pods, _part(view.node_gpus, "status"), discovery, unhealthy)

    def cycle(self, view: NodeView) -> NodeReport:
        """One pass; raises BackendError when the GPUs cannot be read at all (the runner reports it)."""
        recovered = self._recover(view)
        discovery, seconds = self._discover()
        xids, events = self._judge_health(view, discovery)
        events.extend(recovered)
        assert self.health is not None
        unhealthy = frozenset(i for i, h in self.health.items() if h.state == "Unhealthy")
        held = self._held(view, discovery, unhealthy)
        mig = None
        if self.journal is not None:
            mig = mig_step(self, view, discovery, held, rolled_back=bool(recovered))
            events.extend(self._node_event(view, e.reason, e.message, e.type) for e in mig.events)
            if mig.changed:
                discovery, _ = self._discover()
                held = self._held(view, discovery, unhealthy)
        drift, drift_events = self._drift(view, held, discovery)
        events.extend(drift_events)
        return self._report(view, discovery, held, seconds, xids, mig, drift, events)

    def _report(
        self,
        view: NodeView,
        discovery: Discovery,
        held: list[PodDevices],
        seconds: float,
        xids: list[XidEvent],
        mig: MigOutcome | None,
        drift: list[Drift],
        events: list[Event],
    ) -> NodeReport:
        assert self.health is not None
        groups = islands(len(discovery.gpus), discovery.nvlinks, discovery.nvswitch)
        status: dict[str, Any] = {
            "backend": self.backend_name,
            "driverVersion": discovery.driver_version,
            "nvlinkIslands": [list(g) for g in groups],
            "gpus": gpus_view(
                discovery, groups, self.health, frozenset(holders(held, discovery, view.pods).instances)
            ),
            "pods": pods_view(held, discovery),
        }
        if mig is not None and mig.status is not None:
            status["migLayout"] = mig.status.as_dict()
        return NodeReport(
            node=self.node,
            annotation=topology_annotation(discovery, groups, self.health),
            labels=gfd_labels(discovery, _meta(view.node).get("labels") or {}),
            status=status,
            resources=self._resources(view, discovery),
            events=tuple(events),
            drift=tuple(drift),
            xids=tuple(xids),
            discovery_seconds=seconds,
            mig=mig,
            unhealthy=tuple(sorted(i for i, h in self.health.items() if h.state == "Unhealthy")),
            ignored_xids=self.ignored_xids,
            resource_slice=self._slice(view, discovery),
        )

    def _resources(
        self, view: NodeView, discovery: Discovery
    ) -> tuple[dict[str, str], dict[str, str]] | None:
        """Device-plugin capacity on a simulated node; none on a DRA node (its GPUs are in the slice)."""
        if not self.simulated:
            return None
        assert self.health is not None
        return ({}, {}) if self.dra(view) else advertised_resources(discovery, self.health)

    def _slice(self, view: NodeView, discovery: Discovery) -> SliceWrite | None:
        if not self.simulated:
            return None
        assert self.health is not None
        unhealthy = {i for i, h in self.health.items() if h.state == "Unhealthy"}
        wanted = devices(discovery, unhealthy, simulated_pcie_root) if self.dra(view) else None
        uid = str(_meta(view.node).get("uid", ""))
        return slice_write(self.node, uid, view.resource_slice, wanted)


def _csv(indices: tuple[int, ...]) -> str:
    return ",".join(str(i) for i in indices) or "none"
