"""What the controller's cache keeps of a pod: the fields optsched reads, nothing else.

A pod as the API server sends it is mostly what optsched never reads: images,
commands, environment, volumes, probes, container statuses, and the
``managedFields`` bookkeeping. The controller caches every non-terminal pod of
the cluster, so each byte kept is kept per pod; this transform keeps what the
snapshot's pod parser (``optsched.snapshot.pods``, ``optsched.snapshot.held``,
``optsched.snapshot.nodes``) and the controller's pod view
(``optsched.controller.views``) read:

* metadata: identity, version, times, labels, annotations and owners;
* spec: the node, the gates, what placement reads (node selector, affinity,
  tolerations, priority, scheduler), the pod's claims and each container's name and resources
  (an init container's ``restartPolicy`` too: a sidecar runs alongside);
* status: the phase, the nominated node and the ``PodScheduled`` condition
  (it says why a pod does not bind).

A field outside these lists is dropped; an unusual value inside them is kept
as it is, for the parsers to judge and report.
"""

from __future__ import annotations

from typing import Any

METADATA_FIELDS = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "deletionTimestamp",
    "labels",
    "annotations",
    "ownerReferences",
)
SPEC_FIELDS = (
    "nodeName",
    "schedulingGates",
    "nodeSelector",
    "affinity",
    "tolerations",
    "priority",
    "priorityClassName",
    "schedulerName",
    "overhead",
    "resources",
    "resourceClaims",
)
CONTAINER_FIELDS = ("name", "resources", "restartPolicy")
STATUS_FIELDS = ("phase", "conditions", "nominatedNodeName")
CONDITIONS = frozenset({"PodScheduled"})


def _pick(value: Any, fields: tuple[str, ...]) -> Any:
    """The mapping with only ``fields``; anything that is not a mapping as it is."""
    if not isinstance(value, dict):
        return value
    return {key: value[key] for key in fields if key in value}


def _containers(value: Any) -> Any:
    if not isinstance(value, list):
        return value
    return [_pick(container, CONTAINER_FIELDS) for container in value]


def slim_pod(pod: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``pod`` with only the fields optsched reads (the input is left as it is)."""
    out: dict[str, Any] = {key: pod[key] for key in ("apiVersion", "kind") if key in pod}
    if "metadata" in pod:
        out["metadata"] = _pick(pod["metadata"], METADATA_FIELDS)
    spec = pod.get("spec")
    if spec is not None:
        slim = _pick(spec, SPEC_FIELDS)
        if isinstance(spec, dict):
            for key in ("containers", "initContainers"):
                if key in spec:
                    slim[key] = _containers(spec[key])
        out["spec"] = slim
    if "status" in pod:
        status = _pick(pod["status"], STATUS_FIELDS)
        if isinstance(status, dict) and isinstance(status.get("conditions"), list):
            status["conditions"] = [
                c for c in status["conditions"] if isinstance(c, dict) and c.get("type") in CONDITIONS
            ]
        out["status"] = status
    return out
