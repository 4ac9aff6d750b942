"""The invariant checker's loop: read the cluster through its own client, judge, report.

Every ``interval`` seconds it lists every Pod and Node, the soak's Workloads
and Jobs and its ClusterQueue, straight from the API server (never through
the fault proxy), turns them into an :class:`~e2e.chaos.facts.Observation`
and puts that to the rules of :mod:`e2e.chaos.invariants` and
:mod:`e2e.chaos.liveness`. A read that fails (the API server restarting) is
skipped; the next one judges. It imports nothing of optsched.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable, Mapping

import httpx

from e2e.chaos.environment import Environment
from e2e.chaos.facts import Observation, observation
from e2e.chaos.invariants import Escapes, OverCommit, Records, Violation
from e2e.chaos.liveness import Liveness, Tracked
from e2e.chaos.report import Report
from e2e.kube import ApiError, Kube
from e2e.testing import KUEUE_API


class Checker:
    def __init__(
        self,
        env: Environment,
        kube: Kube,
        tracked: Mapping[str, Tracked],
        report: Report,
        *,
        started: float,
        paused: Callable[[], float],
        deleted_nodes: Callable[[], frozenset[str]],
        active_faults: Callable[[], list[str]],
        bound: float,
    ) -> None:
        self.env = env
        self.kube = kube
        self.report = report
        self.started = started
        self.paused = paused
        self.deleted_nodes = deleted_nodes
        self.active_faults = active_faults
        self.records = Records()
        self.over = OverCommit(self.records)
        self.escapes = Escapes(env.namespaces, self.records)
        self.liveness = Liveness(tracked, bound=bound)
        self.last: Observation | None = None
        self.failed_reads = 0
        self.errors: list[str] = []
        """Failures of the checker itself (a bug here): the soak then fails instead of passing blind."""

    def read(self) -> Observation:
        namespaces = sorted(self.env.namespaces)
        pods = self.kube.list("v1", "Pod")
        nodes = self.kube.list("v1", "Node")
        workloads = [w for ns in namespaces for w in self.kube.list(KUEUE_API, "Workload", ns)]
        jobs = [j for ns in namespaces for j in self.kube.list("batch/v1", "Job", ns)]
        queue = self.kube.get(KUEUE_API, "ClusterQueue", self.env.cluster_queue)
        return observation(
            time.monotonic() - self.started, pods, nodes, workloads, queue, jobs, self.env.check
        )

    def step(self) -> list[Violation]:
        try:
            obs = self.read()
        except (ApiError, httpx.HTTPError, OSError):
            self.failed_reads += 1
            return []
        self.records.remember(obs.workloads)
        found = [
            *self.over.check(obs),
            *self.escapes.check(obs),
            *self.liveness.observe(obs, self.paused(), self.deleted_nodes()),
        ]
        active = self.active_faults()
        for violation in found:
            self.report.violation(violation, active)
        self.last = obs
        return found

    def settled(self) -> bool:
        """No liveness timer runs: nothing admitted waits for a pod, nothing that fits waits for admission."""
        return self.last is not None and self.liveness.settled()

    def loop(self, stop: threading.Event, interval: float = 2.0) -> None:
        while not stop.is_set():
            began = time.monotonic()
            try:
                self.step()
            except Exception as exc:
                self.errors.append(traceback.format_exc())
                self.report.say(f"CHECKER ERROR {type(exc).__name__}: {exc}")
            stop.wait(max(0.2, interval - (time.monotonic() - began)))
