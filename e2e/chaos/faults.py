"""Injecting each fault class into the live cluster, and undoing it.

:class:`FaultRunner` runs one :class:`~e2e.chaos.schedule.ScheduledFault` at
a time (``inject``) and keeps the recoveries it owes (``tick`` runs the due
ones, ``recover_all`` all of them at the end). How each class is made, on
KWOK nodes and the local harness:

* controller SIGKILL: the Lease holder (else any replica), restarted under
  the same name 1-6 s later; two replicas: a second one is started, and 10-25 s
  later one of the two, drawn at random, is SIGKILLed;
* kube-apiserver restart: ``e2e.cluster.restart_component`` (the local
  harness only: on another cluster the class is skipped);
* API errors: the proxy's mode for 8-20 s (a share of 30-50% of requests);
* node deletion: the Node is deleted and recreated as it was 25-50 s later;
* NotReady: KWOK stops managing the node (its ``kwok.x-k8s.io/node``
  annotation goes), Ready turns False and the node gets the not-ready taints
  node-lifecycle-controller would add, for 15-40 s;
* GPU health: one GPU joins the ``unhealthy`` list of the node's
  ``optsched.io/gpu-topology`` annotation and leaves allocatable, as a node
  agent and the device plugin report it, for 20-45 s;
* preemption: a gang of one-GPU pods (products mixed) of the highest priority, sized past the free
  quota of the ClusterQueue, so Kueue must preempt lower priorities to reserve it.

A node is the target of at most one fault at a time; node faults prefer a
node that runs soak pods.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from e2e.chaos.environment import SYSTEM_NS, Environment, restore_node
from e2e.chaos.facts import GPU, TOPOLOGY, quota_fact
from e2e.chaos.policy import Fault, Mode
from e2e.chaos.proxy import FaultProxy
from e2e.chaos.replicas import Blackout, Replicas
from e2e.chaos.report import Report
from e2e.chaos.schedule import FaultKind, ScheduledFault
from e2e.kube import ApiError
from e2e.testing import KUEUE_API, E2ECluster

KWOK = "kwok.x-k8s.io/node"
NOT_READY = "node.kubernetes.io/not-ready"
PROXY_FAULTS = {
    FaultKind.API_CONFLICT: Fault.CONFLICT,
    FaultKind.API_THROTTLE: Fault.THROTTLE,
    FaultKind.API_ERROR: Fault.ERROR,
    FaultKind.API_HANG: Fault.HANG,
    FaultKind.API_DROP: Fault.DROP,
}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class _Pending:
    due: float
    action: Callable[[], str]
    entry: dict[str, Any]
    node: str | None = None


@dataclass
class FaultRunner:
    env: Environment
    cluster: E2ECluster
    """This thread's own client (admin)."""
    replicas: Replicas
    proxy: FaultProxy
    blackout: Blackout
    report: Report
    preempt: Callable[[int], str]
    """Submit an urgent gang of that many one-GPU pods; returns its name."""
    restart_apiserver: Callable[[float], float] | None
    deleted_nodes: frozenset[str] = frozenset()
    """Nodes a fault deleted (replaced whole on change, so other threads read it safely)."""
    _pending: list[_Pending] = field(default_factory=list)

    @property
    def kube(self) -> Any:
        return self.cluster.kube

    def active(self) -> list[str]:
        return sorted({str(p.entry["kind"]) for p in self._pending})

    def inject(self, fault: ScheduledFault) -> None:
        rng = random.Random(fault.seed)
        handler = {
            FaultKind.CONTROLLER_KILL: self._kill,
            FaultKind.REPLICA_FIGHT: self._fight,
            FaultKind.APISERVER_RESTART: self._apiserver,
            FaultKind.NODE_DELETE: self._delete_node,
            FaultKind.NODE_NOT_READY: self._not_ready,
            FaultKind.GPU_UNHEALTHY: self._unhealthy,
            FaultKind.PREEMPTION: self._preemption,
        }.get(fault.kind)
        try:
            if handler is not None:
                handler(fault.kind, rng)
            else:
                self._proxy(fault.kind, rng)
        except (ApiError, OSError, TimeoutError) as exc:
            self.report.say(f"fault {fault.kind} could not be injected: {exc}")

    def tick(self) -> None:
        now = time.monotonic()
        for pending in [p for p in self._pending if p.due <= now]:
            self._finish(pending)

    def recover_all(self) -> None:
        for pending in list(self._pending):
            self._finish(pending)

    def _finish(self, pending: _Pending) -> None:
        self._pending.remove(pending)
        try:
            detail = pending.action()
        except (ApiError, OSError, TimeoutError) as exc:
            detail = f"recovery failed: {exc}"
        self.report.fault_ended(pending.entry, detail)

    def _later(
        self, seconds: float, action: Callable[[], str], entry: dict[str, Any], node: str | None = None
    ) -> None:
        self._pending.append(_Pending(time.monotonic() + seconds, action, entry, node))

    # -- controller ---------------------------------------------------------------------
    def leader(self) -> str | None:
        lease = self.cluster.get("coordination.k8s.io/v1", "Lease", self.env.lease, SYSTEM_NS) or {}
        return (lease.get("spec") or {}).get("holderIdentity") or None

    def _kill(self, kind: FaultKind, rng: random.Random) -> None:
        alive = self.replicas.alive()
        if not alive:
            self.report.say(f"fault {kind} skipped: no replica runs")
            return
        leader = self.leader()
        target = leader if leader in alive else rng.choice(alive)
        delay = rng.uniform(1, 6)
        self.replicas.kill(target)
        entry = self.report.fault(kind, f"SIGKILL {target} (Lease holder: {leader}); restart in {delay:.1f}s")
        self._later(delay, lambda: f"restarted {self.replicas.start(target)}", entry)

    def _fight(self, kind: FaultKind, rng: random.Random) -> None:
        second = self.replicas.start()
        hold = rng.uniform(10, 25)
        entry = self.report.fault(
            kind, f"started {second} beside {self.replicas.alive()}; one dies in {hold:.0f}s"
        )

        def end() -> str:
            alive = self.replicas.alive()
            if len(alive) < 2:
                return f"only {alive} left; nothing killed"
            victim = rng.choice(alive)
            self.replicas.kill(victim)
            return f"SIGKILL {victim} (Lease holder was {self.leader()}); {self.replicas.alive()} left"

        self._later(hold, end, entry)

    # -- API server and proxy ----------------------------------------------------------
    def _apiserver(self, kind: FaultKind, rng: random.Random) -> None:
        if self.restart_apiserver is None:
            self.report.say(f"fault {kind} skipped: the API server is not the local harness's")
            return
        down = rng.uniform(0, 3)
        entry = self.report.fault(kind, f"stopping kube-apiserver for {down:.1f}s")
        self.blackout.set("apiserver", True)
        try:
            seconds = self.restart_apiserver(down)
        finally:
            self.blackout.set("apiserver", False)
        self.report.fault_ended(entry, f"kube-apiserver ready again after {seconds:.1f}s")

    def _proxy(self, kind: FaultKind, rng: random.Random) -> None:
        for pending in [p for p in self._pending if p.entry["kind"] in {k.value for k in PROXY_FAULTS}]:
            self._finish(pending)
        fault = PROXY_FAULTS[kind]
        share = rng.uniform(0.3, 0.5)
        mode = Mode(fault, share, hang_seconds=rng.uniform(20, 60), retry_after=rng.randint(1, 3))
        seconds = rng.uniform(8, 20)
        before = dict(self.proxy.counts)
        self.proxy.mode = mode
        entry = self.report.fault(
            kind, f"proxy injects {fault} into {share:.0%} of requests for {seconds:.0f}s"
        )

        def clear() -> str:
            self.proxy.mode = Mode()
            hit = {k: v - before.get(k, 0) for k, v in self.proxy.counts.items() if v != before.get(k, 0)}
            return f"proxy passes everything again; requests meanwhile: {hit}"

        self._later(seconds, clear, entry)

    # -- nodes ------------------------------------------------------------------------------
    def _target(self, rng: random.Random) -> str | None:
        busy = {p.node for p in self._pending if p.node}
        names = sorted(
            n for n in self.env.nodes_before if n not in busy and self.cluster.get("v1", "Node", n)
        )
        if not names:
            return None
        pods = self.cluster.list("v1", "Pod", self.env.team)
        used = sorted({p["spec"].get("nodeName") for p in pods if p["spec"].get("nodeName") in names})
        return rng.choice(used) if used and rng.random() < 0.7 else rng.choice(names)

    def _restore(self, node: str, what: str) -> Callable[[], str]:
        def action() -> str:
            restore_node(self.cluster, self.env.nodes_before[node])
            return f"{node} {what}"

        return action

    def _delete_node(self, kind: FaultKind, rng: random.Random) -> None:
        node = self._target(rng)
        if node is None:
            return
        back = rng.uniform(25, 50)
        self.kube.delete("v1", "Node", node)
        self.deleted_nodes = self.deleted_nodes | {node}
        entry = self.report.fault(kind, f"deleted node {node}; recreated in {back:.0f}s", node=node)
        self._later(back, self._restore(node, "recreated as it was"), entry, node)

    def _not_ready(self, kind: FaultKind, rng: random.Random) -> None:
        node = self._target(rng)
        if node is None:
            return
        back = rng.uniform(15, 40)
        self.kube.patch("v1", "Node", node, {"metadata": {"annotations": {KWOK: None}}})
        time.sleep(0.5)
        condition = {
            "type": "Ready",
            "status": "False",
            "reason": "ChaosNotReady",
            "message": "injected by the soak",
            "lastHeartbeatTime": _now(),
            "lastTransitionTime": _now(),
        }
        path = self.kube.path("v1", "Node", node, subresource="status")
        self.kube.request(
            "PATCH",
            path,
            content=json.dumps({"status": {"conditions": [condition]}}).encode(),
            headers={"Content-Type": "application/strategic-merge-patch+json"},
        )
        taints = list((self.env.nodes_before[node].get("spec") or {}).get("taints") or [])
        taints += [
            {"key": NOT_READY, "effect": "NoSchedule"},
            {"key": NOT_READY, "effect": "NoExecute", "timeAdded": _now()},
        ]
        self.kube.patch("v1", "Node", node, {"spec": {"taints": taints}})
        entry = self.report.fault(kind, f"node {node} NotReady (not-ready taints) for {back:.0f}s", node=node)
        self._later(back, self._restore(node, "Ready again, taints gone"), entry, node)

    def _unhealthy(self, kind: FaultKind, rng: random.Random) -> None:
        node = self._target(rng)
        if node is None:
            return
        now = self.cluster.get("v1", "Node", node) or {}
        annotations = now["metadata"].get("annotations") or {}
        doc = json.loads(annotations.get(TOPOLOGY) or "{}")
        capacity = int(now["status"]["capacity"].get(GPU, 0))
        healthy = [i for i in range(capacity) if i not in (doc.get("unhealthy") or [])]
        if not healthy:
            return
        gpu = rng.choice(healthy)
        doc["unhealthy"] = sorted([*(doc.get("unhealthy") or []), gpu])
        self.kube.patch("v1", "Node", node, {"metadata": {"annotations": {TOPOLOGY: json.dumps(doc)}}})
        allocatable = max(0, int(now["status"]["allocatable"].get(GPU, 0)) - 1)
        self.kube.patch(
            "v1", "Node", node, {"status": {"allocatable": {GPU: str(allocatable)}}}, subresource="status"
        )
        back = rng.uniform(20, 45)
        entry = self.report.fault(
            kind,
            f"GPU {gpu} of {node} unhealthy (allocatable {allocatable}) for {back:.0f}s",
            node=node,
            gpu=gpu,
        )
        self._later(back, self._restore(node, f"GPU {gpu} healthy again"), entry, node)

    # -- Kueue ------------------------------------------------------------------------------
    def _preemption(self, kind: FaultKind, rng: random.Random) -> None:
        quota = quota_fact(self.cluster.get(KUEUE_API, "ClusterQueue", self.env.cluster_queue))
        pods = max(4, min(48, quota.free + rng.randint(4, 12)))
        name = self.preempt(pods)
        self.report.fault(
            kind,
            f"urgent gang {name} of {pods} one-GPU pods (any product); free quota was {quota.free} "
            f"of {quota.nominal} GPUs",
        )
