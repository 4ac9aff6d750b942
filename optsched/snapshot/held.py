"""Node capacity held by admitted Workloads whose pods do not run yet.

Between Kueue's admission and the pods' binding, nothing on the nodes shows
the admission: a plan that only counted bound pods would hand the same nodes
out again. Kueue's scheduler assumes such admissions in its cache; this
module does the same for a snapshot, with :class:`AssumedPod`s counted like
bound pods. For each running admitted Workload and each PodSet, the pods
missing are its count less its bound pods (found by Kueue's
``kueue.x-k8s.io/workload`` annotation, optsched's plan-id label, or a shared
owner such as the Job); they are placed where the admission says:

* optsched's placement record: the slots no bound pod has taken, with their GPUs;
* Kueue TAS's ``topologyAssignment``: its domains' pod counts, less the bound
  pods there, on the node each domain names (a ``kubernetes.io/hostname``
  level, or values that match exactly one node), GPU indices unknown;
* otherwise their nodes are unknown: they count against quota only (their
  reservation is in the ClusterQueue's usage), with a warning.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from optsched.kueue.workload_status import list_or_empty, map_or_empty
from optsched.model.admitted import AdmittedWorkload, PodSetAdmission, TopologyAssignment
from optsched.model.names import (
    HOSTNAME_LABEL,
    KUEUE_PODSET_LABEL,
    KUEUE_WORKLOAD_ANNOTATION,
    PLAN_ID_LABEL,
    POD_INDEX_ANNOTATION,
    PODSET_LABEL,
)
from optsched.model.snapshot import AssumedPod, Node


@dataclass(frozen=True)
class _Pod:
    """A bound, non-terminal pod as far as matching it to its Workload goes."""

    key: str
    node: str
    pod_set: str | None
    slot: int | None


class _PodIndex:
    """Bound pods by every key a Workload can be matched on."""

    def __init__(self, pods: Iterable[dict[str, Any]]) -> None:
        self.by_key: dict[tuple[str, str, str], list[_Pod]] = {}
        for obj in pods:
            node = map_or_empty(obj.get("spec")).get("nodeName") if isinstance(obj, dict) else None
            if not node or map_or_empty(obj.get("status")).get("phase") in ("Succeeded", "Failed"):
                continue
            meta = map_or_empty(obj.get("metadata"))
            labels, annotations = map_or_empty(meta.get("labels")), map_or_empty(meta.get("annotations"))
            namespace, name = str(meta.get("namespace") or "default"), str(meta.get("name", ""))
            slot = annotations.get(POD_INDEX_ANNOTATION)
            pod_set = labels.get(PODSET_LABEL) or labels.get(KUEUE_PODSET_LABEL)
            pod = _Pod(
                key=f"{namespace}/{name}",
                node=str(node),
                pod_set=str(pod_set) if pod_set else None,
                slot=int(slot) if isinstance(slot, str) and slot.isascii() and slot.isdigit() else None,
            )
            keys = [("self", namespace, f"Pod/{name}"), ("self", namespace, str(meta.get("uid") or ""))]
            if annotations.get(KUEUE_WORKLOAD_ANNOTATION):
                keys.append(("workload", namespace, str(annotations[KUEUE_WORKLOAD_ANNOTATION])))
            if labels.get(PLAN_ID_LABEL):
                keys.append(("plan", namespace, str(labels[PLAN_ID_LABEL])))
            for ref in list_or_empty(meta.get("ownerReferences")):
                if isinstance(ref, dict):
                    keys.append(("owner", namespace, str(ref.get("uid") or "")))
                    keys.append(("owner", namespace, f"{ref.get('kind')}/{ref.get('name')}"))
            for key in keys:
                if key[2]:
                    self.by_key.setdefault(key, []).append(pod)

    def of(self, workload: AdmittedWorkload) -> list[_Pod]:
        """The workload's bound pods, each once."""
        ns = workload.namespace
        keys = [("workload", ns, workload.name)]
        keys += [("owner", ns, owner) for owner in workload.owners]
        keys += [("self", ns, owner) for owner in workload.owners]
        if workload.plan_id:
            keys.append(("plan", ns, workload.plan_id))
        found: dict[str, _Pod] = {}
        for key in keys:
            for pod in self.by_key.get(key, []):
                found.setdefault(pod.key, pod)
        return list(found.values())


def held_pods(
    admitted: Sequence[AdmittedWorkload],
    pods: Iterable[dict[str, Any]],
    nodes: Mapping[str, Node],
    *,
    skip: Collection[str] = (),
) -> tuple[list[AssumedPod], list[str]]:
    """Assumed pods for the missing pods of every running admitted Workload, and warnings.

    ``skip`` names workloads (``namespace/name``) whose assumed pods the caller
    already has (the controller's own), so nothing is counted twice.
    """
    index = _PodIndex(pods)
    out: list[AssumedPod] = []
    warnings: list[str] = []
    for workload in admitted:
        if not workload.running or workload.key in skip:
            continue
        bound = _by_pod_set(workload, index.of(workload))
        for pod_set in workload.pod_sets:
            held, unknown = _hold(workload, pod_set, bound.get(pod_set.name, []), nodes)
            out += held
            if unknown:
                warnings.append(_unknown_warning(workload, pod_set, unknown))
    return out, warnings


def _by_pod_set(workload: AdmittedWorkload, pods: list[_Pod]) -> dict[str, list[_Pod]]:
    """Bound pods per PodSet; a pod without a PodSet label goes where pods are still missing."""
    names = [ps.name for ps in workload.pod_sets]
    out: dict[str, list[_Pod]] = {name: [] for name in names}
    anonymous = []
    for pod in pods:
        if pod.pod_set in out:
            out[pod.pod_set].append(pod)
        elif len(names) == 1:
            out[names[0]].append(pod)
        else:
            anonymous.append(pod)
    for pod in anonymous:
        short = next((ps for ps in workload.pod_sets if len(out[ps.name]) < ps.count), None)
        if short is not None:
            out[short.name].append(pod)
    return out


def _hold(
    workload: AdmittedWorkload, pod_set: PodSetAdmission, bound: list[_Pod], nodes: Mapping[str, Node]
) -> tuple[list[AssumedPod], int]:
    """The assumed pods of one PodSet, and how many missing pods have no known node."""
    missing = pod_set.count - len(bound)
    if missing <= 0 or pod_set.request is None:
        return [], 0
    request = pod_set.request
    if pod_set.placement is not None:
        taken = {p.slot for p in bound if p.slot is not None}
        free = [s for s in pod_set.placement if s.index not in taken]
        free = free[: max(0, len(free) - sum(1 for p in bound if p.slot is None))][:missing]
        held = [AssumedPod(workload=workload.key, node=s.node, request=request, gpus=s.gpus) for s in free]
        return held, missing - len(held)
    if pod_set.topology is not None:
        per_node = _tas_nodes(pod_set.topology, nodes)
        for pod in bound:
            if per_node.get(pod.node, 0) > 0:
                per_node[pod.node] -= 1
        held = []
        for node, pods in sorted(per_node.items()):
            # A node runs at most max_pods pods: never more assumed pods than that (huge counts).
            pods = min(pods, nodes[node].max_pods, missing - len(held))
            held += [AssumedPod(workload=workload.key, node=node, request=request)] * pods
        return held, missing - len(held)
    return [], missing


def _tas_nodes(topology: TopologyAssignment, nodes: Mapping[str, Node]) -> dict[str, int]:
    """Pods per node for the domains that name exactly one node (others are left out)."""
    out: dict[str, int] = {}
    lowest = topology.levels[-1]
    by_lowest: dict[str, list[Node]] = {}
    for node in nodes.values():
        value = node.labels.get(lowest)
        if value is not None:
            by_lowest.setdefault(value, []).append(node)
    for domain in topology.domains:
        value = domain.values[-1]
        candidates = [
            n
            for n in by_lowest.get(value, [])
            if all(n.labels.get(level) == v for level, v in zip(topology.levels, domain.values, strict=True))
        ]
        if not candidates and lowest == HOSTNAME_LABEL and value in nodes:
            candidates = [nodes[value]]
        if len(candidates) == 1:
            out[candidates[0].name] = out.get(candidates[0].name, 0) + domain.count
    return out


def _unknown_warning(workload: AdmittedWorkload, pod_set: PodSetAdmission, unknown: int) -> str:
    if pod_set.topology is not None:
        why = "its topologyAssignment names no single node for them"
    elif pod_set.placement is not None:
        why = "its placement record has no free slot for them"
    else:
        why = "neither a placement record nor a Kueue topologyAssignment names their nodes"
    return (
        f"Workload {workload.key} is admitted but {unknown} pod(s) of PodSet {pod_set.name} are not among "
        f"the bound pods in the input, and {why}; they count against ClusterQueue "
        f"{workload.cluster_queue} quota only, not against any node's capacity"
    )
