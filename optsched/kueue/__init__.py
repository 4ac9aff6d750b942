"""Kueue objects in (Workloads, queues, flavors, topologies) and, later, admission out."""

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSIONS = ("v1beta2", "v1beta1")
