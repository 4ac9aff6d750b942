"""The pin pass between cycles, pure part: pins and gate lifts from the cached objects, without planning.

Gated pods appear in bursts as Jobs start; pinning them should not wait for
the next cycle's plan. The pass applies the same rules the cycle does for
pins: the node's hostname label, the stamp of when the pin is made, no pins
for a workload whose planned node is gone, NotReady or cordoned (the next
cycle sends it back), and our gate lifted from pods of queues not ours.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from optsched.controller.actions import Decisions
from optsched.controller.inputs import present_nodes
from optsched.controller.node_free import FreeGpus
from optsched.controller.pinning import PodPin, pins_for, ready_records, ungates_for
from optsched.controller.pod_trust import trusted_pod_objects
from optsched.controller.predicted_pins import awaited_slots, busy_nodes, in_node_order, in_plan_order
from optsched.controller.read_back import ReadBack
from optsched.controller.repair import lost_nodes
from optsched.controller.views import WorkloadView, by_plan, pods_of, read_pod, read_workload
from optsched.kueue import workload_status as ks
from optsched.kueue.managed_queues import managed_local_queues
from optsched.model.names import NODE_GPUS_KIND


def pin_pass_decisions(
    objects: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    check_names: Iterable[str],
    *,
    now: datetime,
    dra_claims: bool = True,
) -> Decisions:
    """Pins and gate lifts for the gated ``pods``, given the cached ``objects`` (Workloads, Nodes, queues,
    NodeGPUs, and the pods bound to nodes, which say what GPUs are free now)."""
    listed = list(objects)
    names = tuple(check_names)
    views = [read_workload(dict(w), names, spec=False) for w in listed if w.get("kind") == "Workload"]
    pod_views = [read_pod(p) for p in pods]
    nodes = present_nodes(listed)
    grouped = by_plan(pod_views)
    records = {
        key: view
        for key, view in ready_records(views).items()
        if view.record is not None and not lost_nodes(view.record, pods_of(view, grouped), nodes)
    }
    hostnames = {name: node.hostname for name, node in nodes.items() if node.hostname}
    pins = pins_for(pod_views, records, hostnames=hostnames, now=ks.format_time(now), claims=dra_claims)
    busy = busy_nodes(pod_views, records, ReadBack.of(listed), now=now)
    awaited = awaited_slots(pod_views, records, pins.pins, now=now)
    ordered, waits = in_plan_order(pins.pins, busy, records, awaited, _free_on(pins.pins, listed, views), now)
    return Decisions(
        pins=ordered,
        waiting=pins.waiting + waits,
        ungates=ungates_for(pod_views, managed_local_queues(listed, names)),
    )


def _free_on(
    pins: Iterable[PodPin], listed: Iterable[Mapping[str, Any]], views: Iterable[WorkloadView]
) -> FreeGpus | None:
    """What is free now on the nodes of pins in a node's order only: the pass runs on every pod event,
    so it reads (and trusts the annotations of) no other node's pods; None where no such pin waits."""
    nodes = {pin.slot.node for pin in pins if in_node_order(pin.slot)}
    if not nodes:
        return None
    relevant = [dict(o) for o in listed if _on(o) in nodes]
    return FreeGpus(trusted_pod_objects(relevant, views))


def _on(obj: Mapping[str, Any]) -> str:
    """The node an object is about: a Node's or NodeGPUs' name, a pod's ``spec.nodeName``."""
    if obj.get("kind") == "Pod":
        spec = obj.get("spec")
        node = spec.get("nodeName") if isinstance(spec, dict) else None
    else:
        meta = obj.get("metadata")
        node = (
            meta.get("name")
            if obj.get("kind") in ("Node", NODE_GPUS_KIND) and isinstance(meta, dict)
            else None
        )
    return node if isinstance(node, str) else ""
