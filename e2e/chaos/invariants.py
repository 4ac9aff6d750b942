"""The safety invariants of the soak, judged on each observation: over-commit (O) and escapes (E).

Both rules read only :mod:`e2e.chaos.facts` (raw objects, interpreted from the
documented names), never the controller's code, and both count each incident
once. Definitions, exactly as counted:

**O, over-committed.** An incident is either

* *gpu-count*: a pod a scheduler bound is first seen on node N while the GPUs
  requested by the live pods bound to N (terminating ones included: they
  hold their GPUs until they are gone) exceed N's allocatable
  ``nvidia.com/gpu``. The allocatable compared against is the larger of its
  values at this and the previous observation, so a GPU that turns unhealthy
  under pods already running is not an over-commit, while a pod bound onto it
  afterwards is. A pod created straight onto N (``spec.nodeName``, no
  scheduler) is judged as the kubelet would admit it: when it arrives past
  allocatable it is refused there (a note, *kubelet-refused*: KWOK has no
  kubelet to refuse it) and holds nothing; else it holds its GPUs; or
* *gpu-index*: two live, not terminating pods bound to N, each pinned to N
  (``nodeSelector kubernetes.io/hostname``, or a required node affinity on the
  hostname label or ``metadata.name``, naming N), carry ``optsched.io/gpus`` index
  lists that share an index, where each list is what optsched promised: the
  GPUs of the pod's slot (its plan id, PodSet and ``optsched.io/pod-index``)
  on N in a version of that plan's placement record seen during the soak. One
  GPU promised to two pods. Index lists optsched did not promise (a tenant's
  own, kept because the slot names no GPUs) are not promises: they are
  reported as notes (kind ``N``, *self-declared-indices*), never counted.

Pods on a node that no longer exists are never judged (their GPUs went with
the node). One incident per new pod (gpu-count) or per pair (gpu-index).

**E, escapes.** A live pod of a soak namespace, requesting GPUs and bound to
an existing node with GPUs, escaped when it is *not entitled* to that node and
it is either *managed* (it belongs to a Kueue Workload, or carries a
``kueue.x-k8s.io/queue-name`` label) or *pinned-shaped* (it carries a plan id,
an ``optsched.io/pod-index`` and a hostname pin to that node, i.e. it went
through the ungater). A pod is entitled when its own Workload (same namespace,
found through owner references, never through labels a tenant can set) has,
in some version of its placement record seen during the soak, the plan id the
pod is labelled with and a slot for the pod's PodSet and index on that node,
and the pod is pinned there. The rule is *stolen-slot* when the pod's plan id
belongs to another Workload's record, otherwise *unpinned-run*. A pod must be
unentitled at two observations at least ``grace`` seconds apart, so a record
rewritten between two reads is not taken for an escape.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from e2e.chaos.facts import NodeFact, Observation, PodFact, RecordFact, WorkloadFact


@dataclass(frozen=True)
class Violation:
    kind: str
    """``O``, ``L``, ``S`` or ``E``; ``N`` for a note, reported but never counted."""
    rule: str
    key: str
    """Identity of the incident: each is counted once."""
    message: str
    objects: tuple[str, ...] = ()


@dataclass
class Records:
    """Every version of every placement record seen during the soak, by Workload uid and by plan id."""

    by_workload: dict[str, list[RecordFact]] = field(default_factory=dict)
    by_plan: dict[str, list[RecordFact]] = field(default_factory=dict)
    owner_of_plan: dict[str, str] = field(default_factory=dict)
    """Plan id to the ``namespace/name`` of the Workload whose record has it."""

    def remember(self, workloads: Iterable[WorkloadFact]) -> None:
        for w in workloads:
            if w.record is None:
                continue
            for key, book in ((w.uid, self.by_workload), (w.record.plan_id, self.by_plan)):
                seen = book.setdefault(key, [])
                if w.record not in seen:
                    seen.append(w.record)
            self.owner_of_plan.setdefault(w.record.plan_id, w.key)

    def promised(self, pod: PodFact) -> bool:
        """The pod's ``optsched.io/gpus`` are the GPUs its slot of its plan promises on its node."""
        for record in self.by_plan.get(pod.plan_id or "", []):
            slot = record.slot(pod.pod_set, pod.pod_index)
            if (
                slot is not None
                and slot.node == pod.node
                and slot.gpus is not None
                and slot.gpus == pod.indices
            ):
                return True
        return False


class OverCommit:
    """O: both rules, remembering what was bound and each node's allocatable at the last observation."""

    def __init__(self, records: Records) -> None:
        self.records = records
        self._seen: set[tuple[str, str]] = set()
        self._refused: set[str] = set()
        self._allocatable: dict[str, int] = {}
        self._reported: set[str] = set()

    def check(self, obs: Observation) -> list[Violation]:
        out: list[Violation] = []
        for name, node in obs.nodes.items():
            pods = [p for p in obs.pods_on(name) if p.gpus > 0]
            out += self._count(node, pods)
            out += self._indices(node, pods)
        self._allocatable = {name: n.allocatable for name, n in obs.nodes.items()}
        return [v for v in out if self._first(v)]

    def _first(self, violation: Violation) -> bool:
        if violation.key in self._reported:
            return False
        self._reported.add(violation.key)
        return True

    def _count(self, node: NodeFact, pods: list[PodFact]) -> list[Violation]:
        limit = max(node.allocatable, self._allocatable.get(node.name, 0))
        pods = [p for p in pods if p.uid not in self._refused]
        new = [p for p in pods if (p.uid, node.name) not in self._seen]
        self._seen |= {(p.uid, node.name) for p in pods}
        held = sum(p.gpus for p in pods if p not in new)
        out = []
        for pod in sorted((p for p in new if not p.scheduled), key=lambda p: p.key):
            if held + pod.gpus > limit:
                self._refused.add(pod.uid)
                out.append(_refused(pod, node, held, limit))
            else:
                held += pod.gpus
        bound = sorted(p.key for p in new if p.scheduled)
        asked = held + sum(p.gpus for p in new if p.scheduled)
        if not bound or asked <= limit:
            return out
        listed = ", ".join(
            f"{p.key} ({p.gpus})" for p in sorted(pods, key=lambda p: p.key) if p.uid not in self._refused
        )
        out.append(
            Violation(
                "O",
                "gpu-count",
                f"gpu-count:{node.name}:{','.join(bound)}",
                f"node {node.name}: {asked} GPUs requested by bound pods, {limit} allocatable, after "
                f"{', '.join(bound)} bound; bound: {listed}",
                (f"node/{node.name}", *(f"pod/{p.key}" for p in pods if p.uid not in self._refused)),
            )
        )
        return out

    def _indices(self, node: NodeFact, pods: list[PodFact]) -> list[Violation]:
        shaped = [p for p in pods if not p.deleting and node.pinned_here(p) and p.indices]
        pinned = sorted((p for p in shaped if self.records.promised(p)), key=lambda p: p.key)
        out = [_self_declared(p) for p in shaped if p.plan_id and not self.records.promised(p)]
        for i, a in enumerate(pinned):
            for b in pinned[i + 1 :]:
                shared = sorted(set(a.indices or ()) & set(b.indices or ()))
                if shared:
                    out.append(
                        Violation(
                            "O",
                            "gpu-index",
                            f"gpu-index:{node.name}:{a.uid}:{b.uid}",
                            f"node {node.name}: GPU(s) {shared} given to both {a.key} "
                            f"(gpus {list(a.indices or ())}) and {b.key} (gpus {list(b.indices or ())})",
                            (f"node/{node.name}", f"pod/{a.key}", f"pod/{b.key}"),
                        )
                    )
        return out


def _refused(pod: PodFact, node: NodeFact, held: int, limit: int) -> Violation:
    return Violation(
        "N",
        "kubelet-refused",
        f"kubelet-refused:{pod.uid}",
        f"pod {pod.key} was created onto {node.name} (spec.nodeName) asking for {pod.gpus} GPU(s) with "
        f"{held} of {limit} held: a kubelet would refuse it (KWOK runs it); it is counted as holding none",
        (f"pod/{pod.key}", f"node/{node.name}"),
    )


def _self_declared(pod: PodFact) -> Violation:
    return Violation(
        "N",
        "self-declared-indices",
        f"self-declared-indices:{pod.uid}",
        f"pod {pod.key} is pinned to {pod.node} (plan {pod.plan_id}, slot {pod.pod_index}) carrying "
        f"optsched.io/gpus {list(pod.indices or ())} that its slot does not promise (its own, kept)",
        (f"pod/{pod.key}",),
    )


def own_workload(pod: PodFact, workloads: Iterable[WorkloadFact]) -> WorkloadFact | None:
    """The Workload a pod belongs to: same namespace, owned by the pod or by the pod's owner."""
    mine = {pod.uid, *pod.owners} - {""}
    return next((w for w in workloads if w.namespace == pod.namespace and mine & set(w.owners)), None)


@dataclass
class Escapes:
    """E: unentitled managed or pinned-shaped pods on GPU nodes, judged with every record version seen."""

    namespaces: frozenset[str]
    records: Records
    grace: float = 3.0
    _suspect: dict[str, float] = field(default_factory=dict)
    _entitled: set[str] = field(default_factory=set)
    _reported: set[str] = field(default_factory=set)

    def check(self, obs: Observation) -> list[Violation]:
        out = []
        suspects = set()
        for pod in obs.pods:
            if pod.namespace not in self.namespaces or pod.uid in self._entitled or pod.uid in self._reported:
                continue
            node = obs.nodes.get(pod.node or "")
            if not pod.bound or pod.gpus <= 0 or node is None or node.capacity <= 0:
                continue
            own = own_workload(pod, obs.workloads)
            if own is not None and node.pinned_here(pod) and self._entitled_by(pod, own):
                self._entitled.add(pod.uid)
                continue
            pinned_shape = pod.plan_id is not None and pod.pod_index is not None and node.pinned_here(pod)
            if own is None and pod.queue is None and not pinned_shape:
                continue
            suspects.add(pod.uid)
            first = self._suspect.setdefault(pod.uid, obs.at)
            if obs.at - first >= self.grace:
                self._reported.add(pod.uid)
                out.append(self._violation(pod, own))
        self._suspect = {uid: t for uid, t in self._suspect.items() if uid in suspects}
        return out

    def _entitled_by(self, pod: PodFact, own: WorkloadFact) -> bool:
        for record in self.records.by_workload.get(own.uid, []):
            slot = record.slot(pod.pod_set, pod.pod_index)
            if record.plan_id == pod.plan_id and slot and slot.node == pod.node:
                return True
        return False

    def _violation(self, pod: PodFact, own: WorkloadFact | None) -> Violation:
        victim = self.records.owner_of_plan.get(pod.plan_id or "")
        whose = own.key if own else "no Workload"
        if victim and (own is None or victim != own.key):
            rule = "stolen-slot"
            how = f"carries plan id {pod.plan_id} of Workload {victim}"
        else:
            rule = "unpinned-run"
            pin = f"pinned to {pod.pinned_to}" if pod.pinned_to else "not pinned"
            how = (
                f"{pin}, plan id {pod.plan_id}, pod-index {pod.pod_index}, no slot of its record on that node"
            )
        return Violation(
            "E",
            rule,
            f"{rule}:{pod.uid}",
            f"pod {pod.key} ({whose}) runs on {pod.node} with {pod.gpus} GPU(s): {how}",
            (f"pod/{pod.key}", *((f"workload/{victim}",) if victim else ())),
        )
