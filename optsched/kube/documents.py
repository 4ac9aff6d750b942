"""Turn what the API server lists into the snapshot file format (``optsched snapshot``).

Kept separate from the network code so the conversion can be tested without a
cluster: list responses omit ``kind``/``apiVersion`` on their items for
built-in types, carry ``managedFields`` noise, and include pods that no
longer hold anything. The objects returned here, written with
``optsched.snapshot.documents.dump_objects``, are what ``optsched plan --snapshot``
reads back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from optsched.model.names import (
    KUEUE_GROUP,
    KUEUE_VERSIONS,
    NODE_GPUS_KIND,
    NODE_GPUS_PLURAL,
    NODE_GPUS_VERSION,
    OPTSCHED_GROUP,
    RESOURCE_GROUP,
)
from optsched.snapshot.dra import DRA_VERSIONS

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True)
class Kind:
    """One resource type the snapshot needs: where to list it and how to label its items."""

    kind: str
    plural: str
    group: str = ""
    by_namespace: bool = False
    """Listed per requested namespace. Pods are not: they hold capacity whatever their namespace."""
    versions: tuple[str, ...] = ("v1",)
    optional: bool = False
    """A refused list is a note, not an error: plans stay right without it, only less checked."""
    quiet_if_absent: bool = False
    """A server that does not serve it is normal (an optional CRD): no note then."""

    def api_versions(self) -> list[str]:
        return [f"{self.group}/{v}" if self.group else v for v in self.versions]


KINDS: tuple[Kind, ...] = (
    Kind("Node", "nodes"),
    Kind("Pod", "pods"),
    Kind("Namespace", "namespaces", optional=True),
    Kind(
        NODE_GPUS_KIND,
        NODE_GPUS_PLURAL,
        OPTSCHED_GROUP,
        versions=(NODE_GPUS_VERSION,),
        optional=True,
        quiet_if_absent=True,
    ),
    *(
        Kind(
            kind,
            plural,
            RESOURCE_GROUP,
            by_namespace=by_namespace,
            versions=DRA_VERSIONS,
            optional=True,
            quiet_if_absent=True,
        )
        for kind, plural, by_namespace in (
            ("DeviceClass", "deviceclasses", False),
            ("ResourceSlice", "resourceslices", False),
            # Every claim holds devices, whoever made it and in whatever namespace, like a pod.
            ("ResourceClaim", "resourceclaims", False),
            # Read for the pods of the queue, which name templates of their own namespace.
            ("ResourceClaimTemplate", "resourceclaimtemplates", True),
        )
    ),
    Kind("ResourceFlavor", "resourceflavors", KUEUE_GROUP, versions=KUEUE_VERSIONS),
    Kind("Topology", "topologies", KUEUE_GROUP, versions=(*KUEUE_VERSIONS, "v1alpha1")),
    Kind("AdmissionCheck", "admissionchecks", KUEUE_GROUP, versions=KUEUE_VERSIONS),
    Kind("ClusterQueue", "clusterqueues", KUEUE_GROUP, versions=KUEUE_VERSIONS),
    Kind("LocalQueue", "localqueues", KUEUE_GROUP, by_namespace=True, versions=KUEUE_VERSIONS),
    Kind("Workload", "workloads", KUEUE_GROUP, by_namespace=True, versions=KUEUE_VERSIONS),
)
"""In the order the snapshot file lists them: cluster facts first, then the queue."""


def keep_pod(pod: Mapping[str, Any]) -> bool:
    """A pod matters when it holds (or is about to hold) capacity: non-terminal and bound or gated."""
    status = pod.get("status") or {}
    if status.get("phase") in TERMINAL_PHASES:
        return False
    spec = pod.get("spec") or {}
    return bool(spec.get("nodeName") or spec.get("schedulingGates"))


def clean_item(item: Mapping[str, Any], *, kind: str, api_version: str) -> dict[str, Any]:
    """One list item as a standalone object: kind and apiVersion set, server bookkeeping dropped."""
    out: dict[str, Any] = {"apiVersion": api_version, "kind": kind}
    for key, value in item.items():
        if key in ("apiVersion", "kind"):
            continue
        out[key] = value
    metadata = dict(out.get("metadata") or {})
    metadata.pop("managedFields", None)
    annotations = dict(metadata.get("annotations") or {})
    annotations.pop("kubectl.kubernetes.io/last-applied-configuration", None)
    if annotations:
        metadata["annotations"] = annotations
    else:
        metadata.pop("annotations", None)
    out["metadata"] = metadata
    return out


def items_of(kind: Kind, list_body: Mapping[str, Any], api_version: str) -> list[dict[str, Any]]:
    """The items of a list response, cleaned, pods filtered to those that hold capacity."""
    version = str(list_body.get("apiVersion") or api_version)
    items = [clean_item(item, kind=kind.kind, api_version=version) for item in list_body.get("items") or ()]
    if kind.kind == "Pod":
        items = [pod for pod in items if keep_pod(pod)]
    return items
