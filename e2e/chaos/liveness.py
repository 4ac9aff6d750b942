"""The liveness invariants of the soak, judged over time: stuck (S) and lost (L) workloads.

Time here is *progress time*: seconds of the soak during which a controller
replica ran and the API server answered (the soak passes the seconds it spent
with neither as ``paused``), so a workload is never called stuck for waiting
out the control plane being down. Definitions, exactly as counted (each
workload at most once per rule):

**S, stuck.** A workload the soak submitted, whose Job or Pod still exists
(a bare Pod Kueue preempted is deleted and nothing can run for its Workload
any more), is stuck when, for longer than ``bound`` seconds of progress time
without interruption, either

* *admitted-unbound*: Kueue has it Admitted (and not Finished) while fewer of
  its pods are bound or done (Succeeded) than Kueue admitted
  (``podSetAssignments[].count``, else the submitted count); or
* *fits-not-admitted*: it is neither Admitted nor Finished nor refused
  (deactivated, or our check Rejected it: a decision, not a stall) while it fits, at
  every observation of that span, in the GPUs free right now
  (:mod:`e2e.chaos.capacity`) and in its ClusterQueue's free GPU quota (or it
  already holds a quota reservation).

**L, lost.** A workload the soak submitted (tenants' own aside) is lost when,
after it *started* (Admitted with all its admitted pods bound or done at
once), it is killed: its Job Failed, its Workload Finished with reason ``Failed``, or,
while not Finished, it is evicted or no longer Admitted at two observations
in a row; unless Kueue preempted it (its Evicted reason is ``Preempted`` or
its Preempted condition was seen) or one of the nodes its pods ran on was
deleted by a fault. A workload killed so with some of its pods running but
not yet all (a gang re-planned before it was whole) is a note
(*killed-before-complete*), not counted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from e2e.chaos.capacity import Demand, fits, free_gpus
from e2e.chaos.facts import Observation, PodFact, WorkloadFact
from e2e.chaos.invariants import Violation


@dataclass(frozen=True)
class Tracked:
    """A workload the soak submitted, found again through the uid of the object that owns its Workload."""

    owner_uid: str
    key: str
    kind: str
    actor: str
    """``honest``, ``preemptor`` or ``tenant``."""
    demand: Demand


@dataclass
class _State:
    waiting_since: dict[str, float] = field(default_factory=dict)
    started_on: set[str] | None = None
    """Nodes its pods ran on since it was admitted with at least one pod bound; None before."""
    complete: bool = False
    """All its admitted pods were bound (or done) at once, at some observation of this admission."""
    preempted: bool = False
    gone_once: bool = False


def pods_of(workload: WorkloadFact, obs: Observation) -> list[PodFact]:
    owners = set(workload.owners) - {""}
    return [
        p
        for p in obs.pods
        if p.namespace == workload.namespace and (p.uid in owners or owners & set(p.owners))
    ]


def placed(pods: list[PodFact]) -> int:
    """Pods that are bound (live) or ran to success."""
    return sum(1 for p in pods if (p.bound and not p.deleting) or (p.phase == "Succeeded" and p.node))


@dataclass
class Liveness:
    tracked: Mapping[str, Tracked]
    """By owner uid."""
    bound: float = 120.0
    _states: dict[str, _State] = field(default_factory=dict)
    _reported: set[str] = field(default_factory=set)
    _phase: dict[str, str] = field(default_factory=dict)
    preempted: set[str] = field(default_factory=set)
    """Workloads Kueue was seen preempting (``namespace/name``)."""

    def observe(self, obs: Observation, paused: float, deleted_nodes: frozenset[str]) -> list[Violation]:
        now = obs.at - paused
        free = free_gpus(obs)
        out: list[Violation] = []
        for workload in obs.workloads:
            tracked = next((self.tracked[o] for o in workload.owners if o in self.tracked), None)
            if tracked is None:
                continue
            state = self._states.setdefault(workload.uid, _State())
            pods = pods_of(workload, obs)
            self._phase[tracked.key] = _phase(workload, pods)
            if workload.preempted:
                self.preempted.add(tracked.key)
            out += self._stuck(tracked, workload, pods, state, now, obs, free)
            if tracked.actor != "tenant":
                out += self._lost(tracked, workload, pods, state, obs, deleted_nodes)
        fresh = [v for v in out if v.key not in self._reported]
        self._reported |= {v.key for v in fresh}
        return fresh

    def settled(self) -> bool:
        """No timer runs: at the last observation nothing admitted lacked a pod and nothing fitting waited."""
        return not any(state.waiting_since for state in self._states.values())

    def phases(self) -> Counter[str]:
        """How many tracked workloads are in each phase (for progress lines)."""
        return Counter(self._phase.values())

    def _timer(self, state: _State, rule: str, on: bool, now: float) -> float:
        if not on:
            state.waiting_since.pop(rule, None)
            return 0.0
        return now - state.waiting_since.setdefault(rule, now)

    def _stuck(
        self,
        tracked: Tracked,
        workload: WorkloadFact,
        pods: list[PodFact],
        state: _State,
        now: float,
        obs: Observation,
        free: Mapping[str, int],
    ) -> list[Violation]:
        expected = workload.admitted_pods if workload.admitted_pods is not None else tracked.demand.pods
        owner = obs.alive_owners is None or tracked.owner_uid in obs.alive_owners
        active = owner and workload.finished is None and not workload.inactive
        out = []
        unbound = active and workload.admitted and placed(pods) < expected
        waited = self._timer(state, "admitted-unbound", unbound, now)
        if waited > self.bound:
            out.append(_unbound(tracked, workload, pods, expected, waited))
        if workload.inactive and workload.finished is None:
            fitting = fits(tracked.demand, obs.nodes, free)
            out.append(
                Violation(
                    "N",
                    "refused",
                    f"refused:{workload.uid}",
                    f"{tracked.kind} workload {workload.key} ({tracked.actor}, {tracked.demand}) was refused "
                    f"(check {workload.check_state}, evicted: {workload.evicted}); it fits now: {fitting}",
                    (f"workload/{workload.key}",),
                )
            )
        quota_ok = workload.quota_reserved or tracked.demand.total <= obs.quota.free
        pending = active and not workload.admitted and quota_ok and fits(tracked.demand, obs.nodes, free)
        waited = self._timer(state, "fits-not-admitted", pending, now)
        if waited > self.bound:
            out.append(
                Violation(
                    "S",
                    "fits-not-admitted",
                    f"fits-not-admitted:{workload.uid}",
                    f"{tracked.kind} workload {workload.key} ({tracked.actor}) not admitted for "
                    f"{waited:.0f}s while {tracked.demand} fits in free GPUs and quota (quota reserved: "
                    f"{workload.quota_reserved}, check {workload.check_state}, "
                    f"requeue {workload.requeue or '-'})",
                    (f"workload/{workload.key}",),
                )
            )
        return out

    def _lost(
        self,
        tracked: Tracked,
        workload: WorkloadFact,
        pods: list[PodFact],
        state: _State,
        obs: Observation,
        deleted_nodes: frozenset[str],
    ) -> list[Violation]:
        expected = workload.admitted_pods if workload.admitted_pods is not None else tracked.demand.pods
        running = workload.admitted and not workload.finished
        if state.started_on is None and running and any(p.bound for p in pods):
            state.started_on = set()
        if state.started_on is None:
            return []
        state.complete |= running and placed(pods) >= expected
        state.started_on |= {p.node for p in pods if p.node}
        state.preempted |= workload.preempted
        failed = workload.finished == "Failed" or tracked.owner_uid in obs.failed_jobs
        gone = workload.finished is None and (workload.evicted is not None or not workload.admitted)
        confirmed = gone and state.gone_once
        state.gone_once = gone
        if not (failed or confirmed):
            return []
        nodes, preempted, complete = state.started_on, state.preempted, state.complete
        state.started_on, state.complete, state.preempted, state.gone_once = None, False, False, False
        if preempted or nodes & deleted_nodes:
            return []
        how = "its Job failed" if failed else f"evicted ({workload.evicted or 'no longer admitted'})"
        if not complete:
            return [
                Violation(
                    "N",
                    "killed-before-complete",
                    f"killed-before-complete:{workload.uid}:{obs.at}",
                    f"{tracked.kind} workload {workload.key} ({tracked.actor}) had pods running on "
                    f"{sorted(nodes)} but not all of them yet, and {how}; not preempted, no node deleted",
                    (f"workload/{workload.key}",),
                )
            ]
        return [
            Violation(
                "L",
                "killed",
                f"killed:{workload.uid}",
                f"{tracked.kind} workload {workload.key} ({tracked.actor}) was running on {sorted(nodes)} "
                f"and {how}; not preempted by Kueue, none of its nodes deleted",
                (f"workload/{workload.key}",),
            )
        ]


def _unbound(
    tracked: Tracked, workload: WorkloadFact, pods: list[PodFact], expected: int, waited: float
) -> Violation:
    waiting = [p for p in pods if p.live and not p.bound]
    detail = "; ".join(
        f"{p.key} {'gated' if p.gated else 'ungated'}, pinned to {p.pinned_to or '-'}" for p in waiting
    )
    return Violation(
        "S",
        "admitted-unbound",
        f"admitted-unbound:{workload.uid}",
        f"{tracked.kind} workload {workload.key} ({tracked.actor}) admitted for {waited:.0f}s with "
        f"{placed(pods)} of {expected} pods bound; waiting: {detail or 'pods not created'}",
        (f"workload/{workload.key}", *(f"pod/{p.key}" for p in waiting)),
    )


def _phase(workload: WorkloadFact, pods: list[PodFact]) -> str:
    if workload.finished:
        return "finished" if workload.finished != "Failed" else "failed"
    if workload.inactive:
        return "rejected"
    if workload.admitted:
        return "running" if pods and all(p.bound or not p.live for p in pods) else "admitted"
    return "reserved" if workload.quota_reserved else "queued"
