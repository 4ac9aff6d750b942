"""Watches that wake the controller early, and the filters that say which events matter.

A watch never carries state into a decision: it only sets an asyncio Event
(re-plan, pin, reconcile the AdmissionChecks), and the woken pass reads the
cluster afresh. Nodes and the node agents' NodeGPUs wake a re-plan only when
what the planner reads of them changed, not on every heartbeat. A dropped
watch reconnects with backoff; the periodic cycle covers whatever it missed
meanwhile.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from optsched.controller.views import TERMINAL_PHASES, read_pod
from optsched.kube.client import Client
from optsched.kueue import workload_status as ks
from optsched.model.names import GPU_TOPOLOGY_ANNOTATION

log = logging.getLogger("optsched.controller")

WatchEvent = Mapping[str, Any]
CHANGES = ("ADDED", "MODIFIED", "DELETED")
MAX_BACKOFF_S = 30.0


async def watch_forever(
    client: Client,
    api_version: str,
    plural: str,
    on_event: Callable[[WatchEvent], None],
    *,
    label_selector: str | None = None,
) -> None:
    """Hand every change event to ``on_event``; reconnect on errors, until cancelled."""
    backoff = 1.0
    while True:
        try:
            async for event in client.watch(api_version, plural, label_selector=label_selector):
                backoff = 1.0
                if event.get("type") in CHANGES:
                    on_event(event)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.debug("watch %s ended: %s", plural, exc)
        await asyncio.sleep(backoff)
        backoff = min(backoff * 2, MAX_BACKOFF_S)


def pod_is_gated(event: WatchEvent) -> bool:
    """A pod of ours that still holds our gate: pin it now (no need to re-plan)."""
    return event.get("type") != "DELETED" and read_pod(event.get("object") or {}).gated_by_us


def pod_frees_capacity(event: WatchEvent) -> bool:
    """A pod of ours that went away or finished: capacity changed, so re-plan."""
    return event.get("type") == "DELETED" or read_pod(event.get("object") or {}).phase in TERMINAL_PHASES


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
