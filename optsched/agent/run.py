"""The agent's edge to the API server: read the nodes it serves, run their passes, write what changed.

One process serves one node (the DaemonSet) or many simulated ones (tests,
demos, the 1,000-node benchmark). Each pass lists the Nodes, the ``NodeGPUs``
objects and the bound pods once, runs every node's :class:`NodeAgent` pass,
and writes only what differs from what the cluster already holds (the
heartbeat is refreshed every ``heartbeat_s``). One node's failure is counted,
logged and retried next pass; it never stops the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from optsched.agent.backend import BackendError
from optsched.agent.claim_held import claims_on
from optsched.agent.cycle import NodeAgent, NodeReport, NodeView
from optsched.agent.health import APPLICATION_XIDS
from optsched.agent.metrics import AgentMetrics
from optsched.agent.objects import node_gpus_skeleton
from optsched.agent.resource_slices import RESOURCE_SLICES, SliceAction, slice_name
from optsched.kube.client import ApiError, Client
from optsched.kube.writer import Writer
from optsched.model.names import (
    DRA_GPU_DRIVER,
    GPU_RESOURCE,
    GPU_TOPOLOGY_ANNOTATION,
    NODE_GPUS_API,
    NODE_GPUS_PLURAL,
    RESOURCE_API,
)

log = logging.getLogger("optsched.agent")
TERMINAL = "status.phase!=Succeeded,status.phase!=Failed"

AgentFactory = Callable[[Mapping[str, Any]], NodeAgent | None]
"""Builds the agent for a Node object, or None when this process does not serve that node."""


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _stamp(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def without_nulls(value: Any) -> Any:
    """The value as the server keeps it after a merge patch, where ``null`` removes a key."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


class AgentRunner:
    def __init__(
        self,
        client: Client,
        writer: Writer,
        factory: AgentFactory,
        metrics: AgentMetrics,
        *,
        nodes: tuple[str, ...] = (),
        heartbeat_s: float = 60.0,
        simulated: bool = False,
    ) -> None:
        self.client = client
        self.writer = writer
        self.factory = factory
        self.metrics = metrics
        self.nodes = nodes
        self.heartbeat_s = heartbeat_s
        self.agents: dict[str, NodeAgent] = {}
        self.beats: dict[str, float] = {}
        self.crd_missing = False
        self.simulated = simulated
        """Simulated nodes: read (and write) their ResourceSlices and the claims allocated on them."""
        self.dra_missing = False

    async def _read(self) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]], dict[str, list[Any]]]:
        """The nodes, their ``NodeGPUs`` by name and their non-terminal pods by node name."""
        if len(self.nodes) == 1:
            nodes = [await self.client.get("v1", "nodes", self.nodes[0])]
            pod_selector = f"spec.nodeName={self.nodes[0]},{TERMINAL}"
        else:
            nodes = await self.client.list("v1", "nodes")
            pod_selector = TERMINAL
        gpus = {_name(o): o for o in await self._node_gpus()}
        pods: dict[str, list[Any]] = {}
        for pod in await self.client.list("v1", "pods", field_selector=pod_selector):
            node = (pod.get("spec") or {}).get("nodeName")
            if node:
                pods.setdefault(str(node), []).append(pod)
        return nodes, gpus, pods

    async def _read_dra(self) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
        """The ``gpu.nvidia.com`` ResourceSlices by node and every ResourceClaim (simulated agents only)."""
        if not self.simulated:
            return {}, []
        try:
            found = await self.client.list(
                RESOURCE_API, RESOURCE_SLICES, field_selector=f"spec.driver={DRA_GPU_DRIVER}"
            )
            claims = await self.client.list(RESOURCE_API, "resourceclaims")
        except ApiError as exc:
            if not exc.not_found:
                raise
            if not self.dra_missing:
                log.warning("the API server does not serve %s: no ResourceSlices for DRA nodes", RESOURCE_API)
            self.dra_missing = True
            return {}, []
        self.dra_missing = False
        slices = {}
        for obj in found:
            node = str((obj.get("spec") or {}).get("nodeName", ""))
            if node and _name(obj) == slice_name(node):
                slices[node] = obj
        return slices, claims

    async def _node_gpus(self) -> list[dict[str, Any]]:
        """Every ``NodeGPUs``; none while the CRD is not installed (the annotation is still published)."""
        try:
            only = f"metadata.name={self.nodes[0]}" if len(self.nodes) == 1 else None
            found = await self.client.list(NODE_GPUS_API, NODE_GPUS_PLURAL, field_selector=only)
        except ApiError as exc:
            if not exc.not_found:
                raise
            if not self.crd_missing:
                log.warning(
                    "the NodeGPUs CRD is not installed (manifests/crd): publishing the annotation only"
                )
            self.crd_missing = True
            return []
        self.crd_missing = False
        return found

    def _agent(self, node: Mapping[str, Any]) -> NodeAgent | None:
        name = _name(node)
        if self.nodes and name not in self.nodes:
            return None
        if name not in self.agents:
            agent = self.factory(node)
            if agent is None:
                return None
            self.agents[name] = agent
        return self.agents[name]

    async def pass_once(self, now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> list[NodeReport]:
        """One pass over every node served; returns the reports (nodes that failed are left out)."""
        started = time.perf_counter()
        nodes, gpus, pods = await self._read()
        slices, claims = await self._read_dra()
        reports = []
        for node in nodes:
            name = _name(node)
            try:
                agent = self._agent(node)
            except BackendError as exc:
                self.metrics.errors.labels(name, "start").inc()
                log.warning("node %s: cannot serve it: %s", name, exc)
                continue
            if agent is None:
                continue
            view = NodeView(
                node,
                gpus.get(name),
                tuple(pods.get(name, ())),
                slices.get(name),
                tuple(claims_on(name, claims)),
            )
            try:
                report = agent.cycle(view)
            except BackendError as exc:
                self.metrics.errors.labels(name, "discover").inc()
                log.warning("node %s: %s", name, exc)
                continue
            except Exception:  # one node's defect must never stop the others: logged, counted, retried
                self.metrics.errors.labels(name, "internal").inc()
                log.exception("node %s: the pass failed", name)
                continue
            try:
                await self._publish(report, view, now())
            except ApiError as exc:
                self.metrics.errors.labels(name, "publish").inc()
                log.warning("node %s: could not publish: %s", name, exc)
                continue
            self._observe(report)
            reports.append(report)
        self.metrics.passed(time.perf_counter() - started)
        return reports

    def _observe(self, report: NodeReport) -> None:
        m = self.metrics
        m.discovery.observe(report.discovery_seconds)
        for gpu in report.status["gpus"]:
            healthy = gpu["health"]["state"] == "Healthy"
            m.gpu_healthy.labels(report.node, str(gpu["index"]), gpu["uuid"]).set(1 if healthy else 0)
        m.unhealthy.labels(report.node).set(len(report.unhealthy))
        for xid in report.xids:
            critical = str(xid.xid not in APPLICATION_XIDS | report.ignored_xids).lower()
            m.xids.labels(report.node, str(xid.gpu_index), str(xid.xid), critical).inc()
        m.drift.labels(report.node).set(len(report.drift))
        new_drift = sum(1 for e in report.events if e.reason == "GPUDrift")
        if new_drift:
            m.drift_found.labels(report.node).inc(new_drift)
        if report.mig is not None and report.mig.status is not None:
            for state in ("Pending", "Applying", "Success", "Failed"):
                m.mig_state.labels(report.node, state).set(1 if report.mig.status.state == state else 0)

    async def _publish(self, report: NodeReport, view: NodeView, at: datetime) -> None:
        await self._publish_node(report, view)
        await self._publish_node_gpus(report, view, at)
        await self._publish_slice(report)
        for event in report.events:
            await self.writer.event(event, at=at)

    async def _publish_node(self, report: NodeReport, view: NodeView) -> None:
        meta = view.node.get("metadata") or {}
        annotations = meta.get("annotations") or {}
        labels = meta.get("labels") or {}
        patch: dict[str, Any] = {}
        if annotations.get(GPU_TOPOLOGY_ANNOTATION) != report.annotation:
            patch["annotations"] = {GPU_TOPOLOGY_ANNOTATION: report.annotation}
        changed_labels = {k: v for k, v in report.labels.items() if labels.get(k) != v}
        if changed_labels:
            patch["labels"] = changed_labels
        if patch:
            await self.writer.merge_patch("v1", "nodes", report.node, {"metadata": patch})
        if report.resources is not None:
            capacity, allocatable = report.resources
            status = view.node.get("status") or {}
            have_c, have_a = status.get("capacity") or {}, status.get("allocatable") or {}
            stale = {
                k: v
                for k, v in have_c.items()
                if (k.startswith("nvidia.com/mig-") or k == GPU_RESOURCE) and k not in capacity
            }
            if (
                any(have_c.get(k) != v for k, v in capacity.items())
                or any(have_a.get(k) != v for k, v in allocatable.items())
                or stale
            ):
                gone = {k: None for k in stale}
                body = {"status": {"capacity": {**gone, **capacity}, "allocatable": {**gone, **allocatable}}}
                await self.writer.merge_patch("v1", "nodes", report.node, body, subresource="status")

    async def _publish_node_gpus(self, report: NodeReport, view: NodeView, at: datetime) -> None:
        if self.crd_missing:
            return
        current = view.node_gpus
        if current is None:
            uid = str((view.node.get("metadata") or {}).get("uid", ""))
            await self.writer.create(NODE_GPUS_API, NODE_GPUS_PLURAL, node_gpus_skeleton(report.node, uid))
        have = dict((current or {}).get("status") or {})
        have.pop("heartbeat", None)
        due = time.monotonic() - self.beats.get(report.node, float("-inf")) >= self.heartbeat_s
        if have == without_nulls(report.status) and not due:
            return
        body = {"status": {**report.status, "heartbeat": _stamp(at)}}
        for key in set(have) - set(report.status):
            body["status"][key] = None
        await self.writer.merge_patch(
            NODE_GPUS_API, NODE_GPUS_PLURAL, report.node, body, subresource="status"
        )
        self.beats[report.node] = time.monotonic()

    async def _publish_slice(self, report: NodeReport) -> None:
        """Create, patch or delete the node's ResourceSlice as the pass decided (simulated nodes only)."""
        write = report.resource_slice
        if write is None or write.action is SliceAction.NONE or self.dra_missing:
            return
        if write.action is SliceAction.DELETE:
            await self.writer.delete(RESOURCE_API, RESOURCE_SLICES, write.name)
        elif write.action is SliceAction.CREATE and write.body is not None:
            await self.writer.create(RESOURCE_API, RESOURCE_SLICES, write.body)
        elif write.body is not None:
            await self.writer.merge_patch(RESOURCE_API, RESOURCE_SLICES, write.name, write.body)


async def run_forever(runner: AgentRunner, interval_s: float, stop: asyncio.Event) -> None:
    """A pass every ``interval_s`` until ``stop`` is set; an unreachable API server is retried."""
    while not stop.is_set():
        try:
            await runner.pass_once()
        except ApiError as exc:
            runner.metrics.errors.labels("", "read").inc()
            log.warning("could not read the cluster: %s", exc)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=interval_s)
