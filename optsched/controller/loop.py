"""The controller loop: read, plan, decide, write; then pin the pods of admitted workloads.

One cycle:

1. keep our AdmissionChecks ``Active`` (create the one named on the command
   line if missing);
2. read every object a snapshot needs (``optsched.kube.reader``) plus every
   pod carrying our plan-id label;
3. build the planning input (malformed objects dropped and reported, assumed
   usage of admitted-but-unbound pods added);
4. plan with the optimizer (in a worker thread, so watches keep flowing) and
   validate the plan; an invalid plan is never applied;
5. apply the decisions (record first, then check) and pin gated pods.

Cycles run every ``interval`` seconds and early, debounced, on watch events
for Workloads, our pods and Nodes. Only the Lease holder writes; a follower
keeps its watches warm and takes over when the Lease expires. Every write is
idempotent, so a cycle interrupted anywhere is simply repeated.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from optsched import planning
from optsched.controller.decide import Decisions, DeferPolicy, WorkloadAction, decide
from optsched.controller.inputs import PlanningInput, build_input
from optsched.controller.metrics import Metrics
from optsched.controller.pinning import PinResult, PodPin, is_gated_by_us, pins_for, ready_records
from optsched.controller.records import PlacementRecord
from optsched.errors import InputError, PlanValidationError
from optsched.kube.client import ApiError, Client
from optsched.kube.writer import Writer
from optsched.kueue import workload_status as ks
from optsched.model.names import KUEUE_API, PLACEMENT_ANNOTATION, PLAN_ID_LABEL
from optsched.model.plan import Plan
from optsched.model.snapshot import Snapshot
from optsched.settings import Settings

log = logging.getLogger("optsched.controller")

Planner = Callable[[Snapshot], Plan]


@dataclass
class Options:
    kubeconfig: str | None = None
    check_names: tuple[str, ...] = ("optsched",)
    controller_name: str = "optsched.io/placement"
    interval: float = 10.0
    debounce: float = 1.0
    dry_run: bool = False
    create_check: bool = True
    policy: DeferPolicy = field(default_factory=DeferPolicy)
    namespaces: tuple[str, ...] = ()
    concurrency: int = 16
    """Writes in flight at once (each workload's own writes stay in order)."""


@dataclass
class CycleResult:
    plan: Plan | None = None
    decisions: Decisions = field(default_factory=Decisions)
    pins: PinResult | None = None
    pinned: int = 0
    reports: int = 0
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)


def default_planner(time_limit_s: float = 10.0, workers: int = 0) -> Planner:
    """The optimizer with its greedy fallback, always followed by the independent validator."""
    settings = Settings(time_limit_s=time_limit_s, workers=workers)

    def plan(snapshot: Snapshot) -> Plan:
        return planning.plan(snapshot, settings)

    return plan


class Controller:
    def __init__(
        self,
        client: Client | None,
        options: Options,
        *,
        planner: Planner,
        metrics: Metrics | None = None,
        writer: Writer | None = None,
        is_leader: Callable[[], bool] = lambda: True,
        read: Callable[[], Any] | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.client = client
        self.options = options
        self.planner = planner
        self.metrics = metrics or Metrics()
        self.writer = writer or Writer(client, dry_run=options.dry_run)
        self.is_leader = is_leader
        self._read = read
        self.clock = clock
        self.trigger = asyncio.Event()
        self.pin_trigger = asyncio.Event()
        """Set when gated pods may have appeared: a cheap pin-only pass runs without re-planning."""
        self._pin_lock = asyncio.Lock()
        self._last_plan: tuple[str, Plan] | None = None
        """Digest of the snapshot last planned, and its plan: an unchanged cluster is not solved again."""
        self._reported: set[tuple[str, str, str]] = set()
        self._checks_ready = False

    # -- reading -------------------------------------------------------------------------------

    async def read(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Snapshot objects and every pod carrying our plan-id label."""
        if self._read is not None:
            result: tuple[list[dict[str, Any]], list[dict[str, Any]]] = await self._read()
            return result
        from optsched.kube.reader import read_cluster

        assert self.client is not None
        objects, notes = await read_cluster(self.client, namespaces=self.options.namespaces)
        for note in notes:
            log.debug("read: %s", note)
        plan_pods = await self.client.list("v1", "pods", label_selector=PLAN_ID_LABEL)
        for pod in plan_pods:
            pod.setdefault("kind", "Pod")
            pod.setdefault("apiVersion", "v1")
        return objects, plan_pods

    # -- the admission check --------------------------------------------------------------------

    async def ensure_checks(self) -> None:
        """Create our AdmissionCheck if missing and keep every check of our controller Active."""
        if self.client is None:
            return
        try:
            checks = await self.client.list(KUEUE_API, "admissionchecks")
        except ApiError as exc:
            log.warning("cannot list AdmissionChecks: %s", exc)
            return
        ours = [
            c for c in checks if (c.get("spec") or {}).get("controllerName") == self.options.controller_name
        ]
        names = {ks.meta(c).get("name") for c in ours}
        existing = {ks.meta(c).get("name") for c in checks}
        for name in self.options.check_names:
            if name in existing and name not in names:
                log.warning(
                    "AdmissionCheck %s belongs to controller %s, not %s",
                    name,
                    next(
                        (c.get("spec") or {}).get("controllerName")
                        for c in checks
                        if ks.meta(c).get("name") == name
                    ),
                    self.options.controller_name,
                )
            if name not in existing and self.options.create_check:
                await self.writer.create(
                    KUEUE_API,
                    "admissionchecks",
                    {
                        "apiVersion": KUEUE_API,
                        "kind": "AdmissionCheck",
                        "metadata": {"name": name},
                        "spec": {"controllerName": self.options.controller_name},
                    },
                )
                ours.append({"metadata": {"name": name}, "status": {}})
        now = ks.format_time(datetime.now(UTC))
        for check in ours:
            name = str(ks.meta(check).get("name"))
            if ks.condition_true(check, "Active"):
                continue
            await self.writer.apply(
                KUEUE_API,
                "admissionchecks",
                name,
                {
                    "apiVersion": KUEUE_API,
                    "kind": "AdmissionCheck",
                    "metadata": {"name": name},
                    "status": {
                        "conditions": [
                            {
                                "type": "Active",
                                "status": "True",
                                "reason": "Active",
                                "lastTransitionTime": now,
                                "message": "optsched is running",
                                "observedGeneration": ks.meta(check).get("generation", 1),
                            }
                        ]
                    },
                },
                subresource="status",
            )
        self._checks_ready = True

    # -- one cycle ------------------------------------------------------------------------------

    async def cycle(self) -> CycleResult:
        started = time.monotonic()
        result = CycleResult()
        try:
            await self._cycle(result)
        finally:
            result.seconds = time.monotonic() - started
            self.metrics.cycle_seconds.observe(result.seconds)
        if result.plan is not None or result.pinned or result.errors:
            log.info(
                "cycle took %.2fs: %d admitted, %d deferred, %d pods pinned, %d error(s)",
                result.seconds,
                len(result.decisions.of_kind("admit")),
                len(result.decisions.of_kind("defer")) + len(result.decisions.of_kind("release")),
                result.pinned,
                len(result.errors),
            )
        return result

    async def _cycle(self, result: CycleResult) -> None:
        await self.ensure_checks()
        try:
            objects, plan_pods = await self.read()
        except (InputError, ApiError, OSError) as exc:
            self.metrics.errors.labels("read").inc()
            result.errors.append(f"read: {exc}")
            log.error("cycle skipped, cannot read the cluster: %s", exc)
            return
        try:
            inp = build_input([*objects], self.options.check_names)
        except InputError as exc:
            self.metrics.errors.labels("snapshot").inc()
            result.errors.append(f"snapshot: {exc}")
            log.error("cycle skipped, snapshot failed: %s", exc)
            return
        self.metrics.assumed.set(inp.assumed)
        self.metrics.observe_invalid([r.kind for r in inp.reports])
        result.reports = len(inp.reports)
        await self._report(inp)
        if self.is_leader():
            await self._pin(
                ready_records(inp.workloads.values(), self.options.check_names), plan_pods, result
            )
        errors = {f"{r.namespace}/{r.name}": r.message for r in inp.reports if r.kind == "Workload"}
        actionable = [
            key
            for key, obj in inp.workloads.items()
            if (entry := ks.check_entry(obj, self.options.check_names)) is not None
            and entry.state == "Pending"
            and ks.holds_quota(obj)
            and ks.is_active(obj)
            and not ks.is_finished(obj)
        ]
        plan: Plan | None = None
        digest = hashlib.sha256(inp.snapshot.model_dump_json(exclude={"source"}).encode()).hexdigest()
        if (
            actionable
            and inp.snapshot.workloads
            and self._last_plan is not None
            and self._last_plan[0] == digest
        ):
            plan = self._last_plan[1]
            result.plan = plan
            log.debug("cluster unchanged since the last plan; plan reused")
        elif actionable and inp.snapshot.workloads:
            try:
                plan = await asyncio.to_thread(self.planner, inp.snapshot)
            except PlanValidationError as exc:
                self.metrics.errors.labels("validate").inc()
                result.errors.append(f"validate: {exc}")
                log.error("plan rejected by the validator, nothing applied: %s", exc)
                return
            except Exception as exc:
                self.metrics.errors.labels("plan").inc()
                result.errors.append(f"plan: {exc}")
                log.exception("planning failed, nothing applied")
                return
            self.metrics.observe_plan(plan)
            self._last_plan = (digest, plan)
            result.plan = plan
            log.info(
                "plan %s in %.2fs: %d admit, %d defer, gap %s",
                plan.status.value,
                plan.solve_seconds,
                len(plan.admitted),
                len(plan.deferred),
                plan.gap,
            )
        all_nodes = {n.name: n for n in inp.snapshot.nodes}
        decisions = decide(
            inp.workloads,
            plan,
            inp.snapshot,
            self.options.check_names,
            now=self.clock(),
            pods=plan_pods,
            all_nodes=all_nodes,
            policy=self.options.policy,
            planning_errors=errors,
        )
        result.decisions = decisions
        if not self.is_leader():
            log.debug("not the leader: %d action(s) not applied", len(decisions.actions))
            return
        await self._apply(decisions, inp, result)

    async def _pin(
        self, records: dict[str, PlacementRecord], plan_pods: list[dict[str, Any]], result: CycleResult
    ) -> None:
        """Pin every gated pod of a Ready workload (concurrently; each patch is independent)."""
        async with self._pin_lock:
            await self._pin_locked(records, plan_pods, result)

    async def _pin_locked(
        self, records: dict[str, PlacementRecord], plan_pods: list[dict[str, Any]], result: CycleResult
    ) -> None:
        pins = pins_for(plan_pods, records)
        result.pins = pins
        for line in pins.waiting:
            log.info("pod waits: %s", line)
        semaphore = asyncio.Semaphore(self.options.concurrency)

        async def one(pin: PodPin) -> None:
            async with semaphore:
                if not self.is_leader():
                    return
                try:
                    await self.writer.patch_pod(pin.namespace, pin.name, pin.patch())
                except ApiError as exc:
                    if exc.conflict or exc.not_found:
                        log.info(
                            "pod %s/%s changed while pinning (%s); retried next cycle",
                            pin.namespace,
                            pin.name,
                            exc.status,
                        )
                        self.trigger.set()
                    else:
                        result.errors.append(f"pin {pin.namespace}/{pin.name}: {exc}")
                        log.warning("pinning %s/%s failed: %s", pin.namespace, pin.name, exc)
                    return
                result.pinned += 1
                self.metrics.pinned.inc()
                log.info(
                    "%spinned pod %s/%s to %s gpus %s (plan %s, %s[%d])",
                    "dry-run, not applied: " if self.options.dry_run else "",
                    pin.namespace,
                    pin.name,
                    pin.slot.node,
                    pin.slot.gpus,
                    pin.plan_id,
                    pin.pod_set,
                    pin.slot.index,
                )

        await asyncio.gather(*(one(pin) for pin in pins.pins))

    async def _apply(self, decisions: Decisions, inp: PlanningInput, result: CycleResult) -> None:
        """Send each workload's writes in order (record, then check); workloads concurrently."""
        semaphore = asyncio.Semaphore(self.options.concurrency)

        async def one(action: WorkloadAction) -> None:
            async with semaphore:
                await self._apply_one(action, result)

        await asyncio.gather(
            *(
                one(a)
                for a in decisions.actions
                if a.record is not None or a.drop_record or a.check is not None
            )
        )
        self.metrics.observe_deferrals([a.reason for a in decisions.actions if a.kind == "defer"])

    async def _apply_one(self, action: WorkloadAction, result: CycleResult) -> None:
        if not self.is_leader():
            return

        async def write_record(value: str | None) -> None:
            await self.writer.set_annotation(
                KUEUE_API,
                "workloads",
                action.namespace,
                action.name,
                PLACEMENT_ANNOTATION,
                value,
                uid=action.uid,
            )

        try:
            # The record is written before the check goes Ready (a crash in between is repaired
            # from it), and dropped only after a release has been sent.
            if action.record is not None:
                await write_record(action.record.to_annotation())
            elif action.drop_record and action.kind != "release":
                await write_record(None)
            if action.check is not None:
                await self.writer.apply_check(action.namespace, action.name, action.check.entry())
            if action.drop_record and action.kind == "release":
                await write_record(None)
        except ApiError as exc:
            result.errors.append(f"{action.kind} {action.key}: {exc}")
            log.warning("%s %s failed (%s); retried next cycle", action.kind, action.key, exc)
            return
        verb = "dry-run, not applied: " if self.options.dry_run else ""
        if action.kind == "admit":
            self.metrics.admitted.inc()
            log.info("%sadmitted %s: %s", verb, action.key, action.check.message if action.check else "")
        elif action.kind == "release":
            self.metrics.released.labels(action.reason).inc()
            log.info(
                "%sreleased quota of %s: %s",
                verb,
                action.key,
                action.check.message if action.check else "",
            )
        elif action.kind == "replan":
            log.warning(
                "%sre-planning %s: %s", verb, action.key, action.check.message if action.check else ""
            )
        elif action.check is not None:
            log.info("%s%s %s: %s", verb, action.kind, action.key, action.check.message)

    async def _report(self, inp: PlanningInput) -> None:
        for report in inp.reports:
            fingerprint = (
                report.uid or f"{report.kind}/{report.namespace}/{report.name}",
                report.reason,
                report.message,
            )
            if fingerprint in self._reported:
                continue
            self._reported.add(fingerprint)
            log.warning(
                "skipped %s %s: %s",
                report.kind,
                f"{report.namespace}/{report.name}" if report.namespace else report.name,
                report.message,
            )
            if self.is_leader():
                await self.writer.event(
                    kind=report.kind,
                    api_version=report.api_version,
                    namespace=report.namespace,
                    name=report.name,
                    uid=report.uid,
                    reason=report.reason,
                    message=report.message,
                    at=self.clock(),
                )

    # -- running --------------------------------------------------------------------------------

    async def pin_pass(self) -> int:
        """Pin gated pods of Ready workloads without reading the whole cluster or planning."""
        if self.client is None or not self.is_leader():
            return 0
        result = CycleResult()
        try:
            workloads = await self.client.list(KUEUE_API, "workloads")
            pods = await self.client.list("v1", "pods", label_selector=PLAN_ID_LABEL)
        except (ApiError, OSError) as exc:
            log.debug("pin pass skipped: %s", exc)
            return 0
        await self._pin(ready_records(workloads, self.options.check_names), pods, result)
        return result.pinned

    async def _pin_loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.pin_trigger.wait()
            await asyncio.sleep(min(0.2, self.options.debounce))
            self.pin_trigger.clear()
            try:
                await self.pin_pass()
            except Exception:
                self.metrics.errors.labels("pin").inc()
                log.exception("pin pass failed; continuing")

    async def watch_forever(
        self,
        api_version: str,
        plural: str,
        *,
        label_selector: str | None = None,
        relevant: Callable[[dict[str, Any]], bool] = lambda e: True,
        pins: Callable[[dict[str, Any]], bool] = lambda e: False,
    ) -> None:
        """Set :attr:`trigger` (re-plan) or :attr:`pin_trigger` (pin only) on events; reconnect on errors."""
        assert self.client is not None
        backoff = 1.0
        while True:
            try:
                async for event in self.client.watch(api_version, plural, label_selector=label_selector):
                    backoff = 1.0
                    if event.get("type") not in ("ADDED", "MODIFIED", "DELETED"):
                        continue
                    if pins(event):
                        self.pin_trigger.set()
                    if relevant(event):
                        self.trigger.set()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.debug("watch %s ended: %s", plural, exc)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 30.0)

    async def run(self, stop: asyncio.Event, *, once: bool = False) -> int:
        """Cycle until ``stop`` is set (or once). Returns a process exit code."""
        if once:
            result = await self.cycle()
            return 1 if result.errors and result.plan is None and not result.decisions.actions else 0
        watches = []
        if self.client is not None:
            watches = [
                asyncio.create_task(self.watch_forever(KUEUE_API, "workloads")),
                asyncio.create_task(
                    self.watch_forever(
                        "v1",
                        "pods",
                        label_selector=PLAN_ID_LABEL,
                        relevant=pod_frees_capacity,
                        pins=pod_is_gated,
                    )
                ),
                asyncio.create_task(self._pin_loop(stop)),
                asyncio.create_task(self.watch_forever("v1", "nodes", relevant=NodeFilter())),
            ]
        try:
            while not stop.is_set():
                if self.is_leader():
                    try:
                        await self.cycle()
                    except Exception:
                        self.metrics.errors.labels("cycle").inc()
                        log.exception("cycle failed; continuing")
                await self._wait(stop)
        finally:
            for task in watches:
                task.cancel()
            await asyncio.gather(*watches, return_exceptions=True)
        return 0

    async def _wait(self, stop: asyncio.Event) -> None:
        stopper = asyncio.create_task(stop.wait())
        trigger = asyncio.create_task(self.trigger.wait())
        try:
            await asyncio.wait(
                {stopper, trigger}, timeout=self.options.interval, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            stopper.cancel()
            trigger.cancel()
        if self.trigger.is_set() and not stop.is_set():
            await asyncio.sleep(self.options.debounce)
        self.trigger.clear()


def pod_is_gated(event: dict[str, Any]) -> bool:
    """A pod of ours that still holds our gate: pin it now (no need to re-plan)."""
    return event.get("type") != "DELETED" and is_gated_by_us(event.get("object") or {})


def pod_frees_capacity(event: dict[str, Any]) -> bool:
    """A pod of ours that went away or finished: capacity changed, so re-plan."""
    phase = ((event.get("object") or {}).get("status") or {}).get("phase")
    return event.get("type") == "DELETED" or phase in ("Succeeded", "Failed")


class NodeFilter:
    """Node watch events that matter: added, deleted, readiness, GPU annotation or labels changed.

    Nodes send frequent status heartbeats; re-planning on each would waste cycles.
    """

    def __init__(self) -> None:
        self.seen: dict[str, tuple[Any, ...]] = {}

    def __call__(self, event: dict[str, Any]) -> bool:
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
            (ks.meta(node).get("annotations") or {}).get("optsched.io/gpu-topology"),
            tuple(sorted(((node.get("status") or {}).get("allocatable") or {}).items())),
        )
        changed = self.seen.get(name) != fingerprint
        self.seen[name] = fingerprint
        return changed
