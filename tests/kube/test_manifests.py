"""The shipped webhook, MutatingAdmissionPolicy and availability manifests say what the code relies on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from optsched.model.names import (
    KUEUE_ADMISSION_GATE,
    KUEUE_MANAGED_LABEL,
    KUEUE_QUEUE_NAME_LABEL,
    KUEUE_SUSPENDING_PARENT_ANNOTATION,
    PLAN_ID_LABEL,
    SCHEDULING_GATE,
)
from tests.kube.cel import activation, matches

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
SYSTEM_NAMESPACES = {"kube-system", "optsched-system"}


def docs(*parts: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(MANIFESTS.joinpath(*parts).read_text()) if d]


def deployment() -> dict[str, Any]:
    return docs("base", "deployment.yaml")[0]


def pod_labels() -> dict[str, str]:
    return dict(deployment()["spec"]["template"]["metadata"]["labels"])


def creating(
    labels: dict[str, str] | None,
    node: str | None = None,
    asks: dict[str, Any] | None = None,
    annotations: dict[str, str] | None = None,
    **more: Any,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "p"}
    if labels is not None:
        metadata["labels"] = labels
    if annotations is not None:
        metadata["annotations"] = annotations
    asked = {"requests": {"cpu": "1"}} if asks is None else asks
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": asked}], **more}
    if node:
        spec["nodeName"] = node
    return activation("CREATE", {"metadata": metadata, "spec": spec})


def held_by_kueue() -> list[dict[str, Any]]:
    """Pods Kueue holds that name no queue yet, one per sign of it."""
    return [
        creating({KUEUE_MANAGED_LABEL: "true"}),
        creating({"app": "web"}, annotations={KUEUE_SUSPENDING_PARENT_ANNOTATION: "statefulset"}),
        creating(None, schedulingGates=[{"name": KUEUE_ADMISSION_GATE}]),
    ]


def excluded_namespaces(selector: dict[str, Any]) -> set[str]:
    (expression,) = selector["matchExpressions"]
    assert expression["key"] == "kubernetes.io/metadata.name" and expression["operator"] == "NotIn"
    return set(expression["values"])


def test_the_webhook_is_called_for_pods_with_any_of_the_labels_and_no_other() -> None:
    (config,) = docs("webhook", "mutatingwebhook.yaml")
    (hook,) = config["webhooks"]
    assert "objectSelector" not in hook, "an objectSelector cannot say 'either label'"
    assert [rule["operations"] for rule in hook["rules"]] == [["CREATE"]]
    assert excluded_namespaces(hook["namespaceSelector"]) == SYSTEM_NAMESPACES
    assert matches(hook, "CREATE", creating({PLAN_ID_LABEL: "p"}))
    assert matches(hook, "CREATE", creating({KUEUE_QUEUE_NAME_LABEL: "lq"}))
    assert matches(hook, "CREATE", creating({KUEUE_QUEUE_NAME_LABEL: "lq"}, node="n1")), "refused there"
    for held in held_by_kueue():
        assert matches(hook, "CREATE", held), "a StatefulSet's pod, say"
    assert not matches(hook, "CREATE", creating({KUEUE_MANAGED_LABEL: "false"}))
    assert not matches(hook, "CREATE", creating({}, schedulingGates=[{"name": "example.com/other"}]))
    assert not matches(hook, "CREATE", creating({"app": "web"}))
    assert not matches(hook, "CREATE", creating(None))
    assert hook["failurePolicy"] == "Fail" and hook["clientConfig"]["service"]["path"] == "/mutate-pods"


def test_the_policy_variant_gates_the_same_pods_unless_they_are_bound() -> None:
    mutating, binding = docs("mutating-admission-policy", "policy.yaml")
    spec = mutating["spec"]
    assert binding["spec"]["policyName"] == mutating["metadata"]["name"]
    assert excluded_namespaces(spec["matchConstraints"]["namespaceSelector"]) == SYSTEM_NAMESPACES
    assert "objectSelector" not in spec["matchConstraints"]
    assert matches(spec, "CREATE", creating({PLAN_ID_LABEL: "p"}))
    assert matches(spec, "CREATE", creating({KUEUE_QUEUE_NAME_LABEL: "lq"}))
    for held in held_by_kueue():
        assert matches(spec, "CREATE", held)
    assert not matches(spec, "CREATE", creating({KUEUE_QUEUE_NAME_LABEL: "lq"}, node="n1"))
    assert not matches(spec, "CREATE", creating({KUEUE_MANAGED_LABEL: "false"}))
    assert not matches(spec, "CREATE", creating({"app": "web"}))
    assert not matches(spec, "UPDATE", creating({PLAN_ID_LABEL: "p"}))
    queued = {KUEUE_QUEUE_NAME_LABEL: "lq"}
    assert not matches(spec, "CREATE", creating(queued, asks={})), "requests nothing: never checked"
    assert not matches(spec, "CREATE", creating(queued, asks={"requests": {}, "limits": {}}))
    assert matches(spec, "CREATE", creating(queued, asks={"limits": {"nvidia.com/gpu": "1"}}))
    assert matches(spec, "CREATE", creating({PLAN_ID_LABEL: "p"}, asks={})), "planned: gated anyway"
    init = [{"name": "i", "resources": {"requests": {"memory": "1Gi"}}}]
    assert matches(spec, "CREATE", creating(queued, asks={}, initContainers=init))
    assert matches(spec, "CREATE", creating(queued, asks={}, overhead={"cpu": "250m"}))
    pod_level = {"requests": {"cpu": "2"}}
    assert matches(spec, "CREATE", creating(queued, asks={}, resources=pod_level))
    (mutation,) = spec["mutations"]
    assert f'name: "{SCHEDULING_GATE}"' in mutation["applyConfiguration"]["expression"]


def test_base_installs_a_disruption_budget_keeping_one_replica() -> None:
    assert {"pdb.yaml", "networkpolicy.yaml"} <= set(docs("base", "kustomization.yaml")[0]["resources"])
    (budget,) = docs("base", "pdb.yaml")
    assert budget["kind"] == "PodDisruptionBudget" and budget["spec"]["minAvailable"] == 1
    assert budget["spec"]["selector"]["matchLabels"] == pod_labels()
    assert deployment()["spec"]["replicas"] > budget["spec"]["minAvailable"], "a drain can still proceed"


def test_the_deployment_runs_at_the_priority_of_critical_cluster_components() -> None:
    assert deployment()["spec"]["template"]["spec"]["priorityClassName"] == "system-cluster-critical"


def test_the_network_policy_admits_only_the_webhook_and_metrics_ports_of_optsched() -> None:
    (policy,) = docs("base", "networkpolicy.yaml")
    assert policy["kind"] == "NetworkPolicy" and policy["spec"]["policyTypes"] == ["Ingress"]
    assert policy["spec"]["podSelector"]["matchLabels"] == pod_labels()
    (rule,) = policy["spec"]["ingress"]
    assert "from" not in rule, "the API server calls from wherever it runs"
    ports = {p["port"] for p in rule["ports"]}
    (container,) = deployment()["spec"]["template"]["spec"]["containers"]
    assert ports == {"webhook", "metrics"}
    assert ports <= {p["name"] for p in container["ports"]}, "every admitted port is one the pod serves"


def test_the_controller_may_renew_the_certificate_secret() -> None:
    (role,) = [d for d in docs("base", "rbac.yaml") if d["kind"] == "Role"]
    rules = [r for r in role["rules"] if "secrets" in r["resources"]]
    assert {"get", "create", "update"} <= {v for r in rules for v in r["verbs"]}
    for rule in rules:
        if {"get", "update"} & set(rule["verbs"]):
            assert rule.get("resourceNames") == ["optsched-webhook-tls"], "read and renew that Secret only"
