"""The controller: one cycle of numbered, timed phases, repeated; only the last phase writes.

One cycle, like Kueue's scheduling cycle:

1. **read**: every object a snapshot needs, and every pod the controller
   acts on, from the informers' caches (``optsched.kube.cluster_cache``),
   kept current by one list and then a watch per kind;
2. **build input**: parse each object once; Workloads and pods become views,
   malformed objects are reported, assumed usage of admitted-but-unbound pods
   is added (``inputs``);
3. **plan**: with the optimizer, in a worker thread so watches keep flowing, and
   validated; an invalid plan is never applied, an unchanged cluster not solved again;
4. **decide**: check updates, placement records, pod pins and Events, as one value;
5. **act**: send them (``act``).

Each phase's duration is logged with the cycle and exported as a metric.
Cycles start on the informers' events for Workloads, pods, Nodes and
NodeGPUs as soon as a burst of them is over (``wakeup``), and every
``interval`` seconds without events; gated pods are
also pinned by a pass of their own as soon as they appear, without
re-planning. Our AdmissionChecks are kept Active by their own reconciler.
Only the Lease holder writes; a follower keeps its caches warm and takes over
when the Lease expires. Every write is idempotent, so a cycle interrupted
anywhere is simply repeated. The loop beats a heartbeat after each cycle and
each wait (``health``): a replica whose cycle hangs fails its liveness probe.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from optsched import planning
from optsched.controller.act import Actor
from optsched.controller.admission_check import AdmissionCheckReconciler
from optsched.controller.clock import Clock, system_clock
from optsched.controller.decide import ActionKind, Decisions, decide
from optsched.controller.dra_index import DraIndex
from optsched.controller.health import Heartbeat, liveness_bound
from optsched.controller.inputs import PlanningInput, Report, build_input
from optsched.controller.metrics import Metrics
from optsched.controller.options import Options
from optsched.controller.pin_pass import pin_pass_decisions
from optsched.controller.predicted_pins import prediction_outcomes
from optsched.controller.wakeup import Debounce, Wake, next_pass, settle
from optsched.controller.watch import Triggers
from optsched.errors import InputError, PlanValidationError
from optsched.kube.client import ApiError, Client
from optsched.kube.cluster_cache import ClusterCache, NotSynced
from optsched.kube.informer import DEFAULT_TIMING, Timing
from optsched.kube.writer import Writer
from optsched.model.plan import Plan
from optsched.model.snapshot import Snapshot
from optsched.settings import Settings

log = logging.getLogger("optsched.controller")

Planner = Callable[[Snapshot], Plan]


class Phase(StrEnum):
    READ = "read"
    BUILD_INPUT = "build-input"
    PLAN = "plan"
    DECIDE = "decide"
    ACT = "act"


@dataclass(frozen=True)
class ClusterRead:
    """What phase 1 read: the snapshot's objects, and every pod the controller acts on.

    Those pods carry our plan-id label, a Kueue queue-name label or our
    scheduling gate (the gate of a pod of a queue that is not ours is lifted).
    """

    objects: list[dict[str, Any]]
    pods: list[dict[str, Any]]


@dataclass(frozen=True)
class CycleResult:
    """What one cycle did: its plan and decisions, what the writes achieved, how long each phase took."""

    plan: Plan | None = None
    decisions: Decisions = field(default_factory=Decisions)
    pinned: int = 0
    reports: int = 0
    seconds: float = 0.0
    errors: tuple[str, ...] = ()
    phases: tuple[tuple[Phase, float], ...] = ()


class _Skip(Exception):
    """A phase failed in a way that ends it; ``stage`` labels the error metric."""

    def __init__(self, stage: str, error: Exception, what: str, *, trace: bool = False) -> None:
        super().__init__(f"{stage}: {error}")
        self.stage = stage
        self.what = what
        self.trace = trace


@dataclass
class _Timer:
    """Durations of the phases of one cycle, in order."""

    phases: list[tuple[Phase, float]] = field(default_factory=list)

    @contextlib.contextmanager
    def __call__(self, phase: Phase) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self.phases.append((phase, time.monotonic() - started))

    def __str__(self) -> str:
        return ", ".join(f"{n} {p} {s:.2f}s" for n, (p, s) in enumerate(self.phases, 1))


def default_planner(settings: Settings | None = None) -> Planner:
    """The optimizer with its greedy fallback, always followed by the independent validator."""
    chosen = settings or Settings()

    def plan(snapshot: Snapshot) -> Plan:
        return planning.plan(snapshot, chosen)

    return plan


class Controller:
    """Cycles, pin passes and the AdmissionCheck reconciler of one replica, over one injected client."""

    def __init__(
        self,
        client: Client,
        options: Options,
        *,
        planner: Planner,
        metrics: Metrics | None = None,
        writer: Writer | None = None,
        is_leader: Callable[[], bool] = lambda: True,
        clock: Clock = system_clock,
        heartbeat: Heartbeat | None = None,
        cache_timing: Timing = DEFAULT_TIMING,
    ) -> None:
        self.client = client
        self.options = options
        self.planner = planner
        self.metrics = metrics or Metrics()
        self.writer = writer or Writer(client, dry_run=options.dry_run)
        self.is_leader = is_leader
        self.clock = clock
        self.trigger = Wake()
        """Set to run the next cycle early (debounced)."""
        self.pin_trigger = Wake()
        """Set when gated pods may have appeared: a cheap pin-only pass runs without re-planning."""
        wake = self.pin_trigger.set
        self.actor = Actor(
            self.writer,
            self.metrics,
            options,
            is_leader=is_leader,
            clock=clock,
            on_conflict=wake,
            on_stale=self.trigger.set,
        )
        self.checks = AdmissionCheckReconciler(client, self.writer, options, is_leader=is_leader, clock=clock)
        self.heartbeat = heartbeat or Heartbeat(liveness_bound(options, Settings(), client.request_timeout))
        """Beaten after every cycle and every wait; ``/healthz`` fails once it is silent too long."""
        self.triggers = Triggers(self.trigger, self.pin_trigger, self.checks.on_event)
        self.dra_index = DraIndex()
        """The records the webhook's DRA answer reads, fed by the Workload informer."""
        handlers = self.triggers.handlers()
        handlers["Workload"] = self.dra_index.chained(handlers["Workload"])
        self.cache = ClusterCache(
            client, namespaces=options.namespaces, on_change=handlers, timing=cache_timing
        )
        """One informer per kind the snapshot reads; the read phase and the pin pass read it."""
        self._last_plan: tuple[str, Plan] | None = None
        """Digest of the snapshot last planned, and its plan: an unchanged cluster is not solved again."""
        self._debounce = Debounce(quiet=min(options.quiet, options.debounce), most=options.debounce)
        self._reported: set[tuple[str, str, str]] = set()
        """Fingerprints of the problems reported last cycle: only those still present are remembered."""

    def wake(self) -> None:
        """Cycle and reconcile the AdmissionChecks now (e.g. on becoming the leader)."""
        self.trigger.set()
        self.checks.wanted.set()

    # -- the cycle -------------------------------------------------------------------------------

    async def cycle(self) -> CycleResult:
        """One cycle of the five phases; a failed read or build ends it with the error."""
        timer = _Timer()
        started = time.monotonic()
        try:
            result = await self._phases(timer)
        except _Skip as skip:
            result = CycleResult(errors=(self._failed(skip),))
        result = replace(result, seconds=time.monotonic() - started, phases=tuple(timer.phases))
        self.metrics.cycle_seconds.observe(result.seconds)
        self.metrics.observe_phases(result.phases)
        self._log(result, timer)
        return result

    async def _phases(self, timer: _Timer) -> CycleResult:
        with timer(Phase.READ):  # 1. the cluster, through the injected client
            read = await self.read()
        with timer(Phase.BUILD_INPUT):  # 2. views, reports, assumed usage, the snapshot
            inp = self.build_input(read)
        errors: tuple[str, ...] = ()
        with timer(Phase.PLAN):  # 3. a validated plan (a failure leaves every check as it is)
            try:
                plan = await self.plan(inp)
            except _Skip as skip:
                plan, errors = None, (self._failed(skip),)
        with timer(Phase.DECIDE):  # 4. every write of the cycle, as one value
            decisions = decide(
                inp,
                plan,
                now=self.clock(),
                policy=self.options.policy,
                reports=self._new(inp.reports),
                planned=not errors,
                claim_conflicts=self.actor.claims.conflicts,
                dra_claims=self.options.dra_claims,
            )
        result = CycleResult(plan=plan, decisions=decisions, reports=len(inp.reports), errors=errors)
        if not self.is_leader():
            log.debug("not the leader: %d action(s) not applied", len(decisions.actions))
            return result
        with timer(Phase.ACT):  # 5. the only phase that writes
            outcome = await self.actor.act(decisions)
        return replace(result, pinned=outcome.pinned, errors=errors + outcome.errors)

    def _failed(self, skip: _Skip) -> str:
        """Count and log a failed phase; its line for :attr:`CycleResult.errors`."""
        self.metrics.errors.labels(skip.stage).inc()
        log.error("%s: %s", skip.what, skip.__cause__, exc_info=skip.__cause__ if skip.trace else None)
        return str(skip)

    async def read(self) -> ClusterRead:
        """Phase 1: the snapshot's objects and the pods we act on, from the informers' caches.

        While the informers run, the read waits for their first list (at most
        ``sync_timeout`` seconds, else the cycle is skipped); where they do not
        run (one cycle, a test), every kind is listed once into the caches.
        """
        try:
            await self.cache.ready(self.options.sync_timeout)
        except (NotSynced, ApiError) as exc:
            raise _Skip("read", exc, "cycle skipped, cannot read the cluster") from exc
        await self.actor.own.caught_up(lambda: self.cache.of_kind("Workload"))
        for note in self.cache.notes:
            log.debug("read: %s", note)
        self.metrics.observe_cache(self.cache.sizes())
        return ClusterRead(objects=self.cache.objects(), pods=self.cache.pods())

    def build_input(self, read: ClusterRead) -> PlanningInput:
        """Phase 2: the planning input, and the metrics of what it found."""
        try:
            inp = build_input(read.objects, self.options.check_names, pods=read.pods)
        except InputError as exc:
            raise _Skip("snapshot", exc, "cycle skipped, snapshot failed") from exc
        self.metrics.assumed.set(inp.assumed)
        self.metrics.observe_invalid([r.kind for r in inp.reports])
        self.metrics.observe_predictions(prediction_outcomes(inp.pods, inp.workloads.values(), inp.read_back))
        return inp

    async def plan(self, inp: PlanningInput) -> Plan | None:
        """Phase 3: a validated plan, or None when no workload waits on one."""
        if not inp.actionable or not (inp.snapshot.workloads or inp.snapshot.held):
            return None
        digest = hashlib.sha256(inp.snapshot.model_dump_json(exclude={"source"}).encode()).hexdigest()
        if self._last_plan is not None and self._last_plan[0] == digest:
            log.debug("cluster unchanged since the last plan; plan reused")
            return self._last_plan[1]
        try:
            plan = await asyncio.to_thread(self.planner, inp.snapshot)
        except PlanValidationError as exc:
            raise _Skip("validate", exc, "plan rejected by the validator, nothing applied") from exc
        except Exception as exc:
            raise _Skip("plan", exc, "planning failed, nothing applied", trace=True) from exc
        self.metrics.observe_plan(plan)
        self._last_plan = (digest, plan)
        log.info(
            "plan %s in %.2fs: %d admit, %d defer, gap %s",
            plan.status.value,
            plan.solve_seconds,
            len(plan.admitted),
            len(plan.deferred),
            plan.gap,
        )
        return plan

    def _new(self, reports: tuple[Report, ...]) -> list[Report]:
        """Reports not made in the previous cycle (each is logged once and becomes one Event).

        Only this cycle's problems are remembered (bounded by the objects present).
        """
        new = []
        seen, self._reported = set(self._reported), {r.fingerprint for r in reports}
        for report in reports:
            if report.fingerprint in seen:
                continue
            seen.add(report.fingerprint)
            where = f"{report.namespace}/{report.name}" if report.namespace else report.name
            log.warning("skipped %s %s: %s", report.kind, where, report.message)
            new.append(report)
        return new

    def _log(self, result: CycleResult, timer: _Timer) -> None:
        admitted = len(result.decisions.of_kind(ActionKind.ADMIT))
        deferred = len(result.decisions.of_kind(ActionKind.DEFER)) + len(
            result.decisions.of_kind(ActionKind.RELEASE)
        )
        busy = result.plan is not None or result.pinned or result.errors
        log.log(
            logging.INFO if busy else logging.DEBUG,
            "cycle took %.2fs (%s): %d admitted, %d deferred, %d pods pinned, %d error(s)",
            result.seconds,
            timer,
            admitted,
            deferred,
            result.pinned,
            len(result.errors),
        )

    # -- pinning between cycles --------------------------------------------------------------------

    async def pin_pass(self) -> int:
        """Pin gated pods of Ready workloads from the caches (NodeGPUs say which pods have their devices)."""
        if not self.is_leader():
            return 0
        try:
            await self.cache.ready(self.options.sync_timeout)
        except (NotSynced, ApiError) as exc:
            log.debug("pin pass skipped: %s", exc)
            return 0
        kinds = ("Workload", "Node", "LocalQueue", "ClusterQueue", "NodeGPUs", "Pod")
        objects = [o for kind in kinds for o in self.cache.of_kind(kind)]
        opts = self.options
        found = pin_pass_decisions(
            objects, self.cache.pods(), opts.check_names, now=self.clock(), dra_claims=opts.dra_claims
        )
        return (await self.actor.pin(found.pins, found.waiting, found.ungates)).pinned

    async def _pin_loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.pin_trigger.wait()
            await settle(self.pin_trigger, stop, self._debounce)
            try:
                await self.pin_pass()
            except Exception:
                self.metrics.errors.labels("pin").inc()
                log.exception("pin pass failed; continuing")

    # -- running ---------------------------------------------------------------------------------

    def _background(self, stop: asyncio.Event) -> list[Coroutine[Any, Any, None]]:
        """The informers (their events wake cycles and pin passes), the pin loop and the check reconciler."""
        return [self.cache.run(), self._pin_loop(stop), self.checks.run(stop)]

    async def run(self, stop: asyncio.Event, *, once: bool = False) -> int:
        """Cycle until ``stop`` is set (or once). Returns a process exit code."""
        if once:
            await self.checks.reconcile()
            result = await self.cycle()
            return 1 if result.errors and result.plan is None and not result.decisions.actions else 0
        tasks = [asyncio.create_task(job) for job in self._background(stop)]
        try:
            while not stop.is_set():
                if self.is_leader():
                    try:
                        await self.cycle()
                    except Exception:
                        self.metrics.errors.labels("cycle").inc()
                        log.exception("cycle failed; continuing")
                    self.heartbeat.beat()
                await self._wait(stop)
                self.heartbeat.beat()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        return 0

    async def _wait(self, stop: asyncio.Event) -> None:
        await next_pass(self.trigger, stop, self.options.interval, self._debounce)
