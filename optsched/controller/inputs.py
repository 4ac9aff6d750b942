"""From one cluster read to the planning input: the Snapshot the planner sees, and the views decide needs.

Three jobs, all pure:

* parse every Workload once into a view; a malformed one is reported (and
  never planned) instead of aborting the cycle, so one bad object cannot stop
  the rest of the queue from admitting;
* keep for planning only the workloads optsched decides: those of
  ClusterQueues that require our admission check and whose check is not
  decided yet, holding back (deferred with Kueue's reason) those Kueue
  cannot admit as their queues stand;
* count the *assumed* usage of workloads we admitted whose pods are not bound
  yet (:class:`~optsched.model.snapshot.AssumedPod`, counted like bound pods),
  so the next plan does not hand the same GPUs out twice.

The cluster facts (nodes, bound pods, queue objects) are parsed once, by the
snapshot builder, which leaves out every object it cannot read (and the node
of a bound pod it cannot read) and says which; each becomes a report here, as
does a node whose GPU topology is unusable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from optsched.controller.claim_sweep import OwnedClaim, owned_claims
from optsched.controller.dra_repair import DraState
from optsched.controller.mig_nodes import MigNode, mig_nodes
from optsched.controller.node_free import FreeGpus
from optsched.controller.pod_trust import trusted_pod_objects
from optsched.controller.read_back import ReadBack
from optsched.controller.views import PodView, WorkloadView, by_plan, pods_of, read_pod, read_workload
from optsched.errors import InputError
from optsched.kueue import workload_status as ks
from optsched.kueue.managed_queues import ManagedQueues, managed_local_queues
from optsched.kueue.unreadable_queues import hold_unreadable_queues
from optsched.model.events import Event
from optsched.model.names import DEFAULT_TOPOLOGY_LEVELS, HOSTNAME_LABEL
from optsched.model.snapshot import AssumedPod, CheckState, PodRequest, Snapshot, Workload
from optsched.snapshot.build import snapshot_from_objects
from optsched.snapshot.dedupe import dedupe
from optsched.snapshot.dra_demand import ClaimTemplates, claim_templates
from optsched.snapshot.nodes import parse_node
from optsched.snapshot.queue_state import with_admissibility


@dataclass(frozen=True)
class Report:
    """A problem with one object: logged, and published as a Kubernetes Event on it."""

    kind: str
    namespace: str
    name: str
    uid: str
    api_version: str
    reason: str
    message: str

    @property
    def fingerprint(self) -> tuple[str, str, str]:
        """The same problem on the same object is reported once per controller process."""
        return (self.uid or f"{self.kind}/{self.namespace}/{self.name}", self.reason, self.message)

    def event(self) -> Event:
        return Event(
            kind=self.kind,
            api_version=self.api_version,
            namespace=self.namespace,
            name=self.name,
            uid=self.uid,
            reason=self.reason,
            message=self.message,
        )


def report_for(obj: Mapping[str, Any], reason: str, message: str) -> Report:
    m = ks.meta(obj)
    return Report(
        kind=str(obj.get("kind", "")),
        namespace=str(m.get("namespace") or ""),
        name=str(m.get("name", "")),
        uid=str(m.get("uid", "")),
        api_version=str(obj.get("apiVersion", "")),
        reason=reason,
        message=message,
    )


def _left_out_reports(objects: Sequence[dict[str, Any]], snapshot: Snapshot) -> list[Report]:
    """A report per object the builder left out: unreadable ones, and Nodes it could not plan on."""
    by_key = {(str(o.get("kind", "")), ks.key_of(o)): o for o in objects}
    reports = []
    for item in snapshot.left_out:
        if item.kind == "Workload":
            continue  # reported by its view, which reads it the same way
        obj = by_key.get((item.kind, f"{item.namespace or 'default'}/{item.name}"))
        if obj is not None:
            reports.append(report_for(obj, f"Invalid{item.kind}", item.message))
    reported = {(r.kind, r.name) for r in reports}
    kept = {n.name for n in snapshot.nodes}
    for obj in objects:
        name = str(ks.meta(obj).get("name"))
        if obj.get("kind") == "Node" and name not in kept and ("Node", name) not in reported:
            node, warnings = _parse_node_quietly(obj)
            if node is None:
                reports.append(report_for(obj, "InvalidNode", "; ".join(warnings)))
    return reports


def _parse_node_quietly(obj: dict[str, Any]) -> tuple[object | None, list[str]]:
    try:
        return parse_node(obj)
    except InputError as exc:
        return None, [str(exc)]


def cluster_snapshot(
    objects: Sequence[dict[str, Any]],
    assumed: Sequence[AssumedPod],
    *,
    default_topology_levels: tuple[str, ...] = DEFAULT_TOPOLOGY_LEVELS,
    source: str = "cluster",
) -> tuple[Snapshot, list[Report]]:
    """The snapshot of the cluster facts, and a report per object left out of it."""
    snapshot = snapshot_from_objects(
        objects,
        source=source,
        default_topology_levels=default_topology_levels,
        assumed=assumed,
        judge_admissibility=False,
    )
    return snapshot, _left_out_reports(objects, snapshot)


def assumed_pods(view: WorkloadView, pods: Iterable[PodView]) -> list[AssumedPod]:
    """The planned slots of an admitted workload that no bound pod occupies yet.

    A slot counts as taken by a real pod when a bound pod of the same plan
    carries its index (``optsched.io/pod-index``); bound pods of the plan
    without an index (pinned by someone else) each release one slot, so
    capacity is never counted twice.
    """
    if view.record is None or view.workload is None:
        return []
    requests = {ps.name: ps.request for ps in view.workload.pod_sets}
    bound = [p for p in pods if p.bound]
    out: list[AssumedPod] = []
    for pod_set, slots in view.record.pod_sets.items():
        mine = [p for p in bound if p.pod_set in (pod_set, None)]
        taken = {p.slot_index for p in mine if p.slot_index is not None}
        anonymous = sum(1 for p in mine if p.slot_index is None)
        free = [s for s in slots if s.index not in taken]
        if anonymous:
            free = free[: max(0, len(free) - anonymous)]
        request = requests.get(pod_set, PodRequest())
        out += [
            AssumedPod(workload=view.key, node=s.node, request=request, gpus=s.gpus or None) for s in free
        ]
    return out


def at_reserved_counts(workload: Workload) -> Workload:
    """The workload with each PodSet at exactly the pod count Kueue reserved quota for.

    Kueue fixes the count at reservation (partial admission may reserve
    fewer than ``count``, down to ``minCount``) and starts the job with that
    many pods; a plan with more slots would hold GPUs no pod will use, one
    with fewer would leave pods that never start.
    """
    counts = workload.reservation.counts if workload.reservation is not None else {}
    if not counts:
        return workload
    pod_sets = tuple(
        ps.model_copy(update={"count": counts[ps.name], "min_count": None})
        if counts.get(ps.name, 0) > 0
        else ps
        for ps in workload.pod_sets
    )
    return workload.model_copy(update={"pod_sets": pod_sets})


def managed_queues(snapshot: Snapshot, check_names: Iterable[str]) -> set[str]:
    """ClusterQueues that require one of our admission checks."""
    names = set(check_names)
    return {cq.name for cq in snapshot.cluster_queues if names.intersection(cq.admission_checks)}


@dataclass(frozen=True)
class NodePresence:
    """A listed Node, as the rules about pins need it (read from the raw object, never from its parse)."""

    ready: bool
    cordoned: bool = False
    hostname: str = ""
    """Its ``kubernetes.io/hostname`` label, which may differ from its name."""


@dataclass(frozen=True)
class PlanningInput:
    """What one cycle plans on, and what it needs to decide afterwards."""

    snapshot: Snapshot
    workloads: Mapping[str, WorkloadView]
    """Every Workload by ``namespace/name``, malformed ones included (their ``problem`` says why)."""
    pods: tuple[PodView, ...]
    """Every pod carrying our plan-id label, the queue-name label or our scheduling gate."""
    reports: tuple[Report, ...] = ()
    assumed: int = 0
    """Pods counted as assumed usage."""
    nodes: Mapping[str, NodePresence] = field(default_factory=dict)
    """Every Node listed, by name, including those the snapshot left out."""
    queues: ManagedQueues = field(default_factory=ManagedQueues)
    """Which LocalQueues are ours: pods of the others have our gate lifted."""
    read_back: ReadBack = field(default_factory=ReadBack)
    """The GPUs node agents report each bound pod holds."""
    free: FreeGpus = field(default_factory=lambda: FreeGpus(()))
    """The whole GPUs free now on device-plugin nodes (bound pods only), read on demand."""
    dra: DraState = field(default_factory=DraState)
    """DRA nodes' published GPUs and the devices claims hold."""
    claims: tuple[OwnedClaim, ...] = ()
    """optsched's own ResourceClaims, for the sweep of those whose pod is gone."""
    mig: Mapping[str, MigNode] = field(default_factory=dict)
    """Each NodeGPUs's MIG layout requests, the agent's answer and our record, by node name."""

    @property
    def hostnames(self) -> dict[str, str]:
        """Node name to its ``kubernetes.io/hostname`` label, where the node has one."""
        return {name: node.hostname for name, node in self.nodes.items() if node.hostname}

    @property
    def actionable(self) -> bool:
        """Some workload waits on this cycle's plan; without one there is nothing to plan for."""
        return any(v.awaits_decision for v in self.workloads.values())


_DECIDED = (CheckState.READY, CheckState.RETRY, CheckState.REJECTED)


def _to_plan(view: WorkloadView, managed: set[str]) -> bool:
    """Quota reserved in a queue of ours, and not decided by our check yet.

    Only reserved workloads take capacity in the plan: one Kueue has not
    reserved (admission-gated, stopped queue, in backoff, losing a fair-share
    decision) may never be, and must not push a reserved one out.
    """
    if view.problem is not None or view.lifecycle != ks.Lifecycle.PENDING or not view.holds_quota:
        return False
    if view.topology_assigned:
        return False
    if view.check is not None and view.check.state in _DECIDED:
        return False
    return view.cluster_queue in managed


def _read_workloads(
    raw: Iterable[dict[str, Any]], check_names: tuple[str, ...], templates: ClaimTemplates
) -> tuple[list[WorkloadView], list[Report]]:
    """A view per Workload (GPUs asked through ResourceClaimTemplates counted), and a report for each
    whose spec or record is malformed."""
    local_queues = ks.local_queue_index(raw)
    views: list[WorkloadView] = []
    reports: list[Report] = []
    for obj in raw:
        if obj.get("kind") != "Workload":
            continue
        view = read_workload(obj, check_names, local_queues, templates=templates)
        views.append(view)
        if view.problem:
            reports.append(report_for(obj, "InvalidWorkload", view.problem))
    return views, reports


def _assumed(views: Iterable[WorkloadView], pods: Iterable[PodView]) -> list[AssumedPod]:
    """Assumed usage of every live workload whose check is Ready (its pods may not be bound yet).

    Only while Kueue still holds its quota (or admitted it): a Ready check
    left on a workload Kueue evicted is repaired by ``decide`` and holds nothing.
    """
    plans = by_plan(pods)
    out: list[AssumedPod] = []
    for view in views:
        ready = view.check is not None and view.check.state == CheckState.READY
        reserved = view.holds_quota or view.lifecycle == ks.Lifecycle.ADMITTED
        if view.live and ready and reserved and view.record is not None:
            out += assumed_pods(view, pods_of(view, plans))
    return out


def build_input(
    objects: Iterable[dict[str, Any]],
    check_names: Iterable[str],
    *,
    pods: Iterable[Mapping[str, Any]] = (),
    default_topology_levels: tuple[str, ...] = DEFAULT_TOPOLOGY_LEVELS,
    source: str = "cluster",
) -> PlanningInput:
    """Parse the read once, add assumed usage, select our workloads, build the snapshot.

    ``objects`` are what the snapshot reader listed; ``pods`` every pod with
    our plan-id label (listed apart: a pinned pod not bound yet holds its
    slot, though no capacity).
    """
    names = tuple(check_names)
    # One view per Workload even if the read listed one twice (the builder warns about copies).
    raw, _ = dedupe(objects, ("Workload",))
    views, reports = _read_workloads(raw, names, claim_templates(raw))
    pod_views = tuple(read_pod(p) for p in pods)
    assumed = _assumed(views, pod_views)
    # Pods' own claims of which GPUs they hold count only where optsched pinned them there.
    raw = trusted_pod_objects(raw, views)
    facts = [o for o in raw if o.get("kind") != "Workload"]
    # Workloads go in too: admitted ones give the ClusterQueues' usage and hold the nodes of their
    # pods not bound yet (those we assumed above are skipped); the queue itself comes from the views.
    snapshot, fact_reports = cluster_snapshot(
        raw, assumed, default_topology_levels=default_topology_levels, source=source
    )
    managed = managed_queues(snapshot, names)
    planned = [
        at_reserved_counts(v.workload) for v in views if v.workload is not None and _to_plan(v, managed)
    ]
    # The snapshot's workloads are the ones parsed into views, in Kueue's queue order; those Kueue
    # cannot admit as their queues stand are held (our own checks exist: this controller serves them).
    queued = snapshot.model_copy(update={"workloads": tuple(sorted(planned, key=lambda w: w.queue_key))})
    return PlanningInput(
        snapshot=with_admissibility(hold_unreadable_queues(queued), facts, own_checks=names),
        workloads={v.key: v for v in views},
        pods=pod_views,
        reports=(*fact_reports, *reports),
        assumed=len(assumed),
        nodes=present_nodes(raw),
        queues=managed_local_queues(raw, names),
        read_back=ReadBack.of(raw),
        free=FreeGpus(raw),
        dra=DraState.of(raw),
        claims=owned_claims(raw),
        mig=mig_nodes(raw),
    )


def present_nodes(objects: Iterable[Mapping[str, Any]]) -> dict[str, NodePresence]:
    """Every Node as listed, whether or not the snapshot could plan on it: a node whose annotation
    turned malformed is unplaceable, not gone."""
    out: dict[str, NodePresence] = {}
    for obj in objects:
        if obj.get("kind") != "Node":
            continue
        spec = ks.map_or_empty(obj.get("spec"))
        ready = ks.condition(obj, "Ready")
        out[str(ks.meta(obj).get("name", ""))] = NodePresence(
            ready=ready is not None and ready.get("status") == "True",
            cordoned=spec.get("unschedulable") is True,
            hostname=str(ks.map_or_empty(ks.meta(obj).get("labels")).get(HOSTNAME_LABEL) or ""),
        )
    return out
