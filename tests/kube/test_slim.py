"""The cached form of a pod keeps everything optsched reads of it, and drops the rest."""

from __future__ import annotations

import copy
from typing import Any

from optsched.controller.views import read_pod
from optsched.kube.documents import clean_item
from optsched.kube.slim import slim_pod
from optsched.snapshot.pods import gpu_indices
from optsched.snapshot.usage import pod_node, pod_usage_request

POD: dict[str, Any] = {
    "metadata": {
        "name": "train-0",
        "generateName": "train-",
        "namespace": "ml",
        "uid": "u-1",
        "resourceVersion": "42",
        "creationTimestamp": "2026-01-01T00:01:00Z",
        "labels": {"optsched.io/plan-id": "p1", "kueue.x-k8s.io/podset": "main"},
        "annotations": {
            "optsched.io/gpus": "0,1",
            "optsched.io/pod-index": "0",
            "kueue.x-k8s.io/workload": "w",
        },
        "ownerReferences": [{"kind": "Job", "name": "train", "uid": "j-1", "controller": True}],
        "finalizers": ["batch.kubernetes.io/job-tracking"],
        "managedFields": [{"manager": "kube-controller-manager", "fieldsV1": {"f:spec": {}}}],
    },
    "spec": {
        "nodeName": "n1",
        "schedulingGates": [{"name": "other.io/gate"}],
        "nodeSelector": {"kubernetes.io/hostname": "n1"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
        "overhead": {"cpu": "250m"},
        "volumes": [{"name": "cache", "emptyDir": {}}],
        "initContainers": [
            {
                "name": "fetch",
                "image": "busybox",
                "resources": {"requests": {"cpu": "2"}},
                "restartPolicy": "Always",
            }
        ],
        "containers": [
            {
                "name": "trainer",
                "image": "trainer:1",
                "command": ["torchrun", "train.py"],
                "env": [{"name": "WORLD_SIZE", "value": "2"}],
                "resources": {"requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "2"}},
            }
        ],
    },
    "status": {
        "phase": "Running",
        "conditions": [
            {"type": "Ready", "status": "True"},
            {"type": "PodScheduled", "status": "True"},
        ],
        "containerStatuses": [{"name": "trainer", "ready": True, "imageID": "sha256:ab"}],
        "podIP": "10.0.0.1",
    },
}


def test_what_optsched_reads_of_a_pod_is_the_same_in_its_cached_form() -> None:
    raw = clean_item(POD, kind="Pod", api_version="v1")
    slim = slim_pod(copy.deepcopy(raw))
    assert pod_usage_request(slim) == pod_usage_request(raw)
    assert pod_node(slim) == pod_node(raw) == "n1"
    assert gpu_indices(slim, 8) == gpu_indices(raw, 8) == [0, 1]
    assert read_pod(slim) == read_pod(raw)
    assert slim["metadata"]["ownerReferences"] == POD["metadata"]["ownerReferences"]
    assert slim["spec"]["tolerations"] == POD["spec"]["tolerations"]


def test_the_cached_form_drops_what_optsched_never_reads() -> None:
    slim = slim_pod(clean_item(POD, kind="Pod", api_version="v1"))
    assert set(slim["metadata"]) == {
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "labels",
        "annotations",
        "ownerReferences",
    }
    assert slim["spec"]["containers"] == [
        {"name": "trainer", "resources": {"requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "2"}}}
    ]
    assert "volumes" not in slim["spec"]
    assert slim["status"] == {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}]}
    assert POD["metadata"]["managedFields"]  # the input is left as it was
