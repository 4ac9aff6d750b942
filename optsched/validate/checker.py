"""The independent plan checker: an invalid plan is a bug and is never applied.

Everything is re-derived from the snapshot with code of its own (no solver,
no greedy policy, no shared capacity bookkeeping), so a bug in a planner
cannot hide itself here. Only the model's own matching rules (taint
toleration, selector requirements) are reused, because they *are* the
Kubernetes semantics. Every message names the workload, the pod and the node.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from optsched.errors import PlanValidationError
from optsched.model.names import (
    GPU_CORES_RESOURCE,
    GPU_MEM_RESOURCE,
    GPU_RESOURCE,
    HOSTNAME_LABEL,
    PRODUCT_LABEL,
)
from optsched.model.placement import PodPlacement
from optsched.model.plan import Plan, PodSetPlacement
from optsched.model.snapshot import (
    FULL_GPU_MILLI,
    ClusterQueue,
    Node,
    PodSet,
    ResourceFlavor,
    ResourceQuota,
    Snapshot,
    Taint,
    Toleration,
    Workload,
)


def assert_valid(snapshot: Snapshot, plan: Plan) -> None:
    """Raise :class:`PlanValidationError` listing every violation, if there is any."""
    violations = check_plan(snapshot, plan)
    if violations:
        raise PlanValidationError(violations)


def check_plan(snapshot: Snapshot, plan: Plan) -> list[str]:
    """Every hard constraint the plan breaks, in words; empty when the plan is valid."""
    return _Checker(snapshot).run(plan)


@dataclass
class _NodeLoad:
    """What the plan adds on one node."""

    cpu: int = 0
    mem: int = 0
    pods: int = 0
    ext: dict[str, int] = field(default_factory=dict)
    whole: dict[int, str] = field(default_factory=dict)
    """GPU index -> pod that takes it whole."""
    unindexed_whole: int = 0
    share_milli: dict[int, int] = field(default_factory=dict)
    share_mem: dict[int, int] = field(default_factory=dict)
    share_pods: dict[int, list[str]] = field(default_factory=dict)
    unindexed_shares: int = 0


class _Checker:
    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.nodes = {n.name: n for n in snapshot.nodes}
        self.loads: dict[str, _NodeLoad] = {}
        self.charges: dict[tuple[str, str, str], int] = {}
        self.violations: list[str] = []

    def fail(self, message: str) -> None:
        self.violations.append(message)

    def run(self, plan: Plan) -> list[str]:
        pending = {w.key: w for w in self.snapshot.workloads}
        seen: set[str] = set()
        for decision in plan.workloads:
            if decision.name in seen:
                self.fail(f"workload {decision.name}: appears more than once in the plan")
                continue
            seen.add(decision.name)
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
        for key in pending:
            if key not in seen:
                self.fail(f"workload {key}: pending but missing from the plan")
        self.check_nodes()
        self.check_quota()
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
                for resource, amount in _quota_amounts(ps, len(pods)).items():
                    charge_key = (cq.name, flavor.name, resource)
                    self.charges[charge_key] = self.charges.get(charge_key, 0) + amount
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
            offered = _offered(cq, resource) or _offered(cq, "cpu")
            allowed = list(offered)
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
        tolerations = ps.tolerations
        if flavor is not None:
            for label, value in flavor.node_labels.items():
                if node.labels.get(label) != value:
                    self.fail(f"{where}: flavor {flavor.name} needs node label {label}={value}")
            for taint in _not_tolerated(flavor.node_taints, ps.tolerations):
                self.fail(f"{where}: flavor {flavor.name} taint {taint.key}:{taint.effect} not tolerated")
            tolerations = tolerations + flavor.tolerations
        for taint in _not_tolerated(node.taints, tolerations):
            self.fail(f"{where}: node taint {taint.key}={taint.value}:{taint.effect} not tolerated")
        self.book(where, node, ps, pod)
        return node

    def book(self, where: str, node: Node, ps: PodSet, pod: PodPlacement) -> None:
        req = ps.request
        load = self.loads.setdefault(node.name, _NodeLoad())
        load.cpu += req.cpu_milli
        load.mem += req.memory_mib
        load.pods += 1
        for name, amount in req.extended.items():
            load.ext[name] = load.ext.get(name, 0) + amount
        usage = self.snapshot.usage_of(node.name)
        if not req.gpus:
            if pod.gpus:
                self.fail(f"{where}: pod asks for no GPU but is given GPUs {pod.gpus}")
            return
        share = req.gpus == 1 and (req.gpu_milli < FULL_GPU_MILLI or req.gpu_mem_mib > 0)
        if pod.gpus is None:
            if usage.unknown_index_gpus == 0 and not share:
                self.fail(
                    f"{where}: no GPU indices given, though every in-use GPU of the node has a known index"
                )
            if ps.nvlink_required and req.gpus > 1:
                self.fail(f"{where}: NVLink island required but no GPU indices given")
            if share:
                load.unindexed_shares += 1
            else:
                load.unindexed_whole += req.gpus
            return
        gpus = list(pod.gpus)
        if len(gpus) != req.gpus:
            self.fail(f"{where}: given {len(gpus)} GPUs {gpus}, pod asks for {req.gpus}")
        if len(set(gpus)) != len(gpus):
            self.fail(f"{where}: GPU index repeated in {gpus}")
        if not share and usage.unknown_index_gpus:
            self.fail(
                f"{where}: promises GPU indices {gpus}, but {usage.unknown_index_gpus} in-use GPUs "
                "of the node have unknown indices"
            )
        for gpu in sorted(set(gpus)):
            if not 0 <= gpu < node.gpu_count:
                self.fail(f"{where}: GPU {gpu} does not exist (node has {node.gpu_count})")
                continue
            if gpu in node.unhealthy_gpus:
                self.fail(f"{where}: GPU {gpu} is unhealthy")
            used_milli = usage.gpu_milli[gpu] if gpu < len(usage.gpu_milli) else 0
            used_mem = usage.gpu_mem_mib[gpu] if gpu < len(usage.gpu_mem_mib) else 0
            if gpu in load.whole:
                self.fail(f"{where}: GPU {gpu} is also given whole to {load.whole[gpu]}")
                continue
            if share:
                if usage.unknown_index_gpus and used_milli == 0 and used_mem == 0:
                    self.fail(
                        f"{where}: GPU {gpu} looks free but may be held by one of the "
                        f"{usage.unknown_index_gpus} in-use GPUs of unknown index"
                    )
                load.share_milli[gpu] = load.share_milli.get(gpu, 0) + req.gpu_milli
                load.share_mem[gpu] = load.share_mem.get(gpu, 0) + req.gpu_mem_mib
                load.share_pods.setdefault(gpu, []).append(where)
                milli = used_milli + load.share_milli[gpu]
                mem = used_mem + load.share_mem[gpu]
                if milli > FULL_GPU_MILLI:
                    self.fail(f"{where}: GPU {gpu} compute over-committed ({milli}/{FULL_GPU_MILLI} milli)")
                if node.gpu_memory_mib and mem > node.gpu_memory_mib:
                    self.fail(f"{where}: GPU {gpu} memory over-committed ({mem}/{node.gpu_memory_mib} MiB)")
                continue
            if used_milli > 0 or used_mem > 0:
                self.fail(f"{where}: GPU {gpu} is already in use by a running pod")
            if gpu in load.share_pods:
                self.fail(f"{where}: GPU {gpu} is also shared by {load.share_pods[gpu][0]}")
            load.whole[gpu] = f"{ps.name}/{pod.index}"
        if ps.nvlink_required and len(gpus) > 1:
            islands = node.nvlink_islands or tuple((i,) for i in range(node.gpu_count))
            if not any(set(gpus) <= set(island) for island in islands):
                self.fail(f"{where}: GPUs {gpus} are not inside one NVLink island, which the pod requires")

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

    # -- per node capacity --------------------------------------------------------------------

    def check_nodes(self) -> None:
        for name, load in self.loads.items():
            node = self.nodes[name]
            usage = self.snapshot.usage_of(name)
            where = f"node {name}"
            if usage.cpu_milli + load.cpu > node.cpu_milli:
                self.fail(f"{where}: CPU over-committed ({usage.cpu_milli + load.cpu}m of {node.cpu_milli}m)")
            if usage.memory_mib + load.mem > node.memory_mib:
                self.fail(
                    f"{where}: memory over-committed "
                    f"({usage.memory_mib + load.mem} MiB of {node.memory_mib} MiB)"
                )
            if usage.pods + load.pods > node.max_pods:
                self.fail(f"{where}: pod slots over-committed ({usage.pods + load.pods} of {node.max_pods})")
            for resource, amount in sorted(load.ext.items()):
                have = node.extended.get(resource, 0) - usage.extended.get(resource, 0)
                if amount > have:
                    self.fail(
                        f"{where}: {resource} over-committed (plan takes {amount}, {max(0, have)} free)"
                    )
            healthy = [i for i in range(node.gpu_count) if i not in node.unhealthy_gpus]
            in_use = {
                i
                for i in healthy
                if (i < len(usage.gpu_milli) and usage.gpu_milli[i] > 0)
                or (i < len(usage.gpu_mem_mib) and usage.gpu_mem_mib[i] > 0)
            }
            before = len(in_use) + usage.unknown_index_gpus
            taken = len(in_use | set(load.whole) | set(load.share_milli)) + usage.unknown_index_gpus
            taken += load.unindexed_whole
            # A snapshot may already be over-committed; only GPUs the plan adds count against it.
            if taken > len(healthy) and taken > before:
                self.fail(
                    f"{where}: GPUs over-committed: {taken} busy after the plan "
                    f"({usage.unknown_index_gpus} of unknown index in use), {len(healthy)} healthy"
                )
            if load.unindexed_shares:
                free_share = sum(
                    FULL_GPU_MILLI - (usage.gpu_milli[i] if i < len(usage.gpu_milli) else 0)
                    for i in healthy
                    if i not in load.whole
                )
                if free_share - usage.unknown_index_gpus * FULL_GPU_MILLI <= 0:
                    self.fail(
                        f"{where}: GPU shares placed without indices on a node with no free GPU compute"
                    )

    # -- quota --------------------------------------------------------------------------------

    def check_quota(self) -> None:
        queues = {cq.name: cq for cq in self.snapshot.cluster_queues}
        cohort_keys: set[tuple[str, str, str]] = set()
        for (cq_name, flavor, resource), added in sorted(self.charges.items()):
            cq = queues.get(cq_name)
            if cq is None or added <= 0:
                continue
            quota = _quota(cq, flavor, resource)
            if quota is None:
                continue
            before = cq.usage.get(flavor, {}).get(resource, 0)
            after = before + added
            where = f"ClusterQueue {cq_name} flavor {flavor} {resource}"
            if cq.cohort is None:
                if after > quota.nominal:
                    self.fail(
                        f"{where}: plan admits {added} more, usage {after} exceeds nominal {quota.nominal} "
                        "(no cohort to borrow from)"
                    )
                continue
            if quota.borrowing_limit is not None and after > quota.nominal + quota.borrowing_limit:
                self.fail(
                    f"{where}: plan admits {added} more, usage {after} exceeds nominal {quota.nominal} "
                    f"+ borrowing limit {quota.borrowing_limit}"
                )
            cohort_keys.add((cq.cohort, flavor, resource))
        for cohort, flavor, resource in sorted(cohort_keys):
            members = [cq for cq in queues.values() if cq.cohort == cohort]
            slack_before = self._cohort_slack(members, flavor, resource, planned=False)
            slack_after = self._cohort_slack(members, flavor, resource, planned=True)
            if slack_after < min(0, slack_before):
                self.fail(
                    f"cohort {cohort} flavor {flavor} {resource}: members borrow {-slack_after} more than "
                    "the cohort's unused lendable quota after the plan"
                )

    def _cohort_slack(
        self, members: Iterable[ClusterQueue], flavor: str, resource: str, *, planned: bool
    ) -> int:
        slack = 0
        for cq in members:
            quota = _quota(cq, flavor, resource)
            if quota is None:
                continue
            used = cq.usage.get(flavor, {}).get(resource, 0)
            if planned:
                used += self.charges.get((cq.name, flavor, resource), 0)
            lendable = quota.lending_limit if quota.lending_limit is not None else quota.nominal
            slack += max(0, min(lendable, quota.nominal - used)) - max(0, used - quota.nominal)
        return slack


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


def _offered(cq: ClusterQueue, resource: str) -> list[str]:
    for group in cq.resource_groups:
        if resource in group.covered_resources:
            return [f.name for f in group.flavors]
    return []


def _quota(cq: ClusterQueue, flavor: str, resource: str) -> ResourceQuota | None:
    for group in cq.resource_groups:
        if resource not in group.covered_resources:
            continue
        for flavor_quota in group.flavors:
            if flavor_quota.name == flavor:
                return next((r for r in flavor_quota.resources if r.name == resource), None)
    return None


def _quota_amounts(ps: PodSet, pods: int) -> dict[str, int]:
    """What ``pods`` pods of ``ps`` count against quota, per Kueue resource name."""
    req = ps.request
    share = req.gpus == 1 and (req.gpu_milli < FULL_GPU_MILLI or req.gpu_mem_mib > 0)
    out = {"cpu": req.cpu_milli * pods, "memory": req.memory_mib * pods, "pods": pods}
    if req.gpus:
        out[GPU_RESOURCE] = req.gpus * pods
        if req.gpu_mem_mib:
            out[GPU_MEM_RESOURCE] = req.gpu_mem_mib * req.gpus * pods
        if share:
            out[GPU_CORES_RESOURCE] = (req.gpu_milli // 10) * req.gpus * pods
    for name, amount in req.extended.items():
        out[name] = out.get(name, 0) + amount * pods
    return out
