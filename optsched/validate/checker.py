"""The independent plan checker: an invalid plan is a bug and is never applied.

Everything is re-derived from the snapshot with code of its own (no solver,
no greedy policy, no shared capacity bookkeeping), so a bug in a planner
cannot hide itself here. Only the model's own matching rules (taint
toleration, selector requirements) are reused, because they *are* the
Kubernetes semantics. Every message names the workload, the pod and the node.
Per-node capacity and GPUs are checked in :mod:`~optsched.validate.devices`,
GPU UUIDs and enforcement in :mod:`~optsched.validate.enforcement`, quota in
:mod:`~optsched.validate.quota`, MIG layout changes in :mod:`~optsched.validate.mig`.
"""

from __future__ import annotations

from collections.abc import Iterable

from optsched.errors import PlanValidationError
from optsched.model.names import (
    GPU_RESOURCE,
    HOSTNAME_LABEL,
    PRODUCT_LABEL,
)
from optsched.model.placement import PodPlacement
from optsched.model.plan import Plan, PodSetPlacement
from optsched.model.snapshot import (
    ClusterQueue,
    Node,
    PodSet,
    ResourceFlavor,
    Snapshot,
    Taint,
    Toleration,
    Workload,
)
from optsched.validate.devices import DeviceBook
from optsched.validate.enforcement import UuidBook
from optsched.validate.mig import check_mig_changes, layout_deltas
from optsched.validate.quota import Charges, charge, check_quota, offered


def assert_valid(snapshot: Snapshot, plan: Plan) -> None:
    """Raise :class:`PlanValidationError` listing every violation, if there is any."""
    violations = check_plan(snapshot, plan)
    if violations:
        raise PlanValidationError(violations)


def check_plan(snapshot: Snapshot, plan: Plan) -> list[str]:
    """Every hard constraint the plan breaks, in words; empty when the plan is valid."""
    return _Checker(snapshot).run(plan)


class _Checker:
    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.nodes = {n.name: n for n in snapshot.nodes}
        self.devices = DeviceBook(snapshot)
        self.uuids = UuidBook()
        self.charges: Charges = {}
        self.violations: list[str] = []

    def fail(self, message: str) -> None:
        self.violations.append(message)

    def run(self, plan: Plan) -> list[str]:
        pending = {w.key: w for w in self.snapshot.workloads}
        held = {h.workload.key: h.reason.message for h in self.snapshot.held}
        seen: set[str] = set()
        for decision in plan.workloads:
            if decision.name in seen:
                self.fail(f"workload {decision.name}: appears more than once in the plan")
                continue
            seen.add(decision.name)
            if decision.name in held:
                if decision.decision != "defer" or any(ps.pods for ps in decision.pod_sets):
                    self.fail(
                        f"workload {decision.name}: admitted, but Kueue cannot admit it: "
                        + held[decision.name]
                    )
                continue
            workload = pending.get(decision.name)
            if workload is None:
                verb = "admitted" if decision.decision == "admit" else "deferred"
                self.fail(f"workload {decision.name}: {verb} but not a pending workload of the snapshot")
                continue
            if decision.decision == "defer":
                if any(ps.pods for ps in decision.pod_sets):
                    self.fail(f"workload {decision.name}: deferred but has pods placed")
                continue
            self.check_workload(workload, decision.pod_sets)
        for key in [*pending, *held]:
            if key not in seen:
                self.fail(f"workload {key}: pending but missing from the plan")
        self.violations += check_mig_changes(self.snapshot, plan)
        self.violations += self.devices.check_nodes(layout_deltas(self.snapshot, plan))
        self.violations += check_quota(self.snapshot, self.charges)
        return self.violations

    # -- one admitted workload ----------------------------------------------------------------

    def check_workload(self, workload: Workload, placements: list[PodSetPlacement]) -> None:
        key = workload.key
        by_name: dict[str, PodSetPlacement] = {}
        for placement in placements:
            if placement.name in by_name:
                self.fail(f"workload {key}: pod set {placement.name} listed twice")
                continue
            by_name[placement.name] = placement
        known = {ps.name for ps in workload.pod_sets}
        for name in by_name:
            if name not in known:
                self.fail(f"workload {key}: plan names pod set {name}, which the workload does not have")
        products: set[str] = set()
        mixing_allowed = all(ps.allow_mixed_products for ps in workload.pod_sets if ps.request.gpus)
        cq = self.snapshot.cluster_queue_of(workload)
        for ps in workload.pod_sets:
            chosen = by_name.get(ps.name)
            pods = chosen.pods if chosen is not None else []
            if not ps.needed <= len(pods) <= ps.count:
                self.fail(
                    f"workload {key} pod set {ps.name}: {len(pods)} pods placed, "
                    f"gang needs {ps.needed} to {ps.count}"
                )
            indices = sorted(p.index for p in pods)
            if indices != list(range(len(pods))):
                self.fail(
                    f"workload {key} pod set {ps.name}: pod indices {indices} are not 0..{len(pods) - 1}"
                )
            flavor = self.check_flavor(workload, ps, chosen.flavor if chosen else None, cq)
            for pod in pods:
                node = self.check_pod(workload, ps, pod, flavor)
                if node is not None and ps.request.gpus:
                    products.add(node.gpu_product or node.labels.get(PRODUCT_LABEL, ""))
            self.check_topology(workload, ps, pods, flavor)
            if workload.reservation is None and cq is not None and flavor is not None and pods:
                charge(self.charges, cq.name, flavor.name, ps, len(pods))
        if len(products) > 1 and not mixing_allowed:
            self.fail(f"workload {key}: gang mixes GPU products {', '.join(sorted(products))}")

    def check_flavor(
        self, workload: Workload, ps: PodSet, flavor_name: str | None, cq: ClusterQueue | None
    ) -> ResourceFlavor | None:
        where = f"workload {workload.key} pod set {ps.name}"
        allowed: list[str] = []
        if workload.reservation is not None:
            allowed = sorted(set(workload.reservation.flavors.get(ps.name, {}).values()))
        elif cq is not None:
            resource = GPU_RESOURCE if ps.request.gpus else "cpu"
            allowed = offered(cq, resource) or offered(cq, "cpu")
        if allowed and flavor_name is None:
            self.fail(f"{where}: no ResourceFlavor chosen; allowed: {', '.join(allowed)}")
        elif allowed and flavor_name not in allowed:
            self.fail(f"{where}: flavor {flavor_name} is not allowed here; allowed: {', '.join(allowed)}")
        if flavor_name is None:
            return None
        return self.snapshot.flavor(flavor_name) or ResourceFlavor(name=flavor_name)

    def check_pod(
        self, workload: Workload, ps: PodSet, pod: PodPlacement, flavor: ResourceFlavor | None
    ) -> Node | None:
        where = f"workload {workload.key} pod {ps.name}/{pod.index} on node {pod.node}"
        node = self.nodes.get(pod.node)
        if node is None:
            self.fail(f"{where}: no such node")
            return None
        if not node.ready:
            self.fail(f"{where}: node is not Ready")
        if node.unschedulable:
            self.fail(f"{where}: node is cordoned")
        for label, value in ps.node_selector.items():
            if node.labels.get(label) != value:
                self.fail(f"{where}: nodeSelector {label}={value} not satisfied")
        if ps.affinity_terms and not any(
            all(req.matches(node.labels) for req in term.match_expressions) for term in ps.affinity_terms
        ):
            self.fail(f"{where}: required node affinity not satisfied")
        # The cluster's admission adds tolerations to the pods; Kueue checks flavor taints without them.
        tolerations = ps.tolerations + ps.admission_tolerations
        if flavor is not None:
            for label, value in flavor.node_labels.items():
                if node.labels.get(label) != value:
                    self.fail(f"{where}: flavor {flavor.name} needs node label {label}={value}")
            for taint in _not_tolerated(flavor.node_taints, ps.tolerations):
                self.fail(f"{where}: flavor {flavor.name} taint {taint.key}:{taint.effect} not tolerated")
            tolerations = tolerations + flavor.tolerations
        for taint in _not_tolerated(node.taints, tolerations):
            self.fail(f"{where}: node taint {taint.key}={taint.value}:{taint.effect} not tolerated")
        self.violations += self.devices.book(where, node, ps, pod)
        self.violations += self.uuids.book(where, node, ps, pod)
        return node

    # -- topology -----------------------------------------------------------------------------

    def check_topology(
        self, workload: Workload, ps: PodSet, pods: list[PodPlacement], flavor: ResourceFlavor | None
    ) -> None:
        level = ps.required_topology
        if not level or not pods:
            return
        levels = self.snapshot.topology_levels_for(flavor)
        domains: dict[tuple[str, ...] | None, list[str]] = {}
        for pod in pods:
            node = self.nodes.get(pod.node)
            if node is None:
                continue
            domains.setdefault(_domain(node, levels, level), []).append(pod.node)
        if None in domains:
            self.fail(
                f"workload {workload.key} pod set {ps.name}: node {domains[None][0]} has no {level} label, "
                f"which the pod set requires"
            )
        if len(domains) > 1:
            shown = "; ".join(
                f"{'/'.join(d or ('?',))}: {', '.join(sorted(set(n)))}" for d, n in domains.items()
            )
            self.fail(
                f"workload {workload.key} pod set {ps.name}: pods span {len(domains)} {level} domains "
                f"({shown})"
            )


def _not_tolerated(taints: Iterable[Taint], tolerations: tuple[Toleration, ...]) -> list[Taint]:
    return [
        taint
        for taint in taints
        if taint.effect != "PreferNoSchedule" and not any(t.tolerates(taint) for t in tolerations)
    ]


def _domain(node: Node, levels: tuple[str, ...], level: str) -> tuple[str, ...] | None:
    """Label values from the coarsest level down to ``level`` (a rack is named within its block)."""
    path = levels[: levels.index(level) + 1] if level in levels else (level,)
    values = []
    for label in path:
        value = node.labels.get(label) or (node.name if label == HOSTNAME_LABEL else None)
        if value is None:
            return None
        values.append(value)
    return tuple(values)
