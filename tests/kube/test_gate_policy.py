"""The shipped gate policy: installed by base, about our gate, and lifted only by the controller's account."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from optsched.model.names import SCHEDULING_GATE

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"


def docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def test_base_installs_the_gate_policy_and_its_binding() -> None:
    kustomization = docs(MANIFESTS / "base" / "kustomization.yaml")[0]
    assert "gate-policy.yaml" in kustomization["resources"]
    policy, binding = docs(MANIFESTS / "base" / "gate-policy.yaml")
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
