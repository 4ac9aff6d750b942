"""The mutating admission webhook's answer: which pods optsched gates at creation, and which it refuses.

``mutate`` is pure (an AdmissionReview and the LocalQueue verdicts in, an
AdmissionReview out); the HTTPS server around it is
:mod:`optsched.controller.webhook_server`. The answer needs no leadership, so
every replica serves it.

A pod is optsched's at creation when it carries ``optsched.io/plan-id`` (the
podSetUpdates of our Ready check put it on the pod templates of Job-like
integrations) or when its ``kueue.x-k8s.io/queue-name`` label names a
LocalQueue optsched decides. Pod-based integrations (plain pods, pod groups,
LeaderWorkerSet, StatefulSet) create their pods before Kueue admits them, with
only the queue-name label; gating them here, not when a label arrives later,
is what keeps them from reaching kube-scheduler before optsched placed them.
A LocalQueue this replica has not seen yet, or whose ClusterQueue it has not
seen, is gated too (fail closed): the controller lifts the gate once the
queue turns out not to be ours. So is a pod that Kueue holds but that names
no queue yet (Kueue's admission gate, its managed label, or the
``kueue.x-k8s.io/pod-suspending-parent`` annotation of a StatefulSet's or
LeaderWorkerSet's template): Kueue's controller copies the queue label onto
such pods only after they are created, too late for this answer.

A pod of a queue that requests no resource at all is left alone: Kueue
assigns its workload no flavor, so no admission check applies and Kueue
admits it without asking optsched (a gate would hold it for ever), and it
takes none of the capacity optsched promises.

On a DRA node the pod's GPUs are moved onto the ResourceClaim optsched
creates for its slot at ungate time, and a pod naming one of optsched's
claims itself is refused (:mod:`optsched.controller.dra_webhook`).

Such a pod created with ``spec.nodeName`` already bypasses every scheduler
and gate, so it is refused with a message that says why. A malformed review
is allowed unchanged with a warning: refusing it would block pod creation
for a reason the user cannot fix.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from optsched.controller.dra_webhook import RecordLookup, TemplateLookup, claim_patch, refusal
from optsched.kueue.managed_queues import ManagedQueues
from optsched.model.names import (
    KUEUE_ADMISSION_GATE,
    KUEUE_MANAGED_LABEL,
    KUEUE_QUEUE_NAME_LABEL,
    KUEUE_SUSPENDING_PARENT_ANNOTATION,
    PLAN_ID_LABEL,
    SCHEDULING_GATE,
)

MUTATE_PATH = "/mutate-pods"


@dataclass(frozen=True)
class Claim:
    """Why a pod is optsched's to place (the words the denial message uses)."""

    why: str


def _review(response: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


def _allowed(
    uid: str, patch: list[dict[str, Any]] | None = None, warning: str | None = None
) -> dict[str, Any]:
    response: dict[str, Any] = {"uid": uid, "allowed": True}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    if warning:
        response["warnings"] = [warning]
    return _review(response)


def _denied(uid: str, message: str) -> dict[str, Any]:
    status = {"code": 403, "reason": "Forbidden", "message": message}
    return _review({"uid": uid, "allowed": False, "status": status})


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def requests_nothing(pod: Mapping[str, Any]) -> bool:
    """No container, init container or the pod itself requests or limits any resource, and no overhead."""
    spec = _map(pod.get("spec"))
    if _map(spec.get("overhead")) or _asks(spec.get("resources")):
        return False
    containers = [c for key in ("containers", "initContainers") for c in _list(spec.get(key))]
    return not any(_asks(c.get("resources")) for c in containers if isinstance(c, dict))


def _asks(resources: Any) -> bool:
    return bool(_map(_map(resources).get("requests")) or _map(_map(resources).get("limits")))


def kueue_mark(pod: Mapping[str, Any]) -> str | None:
    """What shows Kueue holds a pod that names no queue yet (a StatefulSet's, say); None if nothing does."""
    metadata = _map(pod.get("metadata"))
    if _map(metadata.get("labels")).get(KUEUE_MANAGED_LABEL) == "true":
        return f"label {KUEUE_MANAGED_LABEL}"
    if KUEUE_SUSPENDING_PARENT_ANNOTATION in _map(metadata.get("annotations")):
        return f"annotation {KUEUE_SUSPENDING_PARENT_ANNOTATION}"
    gates = _list(_map(pod.get("spec")).get("schedulingGates"))
    if any(isinstance(g, dict) and g.get("name") == KUEUE_ADMISSION_GATE for g in gates):
        return f"scheduling gate {KUEUE_ADMISSION_GATE}"
    return None


def claim(pod: Mapping[str, Any], namespace: str, queues: ManagedQueues) -> Claim | None:
    """Whether optsched places this pod, and why; None when the pod is not optsched's."""
    labels = _map(_map(pod.get("metadata")).get("labels"))
    if labels.get(PLAN_ID_LABEL):
        return Claim(f"it carries the {PLAN_ID_LABEL} label of a workload optsched admitted")
    if requests_nothing(pod):
        return None  # Kueue gives such a workload no flavor, so no admission check: nothing to place
    queue = labels.get(KUEUE_QUEUE_NAME_LABEL)
    if not isinstance(queue, str) or not queue:
        mark = kueue_mark(pod)
        if mark is None:
            return None
        return Claim(
            f"Kueue holds it ({mark}) and its LocalQueue is not on the pod yet, "
            "so it is treated as one optsched places"
        )
    verdict = queues.verdict(namespace, queue)
    if verdict is False:
        return None
    if verdict is None:
        return Claim(
            f"its LocalQueue {namespace}/{queue} ({KUEUE_QUEUE_NAME_LABEL}) is not known to optsched yet, "
            "so it is treated as one optsched places"
        )
    return Claim(f"its LocalQueue {namespace}/{queue} ({KUEUE_QUEUE_NAME_LABEL}) is placed by optsched")


def gate_patch(pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    """JSON patch adding our scheduling gate; empty when the pod holds it already."""
    gates = _map(pod.get("spec")).get("schedulingGates")
    gate = {"name": SCHEDULING_GATE}
    if not isinstance(gates, list) or not gates:
        return [{"op": "add", "path": "/spec/schedulingGates", "value": [gate]}]
    if any(isinstance(g, dict) and g.get("name") == SCHEDULING_GATE for g in gates):
        return []
    return [{"op": "add", "path": "/spec/schedulingGates/-", "value": gate}]


def pod_name(pod: Mapping[str, Any], namespace: str) -> str:
    """``namespace/name`` as the message names it (``generateName*`` before the name is generated)."""
    metadata = _map(pod.get("metadata"))
    name = metadata.get("name") or (f"{metadata['generateName']}*" if metadata.get("generateName") else "")
    return f"{namespace}/{name or '<unnamed>'}"


def _unknown(_namespace: str, _name: str) -> None:
    return None


@dataclass(frozen=True)
class DraFacts:
    """What the DRA part of the answer reads: the workloads' records and the GPU claim templates."""

    records: RecordLookup = _unknown
    templates: TemplateLookup = _unknown
    claims: bool = True
    """Move pods' GPUs onto their optsched claim on DRA nodes; False (``--no-dra-claims``): never."""


def mutate(review: Mapping[str, Any], queues: ManagedQueues, dra: DraFacts | None = None) -> dict[str, Any]:
    """Answer one AdmissionReview: gate optsched's pods and move their GPUs onto their claim on DRA
    nodes; refuse those created already bound or naming an optsched claim."""
    request = review.get("request") if isinstance(review.get("request"), dict) else None
    if request is None:
        return _allowed("", warning="optsched: AdmissionReview without request")
    uid = str(request.get("uid", ""))
    kind = request.get("kind") or {}
    if request.get("operation") != "CREATE" or not isinstance(kind, dict) or kind.get("kind") != "Pod":
        return _allowed(uid)
    pod = request.get("object")
    if not isinstance(pod, dict):
        return _allowed(uid, warning="optsched: pod object missing from the admission request")
    namespace = str(request.get("namespace") or _map(pod.get("metadata")).get("namespace") or "default")
    facts = dra or DraFacts()
    refused = refusal(pod, namespace, pod_name(pod, namespace))
    if refused is not None:
        return _denied(uid, refused)
    found = claim(pod, namespace, queues)
    if found is None:
        return _allowed(uid)
    node = _map(pod.get("spec")).get("nodeName")
    if node:
        return _denied(
            uid,
            f"pod {pod_name(pod, namespace)}: spec.nodeName ({node}) may not be set at creation, because "
            f"{found.why}; optsched picks the node and GPUs, so leave spec.nodeName empty "
            "(a pod bound at creation would skip the plan and take GPUs promised to another workload)",
        )
    moved, why = (
        claim_patch(pod, namespace, uid, facts.records, facts.templates) if facts.claims else ([], None)
    )
    warning = f"optsched: pod {pod_name(pod, namespace)}: {why}" if why else None
    return _allowed(uid, gate_patch(pod) + moved, warning=warning)
