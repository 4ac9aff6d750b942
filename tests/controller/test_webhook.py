"""The webhook's answer: which pods are gated at creation, which are refused, which pass untouched."""

from __future__ import annotations

import base64
import json

from optsched.controller.webhook import mutate
from optsched.kueue.managed_queues import ManagedQueues, managed_local_queues
from optsched.model.names import (
    KUEUE_ADMISSION_GATE,
    KUEUE_MANAGED_LABEL,
    KUEUE_QUEUE_NAME_LABEL,
    KUEUE_SUSPENDING_PARENT_ANNOTATION,
    PLAN_ID_LABEL,
    SCHEDULING_GATE,
)

NOTHING_READ = ManagedQueues()


def local_queue(name, cluster_queue):
    spec = {"clusterQueue": cluster_queue}
    return {"kind": "LocalQueue", "metadata": {"namespace": "ns", "name": name}, "spec": spec}


def queues():
    """ns/ours leads to a ClusterQueue requiring our check, ns/theirs to one that does not."""
    objects = [
        {"kind": "ClusterQueue", "metadata": {"name": "gpu"}, "spec": {"admissionChecks": ["optsched"]}},
        {"kind": "ClusterQueue", "metadata": {"name": "cpu"}, "spec": {}},
        local_queue("ours", "gpu"),
        local_queue("theirs", "cpu"),
    ]
    return managed_local_queues(objects, ["optsched"])


def review(pod, operation="CREATE", kind="Pod", namespace="ns"):
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "operation": operation,
            "namespace": namespace,
            "kind": {"group": "", "version": "v1", "kind": kind},
            "object": pod,
        },
    }


def patch_of(response):
    raw = response["response"].get("patch")
    return json.loads(base64.b64decode(raw)) if raw else []


def pod(labels, gates=None, node=None, name="p-0", resources=None):
    asked = {"requests": {"cpu": "1"}} if resources is None else resources
    spec = {"containers": [{"name": "c", "resources": asked}]}
    if gates is not None:
        spec["schedulingGates"] = gates
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "labels": labels}, "spec": spec}


def ours(gates=None, node=None):
    return pod({PLAN_ID_LABEL: "p1"}, gates, node)


def in_queue(queue, node=None):
    return pod({KUEUE_QUEUE_NAME_LABEL: queue}, node=node)


ADD_GATE = [{"op": "add", "path": "/spec/schedulingGates", "value": [{"name": SCHEDULING_GATE}]}]


def test_pod_of_an_admitted_workload_gets_our_gate():
    out = mutate(review(ours()), NOTHING_READ)
    assert out["response"]["allowed"] and out["response"]["uid"] == "u-1"
    assert out["response"]["patchType"] == "JSONPatch"
    assert patch_of(out) == ADD_GATE


def test_existing_gates_are_kept_and_ours_appended():
    out = mutate(review(ours([{"name": "other"}])), NOTHING_READ)
    assert patch_of(out) == [
        {"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": SCHEDULING_GATE}}
    ]


def test_already_gated_pod_is_not_patched_twice():
    assert patch_of(mutate(review(ours([{"name": SCHEDULING_GATE}])), NOTHING_READ)) == []


def test_a_plain_pod_of_a_queue_optsched_decides_is_gated_at_creation():
    assert patch_of(mutate(review(in_queue("ours")), queues())) == ADD_GATE


def test_a_queue_not_read_yet_is_gated_and_a_known_foreign_one_is_not():
    assert patch_of(mutate(review(in_queue("theirs")), NOTHING_READ)) == ADD_GATE, "fail closed"
    assert patch_of(mutate(review(in_queue("new-queue")), queues())) == ADD_GATE, "unknown LocalQueue"
    out = mutate(review(in_queue("theirs")), queues())
    assert out["response"]["allowed"] and "patch" not in out["response"]


def test_a_pod_kueue_holds_whose_queue_label_comes_later_is_gated():
    """A StatefulSet's pods: made from a template Kueue annotated, gated by Kueue, queue label added later."""
    assert patch_of(mutate(review(pod({KUEUE_MANAGED_LABEL: "true"})), queues())) == ADD_GATE
    from_template = pod({"app": "web"})
    from_template["metadata"]["annotations"] = {KUEUE_SUSPENDING_PARENT_ANNOTATION: "statefulset"}
    assert patch_of(mutate(review(from_template), queues())) == ADD_GATE
    held = pod({"app": "web"}, gates=[{"name": KUEUE_ADMISSION_GATE}])
    assert patch_of(mutate(review(held), queues())) == [
        {"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": SCHEDULING_GATE}}
    ]
    out = mutate(review(pod({KUEUE_MANAGED_LABEL: "false"}, gates=[{"name": "example.com/other"}])), queues())
    assert out["response"]["allowed"] and "patch" not in out["response"]
    foreign = pod({KUEUE_MANAGED_LABEL: "true", KUEUE_QUEUE_NAME_LABEL: "theirs"})
    assert "patch" not in mutate(review(foreign), queues())["response"], "the queue label decides"
    answer = mutate(review(pod({KUEUE_MANAGED_LABEL: "true"}, node="n1")), queues())["response"]
    assert answer["allowed"] is False and KUEUE_MANAGED_LABEL in answer["status"]["message"]


def test_a_queue_pod_that_requests_nothing_is_left_alone():
    """Kueue admits it without asking any admission check: a gate would hold it for ever; it takes nothing."""
    for labels in ({KUEUE_QUEUE_NAME_LABEL: "ours"}, {KUEUE_MANAGED_LABEL: "true"}):
        empty = pod(labels, node="n1", resources={"requests": {}})
        out = mutate(review(empty), queues())
        assert out["response"]["allowed"] and "patch" not in out["response"]
    limited = pod({KUEUE_QUEUE_NAME_LABEL: "ours"}, resources={"limits": {"nvidia.com/gpu": "1"}})
    assert patch_of(mutate(review(limited), queues())) == ADD_GATE, "a limit is a request"
    init = pod({KUEUE_QUEUE_NAME_LABEL: "ours"}, resources={})
    init["spec"]["initContainers"] = [{"name": "i", "resources": {"requests": {"memory": "1Gi"}}}]
    assert patch_of(mutate(review(init), queues())) == ADD_GATE
    overhead = pod({KUEUE_QUEUE_NAME_LABEL: "ours"}, resources={})
    overhead["spec"]["overhead"] = {"cpu": "250m"}
    assert patch_of(mutate(review(overhead), queues())) == ADD_GATE
    planned = pod({PLAN_ID_LABEL: "p"}, resources={})
    assert patch_of(mutate(review(planned), queues())) == ADD_GATE, "a planned pod is gated regardless"


def test_the_queue_is_looked_up_in_the_requests_namespace():
    """A LocalQueue of the same name in another namespace decides nothing here."""
    out = mutate(review(in_queue("theirs"), namespace="elsewhere"), queues())
    assert patch_of(out) == ADD_GATE


def test_a_pod_of_ours_created_bound_to_a_node_is_refused_with_the_reason():
    for pod_, why in ((ours(node="n1"), PLAN_ID_LABEL), (in_queue("ours", node="n1"), "ns/ours")):
        answer = mutate(review(pod_), queues())["response"]
        assert answer["allowed"] is False
        message = answer["status"]["message"]
        assert "pod ns/p-0" in message and "spec.nodeName (n1)" in message and why in message
        assert answer["status"]["code"] == 403


def test_a_bound_pod_of_a_foreign_queue_or_no_queue_is_none_of_our_business():
    for pod_ in (in_queue("theirs", node="n1"), pod({"app": "x"}, node="n1")):
        out = mutate(review(pod_), queues())
        assert out["response"]["allowed"] and "patch" not in out["response"]


def test_a_pod_named_by_the_api_server_later_is_named_by_its_prefix():
    bound = {"metadata": {"generateName": "job-", "labels": {PLAN_ID_LABEL: "p"}}, "spec": {"nodeName": "n"}}
    assert "pod ns/job-*" in mutate(review(bound), NOTHING_READ)["response"]["status"]["message"]


def test_foreign_pods_updates_and_other_kinds_pass_unchanged():
    foreign = {"metadata": {"labels": {"app": "x"}}, "spec": {}}
    for out in (
        mutate(review(foreign), queues()),
        mutate(review(ours(), operation="UPDATE"), queues()),
        mutate(review(ours(), kind="Secret"), queues()),
        mutate(review(pod({KUEUE_QUEUE_NAME_LABEL: ""})), queues()),
    ):
        assert out["response"]["allowed"] and "patch" not in out["response"]


def test_malformed_review_is_allowed_with_a_warning():
    junk = {"request": {"uid": "x", "operation": "CREATE", "kind": {"kind": "Pod"}, "object": "junk"}}
    out = mutate(junk, queues())
    assert out["response"]["allowed"] and out["response"]["warnings"]
    assert mutate({}, queues())["response"]["allowed"]
    odd = {"metadata": {"labels": ["not", "a", "map"]}, "spec": "junk"}
    assert mutate(review(odd), queues())["response"]["allowed"]


def test_a_completion_index_of_unicode_digits_is_no_index_and_no_crash():
    from optsched.controller.views import read_pod  # only this test reads pods
    from tests.controller import objects as o  # only this test builds them

    pod = o.pod("a-0", plan_id="p1", annotations={"batch.kubernetes.io/job-completion-index": "²"})
    pod["metadata"]["labels"].pop("batch.kubernetes.io/job-completion-index", None)
    assert read_pod(pod).completion_index is None
