"""The shipped admission policies: installed by base, and what they allow and deny, evaluated as CEL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from optsched.model.names import GPUS_ANNOTATION, PLAN_ID_LABEL, POD_INDEX_ANNOTATION, SCHEDULING_GATE
from tests.kube.cel import OPTSCHED_USER, denial

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"


def docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def test_base_installs_the_gate_policy_and_its_binding() -> None:
    kustomization = docs(MANIFESTS / "base" / "kustomization.yaml")[0]
    assert "gate-policy.yaml" in kustomization["resources"]
    policy, binding = docs(MANIFESTS / "base" / "gate-policy.yaml")[:2]
    assert (
        policy["kind"] == "ValidatingAdmissionPolicy"
        and binding["kind"] == "ValidatingAdmissionPolicyBinding"
    )
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    assert policy["spec"]["failurePolicy"] == "Fail"
    (rule,) = policy["spec"]["matchConstraints"]["resourceRules"]
    assert rule["resources"] == ["pods"] and rule["operations"] == ["UPDATE"], (
        "deleting a gated pod stays allowed"
    )


def test_the_policy_names_our_gate_and_the_controllers_own_service_account() -> None:
    policy = docs(MANIFESTS / "base" / "gate-policy.yaml")[0]
    kustomization = docs(MANIFESTS / "base" / "kustomization.yaml")[0]
    deployment = docs(MANIFESTS / "base" / "deployment.yaml")[0]
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    username = f"system:serviceaccount:{kustomization['namespace']}:{account}"
    conditions = {c["name"]: c["expression"] for c in policy["spec"]["matchConditions"]}
    assert f'"{SCHEDULING_GATE}"' in conditions["had-the-optsched-gate"]
    assert f'"{username}"' in conditions["not-optsched-itself"]
    (validation,) = policy["spec"]["validations"]
    assert f'"{SCHEDULING_GATE}"' in validation["expression"]


# -- what the policies decide, evaluated like the API server does (tests/kube/cel.py) --------------


def policy(name: str) -> dict[str, Any]:
    policies = docs(MANIFESTS / "base" / "gate-policy.yaml")
    kind = "ValidatingAdmissionPolicy"
    (found,) = [d for d in policies if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


def bindings() -> dict[str, dict[str, Any]]:
    found = docs(MANIFESTS / "base" / "gate-policy.yaml")
    return {d["spec"]["policyName"]: d for d in found if d["kind"] == "ValidatingAdmissionPolicyBinding"}


def pod(
    *, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None, **spec: Any
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "p", "namespace": "team"}
    if labels is not None:
        metadata["labels"] = labels
    if annotations is not None:
        metadata["annotations"] = annotations
    return {"metadata": metadata, "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}], **spec}}


GATED = [{"name": SCHEDULING_GATE}]


def test_every_policy_is_bound_to_deny() -> None:
    found = docs(MANIFESTS / "base" / "gate-policy.yaml")
    names = {d["metadata"]["name"] for d in found if d["kind"] == "ValidatingAdmissionPolicy"}
    assert names == {
        "optsched-gate-integrity",
        "optsched-not-bound-at-create",
        "optsched-pod-annotations",
        "optsched-pod-changes",
    }
    assert set(bindings()) == names
    for name, binding in bindings().items():
        assert binding["spec"]["validationActions"] == ["Deny"], name
        assert policy(name)["spec"]["failurePolicy"] == "Fail"


def test_a_tenant_dropping_the_gate_is_denied_and_optsched_is_not() -> None:
    gate = policy("optsched-gate-integrity")
    message = denial(gate, "UPDATE", pod(), pod(schedulingGates=GATED))
    assert message is not None and "pod team/p" in message and "system:serviceaccount:team:tenant" in message
    assert denial(gate, "UPDATE", pod(), pod(schedulingGates=GATED), user=OPTSCHED_USER) is None
    assert denial(gate, "UPDATE", pod(schedulingGates=GATED), pod(schedulingGates=GATED)) is None
    other = [{"name": "example.com/other"}]
    assert denial(gate, "UPDATE", pod(), pod(schedulingGates=other)) is None, "not our gate"


def test_a_pod_labelled_with_a_plan_id_may_not_be_created_bound() -> None:
    bound = policy("optsched-not-bound-at-create")
    ours = {PLAN_ID_LABEL: "plan-1"}
    message = denial(bound, "CREATE", pod(labels=ours, nodeName="gpu-1"))
    assert message is not None and "pod team/p" in message and "spec.nodeName (gpu-1)" in message
    assert denial(bound, "CREATE", pod(labels=ours)) is None
    assert denial(bound, "CREATE", pod(labels=ours, nodeName="")) is None
    assert denial(bound, "CREATE", pod(labels={"app": "x"}, nodeName="gpu-1")) is None, "not ours"
    assert denial(bound, "CREATE", pod(nodeName="gpu-1")) is None, "no labels at all"
    assert denial(bound, "UPDATE", pod(labels=ours, nodeName="gpu-1"), pod(labels=ours)) is None, "binding"


def test_a_pod_may_not_be_created_with_optscheds_own_annotations() -> None:
    guarded = policy("optsched-pod-annotations")
    for key in (POD_INDEX_ANNOTATION, GPUS_ANNOTATION):
        message = denial(guarded, "CREATE", pod(annotations={key: "0"}))
        assert message is not None and "pod team/p" in message and "remove them" in message
    assert denial(guarded, "CREATE", pod(annotations={"team": "a"})) is None
    assert denial(guarded, "CREATE", pod()) is None


def test_only_optsched_adds_changes_or_removes_them() -> None:
    guarded = policy("optsched-pod-annotations")
    plain, pinned = pod(annotations={"team": "a"}), pod(annotations={GPUS_ANNOTATION: "0,1", "team": "a"})
    moved = pod(annotations={GPUS_ANNOTATION: "4,5", "team": "a"})
    for new, old in ((pinned, plain), (moved, pinned), (plain, pinned), (pod(), pinned)):
        message = denial(guarded, "UPDATE", new, old)
        assert message is not None and "system:serviceaccount:team:tenant tried" in message
        assert denial(guarded, "UPDATE", new, old, user=OPTSCHED_USER) is None
    relabelled = pod(labels={"x": "y"}, annotations={GPUS_ANNOTATION: "0,1", "team": "a"})
    assert denial(guarded, "UPDATE", relabelled, pinned) is None, "other changes stay allowed"
    assert denial(guarded, "UPDATE", pod(annotations={"team": "b"}), plain) is None


def test_optsched_may_only_pin_or_ungate_pods_that_carry_its_gate() -> None:
    changes = policy("optsched-pod-changes")
    gated = pod(labels={"app": "x"}, annotations={"team": "a"}, schedulingGates=GATED)
    pinned = pod(
        labels={"app": "x"},
        annotations={"team": "a", POD_INDEX_ANNOTATION: "0", GPUS_ANNOTATION: "0,1"},
        nodeSelector={"kubernetes.io/hostname": "gpu-1"},
    )
    assert denial(changes, "UPDATE", pinned, gated, user=OPTSCHED_USER) is None
    bare = pod(schedulingGates=GATED)
    first_annotations = pod(
        annotations={GPUS_ANNOTATION: "0"}, nodeSelector={"kubernetes.io/hostname": "gpu-1"}
    )
    assert denial(changes, "UPDATE", first_annotations, bare, user=OPTSCHED_USER) is None, "none before"
    assert (
        denial(
            changes, "UPDATE", pod(labels={"app": "x"}, annotations={"team": "a"}), gated, user=OPTSCHED_USER
        )
        is None
    )
    assert denial(changes, "UPDATE", pinned, gated) is None, "only optsched's own account is narrowed"
    ungated = pod(labels={"app": "x"}, annotations={"team": "a"})
    message = denial(changes, "UPDATE", pinned, ungated, user=OPTSCHED_USER)
    assert message is not None and "does not" in message, "pods without the gate are not touched"
    relabelled = pod(
        labels={"app": "y"}, annotations={"team": "a"}, nodeSelector={"kubernetes.io/hostname": "gpu-1"}
    )
    assert "labels" in (denial(changes, "UPDATE", relabelled, gated, user=OPTSCHED_USER) or "")
    reannotated = pod(labels={"app": "x"}, annotations={"team": "b"})
    assert "annotations" in (denial(changes, "UPDATE", reannotated, gated, user=OPTSCHED_USER) or "")
    tolerant = pod(labels={"app": "x"}, annotations={"team": "a"}, tolerations=[{"operator": "Exists"}])
    assert "nodeSelector" in (denial(changes, "UPDATE", tolerant, gated, user=OPTSCHED_USER) or "")
