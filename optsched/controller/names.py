"""Names optsched writes into the cluster, in one place so manifests, webhook and loop agree."""

from __future__ import annotations

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"
KUEUE_API = f"{KUEUE_GROUP}/{KUEUE_VERSION}"

DEFAULT_CHECK_NAME = "optsched"
DEFAULT_CONTROLLER_NAME = "optsched.io/placement"
FIELD_MANAGER = "optsched"

SCHEDULING_GATE = "optsched.io/placement"
"""Held by every pod of a workload optsched admitted, until the pod is pinned to its node."""

PLACEMENT_ANNOTATION = "optsched.io/placement"
"""On the Workload: the per-pod placement (JSON), written before our check turns Ready."""

PLAN_ID_LABEL = "optsched.io/plan-id"
"""Added to every pod of an admitted workload through podSetUpdates; ties a pod to its placement."""

PODSET_LABEL = "optsched.io/podset"
"""Added per PodSet through podSetUpdates, so a pod's PodSet is known without relying on Kueue's label."""

KUEUE_PODSET_LABEL = "kueue.x-k8s.io/podset"
COMPLETION_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"

POD_INDEX_ANNOTATION = "optsched.io/pod-index"
"""On a pinned pod: which entry of its PodSet's placement it took (makes re-pinning impossible)."""

GPUS_ANNOTATION = "optsched.io/gpus"
HOSTNAME_LABEL = "kubernetes.io/hostname"
PRODUCT_LABEL = "nvidia.com/gpu.product"

REQUIRED_TOPOLOGY_ANNOTATION = "optsched.io/required-topology"
"""Pod template annotation: all pods of the PodSet in one domain of this level (a node label).

Kueue's own ``kueue.x-k8s.io/podset-required-topology`` makes Kueue demand a TAS
flavor, so a workload that optsched places states the same request with ours.
"""
PREFERRED_TOPOLOGY_ANNOTATION = "optsched.io/preferred-topology"
KUEUE_REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
KUEUE_PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"
