"""Every label, annotation, scheduling gate, resource and API name optsched reads or writes.

One module, so the snapshot reader, the controller, the webhook and the
manifests cannot drift apart. Names say whose convention they follow:
``KUEUE_*`` are Kueue's, ``OPTSCHED_*`` and the other ``optsched.io/`` keys are
ours, the ``nvidia.com/`` keys are NVIDIA GPU Feature Discovery's and its
device plugin's (HAMi's for shares), the rest are Kubernetes'.
"""

from __future__ import annotations

# -- Kubernetes ------------------------------------------------------------------------------------

HOSTNAME_LABEL = "kubernetes.io/hostname"
COMPLETION_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
JOBSET_JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"
"""On a JobSet's pods: which child Job of its replicated job the pod is of (completion indices repeat)."""
"""On pods of an indexed Job (label, and annotation on older releases)."""
COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
"""Set by the API server on every Namespace, to the namespace's name; selectors may match on it."""

# -- NVIDIA (GPU Feature Discovery, device plugin) and HAMi shares --------------------------------

GPU_RESOURCE = "nvidia.com/gpu"
GPU_MEM_RESOURCE = "nvidia.com/gpumem"
"""HAMi: MiB of GPU memory for a share of one GPU."""
GPU_CORES_RESOURCE = "nvidia.com/gpucores"
"""HAMi: percent of one GPU's compute for a share."""
GPU_MEM_PERCENT_RESOURCE = "nvidia.com/gpumem-percentage"
"""HAMi: percent of one GPU's memory for a share (used where ``nvidia.com/gpumem`` is not given)."""
HAMI_REGISTER_ANNOTATION = "hami.io/node-nvidia-register"
"""On a Node, written by HAMi's device plugin: its physical GPUs (JSON list, or older ``uuid,count,...:``)."""
HAMI_ALLOCATED_ANNOTATION = "hami.io/vgpu-devices-allocated"
"""On a Pod, written by HAMi's scheduler: per container ``uuid,NVIDIA,memMiB,cores:``, containers by ``;``."""
HAMI_TO_ALLOCATE_ANNOTATION = "hami.io/vgpu-devices-to-allocate"
"""HAMi's assignment in the same format, which its device plugin empties as it hands devices out."""
HAMI_DEVICE_TYPE = "NVIDIA"
"""The device type HAMi writes for NVIDIA GPUs in pod assignments."""
MIG_PREFIX = "nvidia.com/mig-"
"""MIG slices as NVIDIA's mixed strategy names them, e.g. ``nvidia.com/mig-1g.10gb``."""
PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"
CLIQUE_LABEL = "nvidia.com/gpu.clique"

# -- Dynamic Resource Allocation (Kubernetes) and NVIDIA's DRA driver -----------------------------

RESOURCE_GROUP = "resource.k8s.io"
RESOURCE_VERSION = "v1"
RESOURCE_API = f"{RESOURCE_GROUP}/{RESOURCE_VERSION}"
DRA_GPU_DRIVER = "gpu.nvidia.com"
"""NVIDIA's DRA driver: one ResourceSlice pool per node, devices named ``gpu-<minor>``."""
DRA_GPU_DEVICE_CLASS = "gpu.nvidia.com"
"""The DeviceClass of whole GPUs NVIDIA's DRA driver installs."""
DRA_UUID_ATTRIBUTE = "uuid"
"""A GPU's UUID among its device attributes (qualified: ``gpu.nvidia.com/uuid``)."""

# -- Kueue ----------------------------------------------------------------------------------------

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"
"""The storage version since Kueue 0.16: what optsched writes."""
KUEUE_VERSIONS: tuple[str, ...] = (KUEUE_VERSION, "v1beta1")
"""What optsched reads, newest first (v1beta1 is still served)."""
KUEUE_API = f"{KUEUE_GROUP}/{KUEUE_VERSION}"
KUEUE_PODSET_LABEL = "kueue.x-k8s.io/podset"
KUEUE_QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
"""On a Job or a pod of a pod-based integration: the LocalQueue it is submitted to."""
KUEUE_MANAGED_LABEL = "kueue.x-k8s.io/managed"
"""``"true"`` on a pod Kueue manages (on a StatefulSet's pods only once Kueue has adopted them)."""
KUEUE_ADMISSION_GATE = "kueue.x-k8s.io/admission"
"""The scheduling gate Kueue's pod webhook puts on the pods of pod-based integrations until admission."""
KUEUE_SUSPENDING_PARENT_ANNOTATION = "kueue.x-k8s.io/pod-suspending-parent"
"""On the pod template of a StatefulSet or LeaderWorkerSet Kueue manages: its pods are created with it,
before Kueue copies the queue label onto them."""
KUEUE_WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"
"""On the pods of a started Job: the name of the Workload admitted for it."""
KUEUE_JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
"""On a Workload: the uid of the Job that owns it (and its pods)."""
KUEUE_REQUIRED_TOPOLOGY_ANNOTATION = "kueue.x-k8s.io/podset-required-topology"
KUEUE_PREFERRED_TOPOLOGY_ANNOTATION = "kueue.x-k8s.io/podset-preferred-topology"
KUEUE_STOP_POLICIES: tuple[str, ...] = ("None", "Hold", "HoldAndDrain")
"""``spec.stopPolicy`` of a ClusterQueue or LocalQueue; anything but ``None`` stops new admissions."""

DEFAULT_TOPOLOGY_LEVELS: tuple[str, ...] = (
    "cloud.provider.com/topology-block",
    "cloud.provider.com/topology-rack",
    HOSTNAME_LABEL,
)
"""Topology levels, coarsest first, where no Kueue ``Topology`` applies (Kueue's documented example)."""

# -- optsched: what users write on their workloads and nodes --------------------------------------

GPU_TOPOLOGY_ANNOTATION = "optsched.io/gpu-topology"
"""On a Node, written by the node agent: NVLink islands, NUMA, unhealthy GPUs, UUIDs, PCI bus ids (JSON)."""
OPTSCHED_GROUP = "optsched.io"
NODE_GPUS_KIND = "NodeGPUs"
"""Cluster-scoped, named after its node, written by the node agent: the node's GPUs and what pods hold."""
NODE_GPUS_PLURAL = "nodegpus"
NODE_GPUS_VERSION = "v1alpha1"
NODE_GPUS_API = f"{OPTSCHED_GROUP}/{NODE_GPUS_VERSION}"
NVLINK_ANNOTATION = "optsched.io/nvlink"
"""On a pod template: ``required`` makes one NVLink island per pod a hard constraint."""
ALLOW_MIXED_ANNOTATION = "optsched.io/allow-mixed-gpu-products"
OPTSCHED_REQUIRED_TOPOLOGY_ANNOTATION = "optsched.io/required-topology"
"""Pod template: all pods of the PodSet in one domain of this level (a node label).

optsched's spelling of Kueue's ``kueue.x-k8s.io/podset-required-topology``, for
queues whose flavors Kueue TAS must not place: Kueue demands a TAS flavor for
any PodSet carrying its own topology annotations.
"""
OPTSCHED_PREFERRED_TOPOLOGY_ANNOTATION = "optsched.io/preferred-topology"

# -- optsched: what the controller writes ---------------------------------------------------------

DEFAULT_CHECK_NAME = "optsched"
DEFAULT_CONTROLLER_NAME = "optsched.io/placement"
"""``spec.controllerName`` of our AdmissionChecks."""
FIELD_MANAGER = "optsched"

SCHEDULING_GATE = "optsched.io/placement"
"""Held by every pod of a workload optsched admitted, until the pod is pinned to its node."""
PLACEMENT_ANNOTATION = "optsched.io/placement"
"""On the Workload: the per-pod placement (JSON), written before our check turns Ready."""
PLAN_ID_LABEL = "optsched.io/plan-id"
"""Added to every pod of an admitted workload through podSetUpdates; ties a pod to its placement."""
PODSET_LABEL = "optsched.io/podset"
"""Added per PodSet through podSetUpdates, so a pod's PodSet is known without relying on Kueue's label."""
PINNED_AT_ANNOTATION = "optsched.io/pinned-at"
"""On a pinned pod: when optsched pinned it (how long it has been unable to bind is counted from then)."""
POD_INDEX_ANNOTATION = "optsched.io/pod-index"
"""On a pinned pod: which entry of its PodSet's placement it took (makes re-pinning impossible)."""
GPUS_ANNOTATION = "optsched.io/gpus"
"""On a pinned pod: the GPU indices the plan gave it (``"0,1"``)."""
GPU_UUIDS_ANNOTATION = "optsched.io/gpu-uuids"
"""On a pinned pod: the GPU UUIDs the plan gave it (``"GPU-...,GPU-..."``), where the node names them."""
CLAIM_PREFIX = "optsched-"
"""Every ResourceClaim optsched creates is named with this prefix; a pod naming one at creation is refused."""
POD_CLAIM_NAME = "optsched-gpus"
"""The entry of a pod's ``spec.resourceClaims`` that holds the GPUs optsched planned for it."""
CLAIM_PLAN_LABEL = "optsched.io/plan-id"
"""On an optsched ResourceClaim: the plan id of its workload (as on its pods)."""
CLAIM_SLOT_ANNOTATION = "optsched.io/slot"
"""On an optsched ResourceClaim: ``<PodSet>/<index>``, the placement slot whose devices it selects."""
