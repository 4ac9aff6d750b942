"""The misbehaving tenant: what it tries, with its own service account's token (the ``edit`` role).

Attacks, one every ``gap`` seconds in a seeded order that meets each early:

* ``gate-lift``: a Job in the tenant's queue, plus a bare pod carrying a plan
  id of the tenant's own (so the webhook gates it); a watch on the tenant's
  pods removes optsched's scheduling gate from each the moment it appears;
* ``plan-id-copy``: a pod of the tenant's own labelled with the plan id and
  PodSet of a pod of the team (read with ``view``), so it waits for that
  workload's slot;
* ``forged-annotations``: a Job whose pods carry ``optsched.io/gpus`` and
  ``optsched.io/pod-index`` values of the tenant's choosing;
* ``node-name``: a pod created straight onto a GPU node (``spec.nodeName``)
  that asks for all its GPUs, in the tenant's managed queue every other time,
  else with a copied plan id and forged slot annotations.

The outcome of each (refused by whom, created, lifted) goes to the report;
whether it escaped is for the invariant checker to find. The tenant deletes
its bare pods again after a minute.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

from e2e.chaos.capacity import Demand
from e2e.chaos.environment import Environment
from e2e.chaos.facts import GATE, GPU, PLAN_ID, PODSET, gpu_request
from e2e.chaos.report import Report
from e2e.chaos.workloads import QUEUE_LABEL, RUN_DURATION, WorkloadSpec
from e2e.kube import ApiError, Kube

ATTACK = "e2e.optsched.io/attack"
KINDS = ("gate-lift", "plan-id-copy", "forged-annotations", "node-name")


def attack_times(
    seed: int, seconds: float, gap: float = 20.0, start: float = 10.0
) -> list[tuple[float, str]]:
    """(seconds after the start, attack) pairs: each kind once in the first round, then a seeded mix."""
    rng = random.Random(f"tenant:{seed}")
    kinds = list(KINDS)
    rng.shuffle(kinds)
    out, t, i = [], start, 0
    while t < seconds:
        out.append((t, kinds[i] if i < len(kinds) else rng.choice(KINDS)))
        i += 1
        t += gap * rng.uniform(0.7, 1.3)
    return out


def _pod(
    name: str, gpus: int, labels: dict[str, str], annotations: dict[str, str], **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels, "annotations": {RUN_DURATION: "45s", **annotations}},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "main",
                    "image": "busybox:1.36",
                    "resources": {"requests": {GPU: str(gpus)}, "limits": {GPU: str(gpus)}},
                }
            ],
            **spec,
        },
    }


class Tenant:
    def __init__(
        self,
        env: Environment,
        kube: Kube,
        report: Report,
        submit: Callable[[WorkloadSpec, str, Kube], str | None],
    ) -> None:
        self.env = env
        self.kube = kube
        self.report = report
        self.submit = submit
        self._count = 0
        self._node_name_tries = 0
        self._bare: list[tuple[float, str]] = []
        self._lifted: set[str] = set()

    def attack(self, kind: str, rng: random.Random) -> None:
        self._count += 1
        getattr(self, "_" + kind.replace("-", "_"))(f"{kind}-{self._count:02d}", rng)

    def cleanup(self, older_than: float = 60.0) -> None:
        now = time.monotonic()
        for created, name in [b for b in self._bare if now - b[0] > older_than]:
            self._bare.remove((created, name))
            try:
                self.kube.delete("v1", "Pod", name, self.env.tenant)
            except (ApiError, httpx.HTTPError) as exc:
                self.report.say(f"tenant could not delete its pod {name} (tries again later): {exc}")
                self._bare.append((created, name))

    def _create(self, kind: str, pod: dict[str, Any]) -> dict[str, Any] | None:
        pod["metadata"]["labels"][ATTACK] = kind
        try:
            made = self.kube.create({**pod, "metadata": {**pod["metadata"], "namespace": self.env.tenant}})
        except ApiError as exc:
            self.report.attack(kind, f"{pod['metadata']['name']} refused: {exc}")
            return None
        self._bare.append((time.monotonic(), pod["metadata"]["name"]))
        gated = any(g.get("name") == GATE for g in made["spec"].get("schedulingGates") or [])
        where = made["spec"].get("nodeName") or "unbound"
        self.report.attack(
            kind, f"{pod['metadata']['name']} created ({'gated' if gated else 'not gated'}, {where})"
        )
        return made

    def _job(self, name: str, kind: str, annotations: dict[str, str], gpus: int = 1, pods: int = 1) -> None:
        spec = WorkloadSpec(name, kind, Demand(pods, gpus), "low", 40, annotations, {ATTACK: kind})
        made = self.submit(spec, "tenant", self.kube)
        self.report.attack(kind, f"Job {name} submitted" if made else f"Job {name} refused")

    def _gate_lift(self, name: str, rng: random.Random) -> None:
        self._job(name, "gate-lift", {})
        labels = {PLAN_ID: f"tenant-{name}", PODSET: "main"}
        self._create("gate-lift", _pod(f"{name}-bare", rng.choice((1, 8)), labels, {}))

    def _victim(self, rng: random.Random) -> dict[str, Any] | None:
        try:
            pods = self.kube.list("v1", "Pod", self.env.team, label_selector=PLAN_ID)
        except ApiError as exc:
            self.report.attack("plan-id-copy", f"cannot read the team's pods: {exc}")
            return None
        live = [p for p in pods if p.get("status", {}).get("phase") not in ("Succeeded", "Failed")]
        return rng.choice(live) if live else None

    def _plan_id_copy(self, name: str, rng: random.Random) -> None:
        victim = self._victim(rng)
        if victim is None:
            self.report.attack("plan-id-copy", "no team pod with a plan id to copy yet")
            return
        labels = {
            PLAN_ID: victim["metadata"]["labels"][PLAN_ID],
            PODSET: victim["metadata"]["labels"].get(PODSET, "main"),
        }
        index = victim["metadata"]["labels"].get("batch.kubernetes.io/job-completion-index")
        if index is not None:
            labels["batch.kubernetes.io/job-completion-index"] = index
        gpus = max(1, gpu_request(victim["spec"]))
        self._create("plan-id-copy", _pod(name, gpus, labels, {}))

    def _forged_annotations(self, name: str, rng: random.Random) -> None:
        gpus = ",".join(str(i) for i in sorted(rng.sample(range(8), 4)))
        self._job(
            name, "forged-annotations", {"optsched.io/gpus": gpus, "optsched.io/pod-index": "0"}, pods=2
        )

    def _node_name(self, name: str, rng: random.Random) -> None:
        nodes = sorted(self.env.nodes_before)
        node = rng.choice(nodes)
        gpus = int(self.env.nodes_before[node]["status"]["capacity"].get(GPU, 1))
        labels: dict[str, str] = {}
        annotations = {
            "optsched.io/pod-index": "0",
            "optsched.io/gpus": ",".join(str(i) for i in range(gpus)),
        }
        self._node_name_tries += 1
        if self._node_name_tries % 2:
            labels[QUEUE_LABEL] = "lq"
        else:
            victim = self._victim(rng)
            if victim is not None:
                labels[PLAN_ID] = victim["metadata"]["labels"][PLAN_ID]
                labels[PODSET] = victim["metadata"]["labels"].get(PODSET, "main")
        self._create("node-name", _pod(name, gpus, labels, annotations, nodeName=node))

    # -- the gate-lifting watch -------------------------------------------------------------
    def lift_gates(self, stop: threading.Event, kube: Kube) -> None:
        """Watch the tenant's pods (with ``kube``, this thread's own client) and remove optsched's gate from
        each gate-lift pod as soon as it has one."""
        path = kube.path("v1", "Pod", namespace=self.env.tenant)
        params = {"watch": "true", "labelSelector": f"{ATTACK}=gate-lift", "timeoutSeconds": "15"}
        while not stop.is_set():
            try:
                with kube.http.stream("GET", path, params=params, timeout=30) as response:
                    for line in response.iter_lines():
                        if stop.is_set():
                            return
                        if line.strip():
                            self._maybe_lift(kube, json.loads(line).get("object") or {})
            except Exception:
                time.sleep(1)

    def _maybe_lift(self, kube: Kube, pod: dict[str, Any]) -> None:
        md = pod.get("metadata") or {}
        gates = (pod.get("spec") or {}).get("schedulingGates") or []
        uid = str(md.get("uid", ""))
        if uid in self._lifted or not any(g.get("name") == GATE for g in gates):
            return
        self._lifted.add(uid)
        others = [g for g in gates if g.get("name") != GATE]
        try:
            kube.patch(
                "v1",
                "Pod",
                md["name"],
                {"spec": {"schedulingGates": others or None}},
                namespace=self.env.tenant,
            )
        except ApiError as exc:
            self.report.attack("gate-lift", f"lifting the gate of {md['name']} refused: {exc}")
            return
        self.report.attack(
            "gate-lift",
            f"lifted optsched's gate from {md['name']} (pinned to "
            f"{((pod.get('spec') or {}).get('nodeSelector') or {}).get('kubernetes.io/hostname')})",
        )
