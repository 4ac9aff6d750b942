"""Which informer events wake the controller early: the filters over the caches' change stream.

An event never carries state into a decision: it only sets an asyncio Event
(re-plan, pin, reconcile the AdmissionChecks), and the woken pass reads the
caches. Workloads, Nodes and the node agents' NodeGPUs wake a re-plan only when
what the planner reads of them changed, not on every heartbeat or message; the filters forget an
object when it is deleted (a relist hands on deletions it finds as DELETED
events too), so they hold no more than the objects that exist. Pods wake a
re-plan when one that held capacity, or one of ours, goes away or finishes.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from typing import Any

from optsched.controller.views import TERMINAL_PHASES, read_pod
from optsched.kueue import workload_status as ks
from optsched.model.names import GPU_TOPOLOGY_ANNOTATION, NODE_GPUS_KIND, PLACEMENT_ANNOTATION

WatchEvent = Mapping[str, Any]


def pod_is_gated(event: WatchEvent) -> bool:
    """A pod of ours that still holds our gate: pin it now (no need to re-plan)."""
    return event.get("type") != "DELETED" and read_pod(event.get("object") or {}).gated_by_us


def pod_frees_capacity(event: WatchEvent) -> bool:
    """A bound pod, or one of ours, that went away or finished: capacity changed, so re-plan.

    A pod that finishes leaves the informer's field selector, so it usually
    arrives as DELETED; an unbound pod of someone else frees nothing.
    """
    pod = read_pod(event.get("object") or {})
    if pod.node is None and pod.plan_id is None:
        return False
    return event.get("type") == "DELETED" or pod.phase in TERMINAL_PHASES


class WorkloadFilter:
    """Workload watch events that matter: anything but a change of a check's message or a timestamp.

    Every deferral a cycle writes changes its Workload; if that woke a cycle,
    hundreds of waiting workloads would keep the controller planning
    back to back with nothing new to plan. What a plan or a decision reads
    changes with the spec (its generation), the conditions' type, status and
    reason, the admission, the checks' states, the requeue state, the labels
    and the placement record; a change to any of those wakes a cycle.
    """

    def __init__(self) -> None:
        self.seen: dict[tuple[str, str], str] = {}

    def __call__(self, event: WatchEvent) -> bool:
        obj = event.get("object") or {}
        meta = ks.meta(obj)
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        if event.get("type") == "DELETED":
            self.seen.pop(key, None)
            return True
        status = ks.map_or_empty(obj.get("status"))
        facts = {
            "generation": meta.get("generation"),
            "deleting": meta.get("deletionTimestamp") is not None,
            "labels": meta.get("labels"),
            "record": (meta.get("annotations") or {}).get(PLACEMENT_ANNOTATION),
            "conditions": [
                (c.get("type"), c.get("status"), c.get("reason")) for c in _items(status.get("conditions"))
            ],
            "admission": status.get("admission"),
            "checks": [(c.get("name"), c.get("state")) for c in _items(status.get("admissionChecks"))],
            "requeue": status.get("requeueState"),
        }
        fingerprint = json.dumps(facts, sort_keys=True, default=str)
        changed = self.seen.get(key) != fingerprint
        self.seen[key] = fingerprint
        return changed


def _items(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


class NodeFilter:
    """Node watch events that matter: added, deleted, readiness, GPU annotation or labels changed.

    Nodes send frequent status heartbeats; re-planning on each would waste cycles.
    """

    def __init__(self) -> None:
        self.seen: dict[str, tuple[Any, ...]] = {}

    def __call__(self, event: WatchEvent) -> bool:
        node = event.get("object") or {}
        name = str(ks.meta(node).get("name", ""))
        if event.get("type") == "DELETED":
            self.seen.pop(name, None)
            return True
        ready = ks.condition(node, "Ready")
        fingerprint = (
            ready.get("status") if ready else None,
            (node.get("spec") or {}).get("unschedulable"),
            tuple(sorted((ks.meta(node).get("labels") or {}).items())),
            (ks.meta(node).get("annotations") or {}).get(GPU_TOPOLOGY_ANNOTATION),
            tuple(sorted(((node.get("status") or {}).get("allocatable") or {}).items())),
        )
        changed = self.seen.get(name) != fingerprint
        self.seen[name] = fingerprint
        return changed


class NodeGpusFilter:
    """NodeGPUs watch events that matter: added, deleted, or a status change other than the heartbeat.

    The node agent rewrites ``status.heartbeat`` on every report; what the
    planner reads (GPUs, health, islands, the devices pods hold) changes far
    less often. A cluster without the CRD has nothing to watch: the watch
    retries quietly with backoff.
    """

    def __init__(self) -> None:
        self.seen: dict[str, str] = {}

    def __call__(self, event: WatchEvent) -> bool:
        obj = event.get("object") or {}
        name = str(ks.meta(obj).get("name", ""))
        if event.get("type") == "DELETED":
            self.seen.pop(name, None)
            return True
        status = ks.map_or_empty(obj.get("status"))
        facts = {k: v for k, v in status.items() if k != "heartbeat"}
        fingerprint = json.dumps(facts, sort_keys=True, default=str)
        changed = self.seen.get(name) != fingerprint
        self.seen[name] = fingerprint
        return changed


class Triggers:
    """What each kind's cache events wake: a cycle, a pin pass, the AdmissionCheck reconciler."""

    def __init__(
        self, cycle: asyncio.Event, pin: asyncio.Event, checks: Callable[[WatchEvent], None]
    ) -> None:
        self.cycle = cycle
        self.pin = pin
        self.checks = checks
        self.workloads = WorkloadFilter()
        self.nodes = NodeFilter()
        self.node_gpus = NodeGpusFilter()

    def handlers(self) -> dict[str, Callable[[WatchEvent], None]]:
        """A handler per kind, for the informers."""
        return {
            "Workload": self.on_workload,
            "Pod": self.on_pod,
            "Node": self.on_node,
            NODE_GPUS_KIND: self.on_node_gpus,
            "AdmissionCheck": self.checks,
        }

    def on_workload(self, event: WatchEvent) -> None:
        if self.workloads(event):
            self.cycle.set()

    def on_pod(self, event: WatchEvent) -> None:
        if pod_is_gated(event):
            self.pin.set()
        if pod_frees_capacity(event):
            self.cycle.set()

    def on_node(self, event: WatchEvent) -> None:
        if self.nodes(event):
            self.cycle.set()

    def on_node_gpus(self, event: WatchEvent) -> None:
        if self.node_gpus(event):
            self.cycle.set()
            # A pod's devices read back free its node for the next predicted pod.
            self.pin.set()
