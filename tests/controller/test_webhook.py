from __future__ import annotations

import base64
import json

from optsched.controller.webhook import mutate
from optsched.model.names import PLAN_ID_LABEL, SCHEDULING_GATE


def review(pod, operation="CREATE", kind="Pod"):
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "operation": operation,
            "kind": {"group": "", "version": "v1", "kind": kind},
            "object": pod,
        },
    }


def patch_of(response):
    raw = response["response"].get("patch")
    return json.loads(base64.b64decode(raw)) if raw else []


def ours(gates=None):
    spec = {"containers": [{"name": "c"}]}
    if gates is not None:
        spec["schedulingGates"] = gates
    return {"metadata": {"labels": {PLAN_ID_LABEL: "p1"}}, "spec": spec}


def test_pod_of_an_admitted_workload_gets_our_gate():
    out = mutate(review(ours()))
    assert out["response"]["allowed"] and out["response"]["uid"] == "u-1"
    assert out["response"]["patchType"] == "JSONPatch"
    assert patch_of(out) == [
        {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": SCHEDULING_GATE}]}
    ]


def test_existing_gates_are_kept_and_ours_appended():
    out = mutate(review(ours([{"name": "other"}])))
    assert patch_of(out) == [
        {"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": SCHEDULING_GATE}}
    ]


def test_already_gated_pod_is_not_patched_twice():
    assert patch_of(mutate(review(ours([{"name": SCHEDULING_GATE}])))) == []


def test_foreign_pods_updates_and_other_kinds_pass_unchanged():
    foreign = {"metadata": {"labels": {"app": "x"}}, "spec": {}}
    for out in (
        mutate(review(foreign)),
        mutate(review(ours(), operation="UPDATE")),
        mutate(review(ours(), kind="Secret")),
    ):
        assert out["response"]["allowed"] and "patch" not in out["response"]


def test_malformed_review_is_allowed_with_a_warning():
    out = mutate({"request": {"uid": "x", "operation": "CREATE", "kind": {"kind": "Pod"}, "object": "junk"}})
    assert out["response"]["allowed"] and out["response"]["warnings"]
    assert mutate({})["response"]["allowed"]
