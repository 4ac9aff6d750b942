"""Prometheus metrics of the controller, on a registry of its own (tests build as many as they like).

The endpoint that serves them (with ``/healthz``) is :mod:`optsched.controller.metrics_server`.

Deferrals and releases are labelled with the binding reason's code
(:class:`~optsched.model.reasons.ReasonCode`), never with its words, so a
reworded message cannot change a series.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from optsched.model.plan import Plan, PlanStatus

CYCLE_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120)
SOLVE_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60)


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self._cycle_metrics(self.registry)
        self._plan_metrics(self.registry)
        self._workload_metrics(self.registry)
        self._prediction_metrics(self.registry)
        self._mig_metrics(self.registry)

    def _cycle_metrics(self, r: CollectorRegistry) -> None:
        """How the controller itself runs."""
        self.cycle_seconds = Histogram(
            "optsched_cycle_duration_seconds",
            "Wall time of one read-plan-apply cycle",
            registry=r,
            buckets=CYCLE_BUCKETS,
        )
        self.phase_seconds = Histogram(
            "optsched_cycle_phase_duration_seconds",
            "Wall time of each phase of a cycle (read, build-input, plan, decide, act)",
            ["phase"],
            registry=r,
            buckets=CYCLE_BUCKETS,
        )
        self.errors = Counter("optsched_cycle_errors", "Cycles that failed, by stage", ["stage"], registry=r)
        self.leader = Gauge("optsched_leader", "1 while this replica holds the leader Lease", registry=r)
        self.invalid = Gauge(
            "optsched_invalid_objects",
            "Objects skipped as malformed in the latest cycle",
            ["kind"],
            registry=r,
        )
        self.cached = Gauge(
            "optsched_cached_objects", "Objects held in the informers' caches, by kind", ["kind"], registry=r
        )

    def _plan_metrics(self, r: CollectorRegistry) -> None:
        """What the latest plan achieved."""
        self.solve_seconds = Histogram(
            "optsched_solve_duration_seconds",
            "Planner time inside a cycle",
            registry=r,
            buckets=SOLVE_BUCKETS,
        )
        self.plans = Counter("optsched_plans", "Plans made, by solver status", ["status"], registry=r)
        self.plan_status = Gauge(
            "optsched_plan_status", "1 for the status of the latest plan", ["status"], registry=r
        )
        self.gap = Gauge(
            "optsched_solve_gap", "Relative optimality gap of the latest plan's first stage", registry=r
        )
        self.gpus_allocated = Gauge(
            "optsched_gpus_allocated", "GPUs allocated after the latest plan", registry=r
        )
        self.gpus_total = Gauge("optsched_gpus_total", "Healthy GPUs the latest snapshot saw", registry=r)
        self.island_hit = Gauge(
            "optsched_nvlink_island_hit_ratio",
            "Share of multi-GPU pods of the latest plan placed inside one NVLink island",
            registry=r,
        )
        self.fragmentation = Gauge(
            "optsched_fragmentation_gpus",
            "FGD fragmentation of free GPUs after the latest plan, by product",
            ["product"],
            registry=r,
        )

    def _workload_metrics(self, r: CollectorRegistry) -> None:
        """What the controller did to workloads and pods."""
        self.admitted = Counter(
            "optsched_workloads_admitted", "Workloads whose check was set Ready", registry=r
        )
        self.deferred = Gauge(
            "optsched_workloads_deferred",
            "Workloads deferred in the latest cycle, by binding reason code",
            ["reason"],
            registry=r,
        )
        self.released = Counter(
            "optsched_workloads_released",
            "Deferred workloads sent back (Retry), by binding reason code",
            ["reason"],
            registry=r,
        )
        self.pinned = Counter(
            "optsched_pods_pinned", "Pods pinned to their planned node and ungated", registry=r
        )
        self.pinned_by = Counter(
            "optsched_pods_pinned_by_enforcement",
            "Pods pinned, by what enforces their GPUs (dra, predicted, none)",
            ["enforcement"],
            registry=r,
        )
        self.claims_created = Counter(
            "optsched_claims_created", "ResourceClaims created for pods on DRA nodes", registry=r
        )
        self.claim_conflicts = Counter(
            "optsched_claim_conflicts",
            "Claims found under a pod's claim name that were not its slot's, by what was done "
            "(delete: re-created next pass, wait: being deleted, conflict: re-planned)",
            ["outcome"],
            registry=r,
        )
        self.claims_swept = Counter(
            "optsched_claims_swept", "optsched ResourceClaims deleted because their pod was gone", registry=r
        )
        self.assumed = Gauge(
            "optsched_assumed_pods", "Planned pods counted as usage before they bind", registry=r
        )

    def _prediction_metrics(self, r: CollectorRegistry) -> None:
        """How often NVIDIA's device plugin picked the GPUs optsched predicted (device-plugin nodes)."""
        self.predicted = Gauge(
            "optsched_predicted_pods",
            "Bound pods with predicted GPUs: read back as planned (agreed), other GPUs (drifted), "
            "or not read back yet (unconfirmed)",
            ["state"],
            registry=r,
        )
        self.drift_ratio = Gauge(
            "optsched_prediction_drift_ratio",
            "Of the bound pods with predicted GPUs read back, the share holding other GPUs than planned",
            registry=r,
        )

    def _mig_metrics(self, r: CollectorRegistry) -> None:
        """MIG layout changes the controller carried out on the nodes' NodeGPUs."""
        self.mig_changes = Counter(
            "optsched_mig_layout_changes",
            "MIG layout changes of one GPU, by outcome (written to spec.migLayout, applied by the node "
            "agent, failed there, dropped before it started)",
            ["outcome"],
            registry=r,
        )
        self.mig_in_flight = Gauge(
            "optsched_mig_layout_changes_in_flight",
            "MIG layout changes written and not applied, failed or dropped yet, in the latest cycle",
            registry=r,
        )
        self.mig_waiting = Gauge(
            "optsched_workloads_waiting_for_mig_layout",
            "Workloads held Pending for a MIG layout change in the latest cycle",
            registry=r,
        )

    def observe_predictions(self, counts: Mapping[str, int]) -> None:
        for state, count in counts.items():
            self.predicted.labels(state).set(count)
        checked = counts.get("agreed", 0) + counts.get("drifted", 0)
        self.drift_ratio.set(counts.get("drifted", 0) / checked if checked else 0.0)

    def observe_plan(self, plan: Plan) -> None:
        self.plans.labels(plan.status.value).inc()
        for status in PlanStatus:
            self.plan_status.labels(status.value).set(1 if status == plan.status else 0)
        self.gap.set(plan.gap if plan.gap is not None else 0.0)
        self.solve_seconds.observe(plan.solve_seconds)
        summary = plan.summary
        self.gpus_allocated.set(summary.gpus_allocated_after)
        self.gpus_total.set(summary.gpus_total)
        if summary.multi_gpu_pods:
            self.island_hit.set(summary.multi_gpu_pods_in_one_island / summary.multi_gpu_pods)
        for product in summary.by_product:
            self.fragmentation.labels(product.product or "none").set(product.fragmentation_after)

    def observe_phases(self, phases: Iterable[tuple[str, float]]) -> None:
        for phase, seconds in phases:
            self.phase_seconds.labels(phase).observe(seconds)

    def observe_deferrals(self, reasons: Iterable[str]) -> None:
        """The deferred-workloads gauge of this cycle, by reason code (codes not seen drop to 0)."""
        counts = Tally(reasons)
        for label in list(self.deferred._metrics):
            self.deferred.labels(*label).set(0)
        for reason, number in counts.items():
            self.deferred.labels(reason).set(number)

    def observe_cache(self, sizes: Mapping[str, int]) -> None:
        for kind, number in sizes.items():
            self.cached.labels(kind).set(number)

    def observe_invalid(self, kinds: Iterable[str]) -> None:
        for label in list(self.invalid._metrics):
            self.invalid.labels(*label).set(0)
        for kind, number in Tally(kinds).items():
            self.invalid.labels(kind).set(number)
