"""The optsched.io/placement gate is a boundary on the real API server.

The shipped ValidatingAdmissionPolicies (manifests/base/gate-policy.yaml) are
applied as they are: a tenant's service account with edit rights on its own
namespace tries to release a gated pod, to create a pod of optsched's bound to
a node, and to write optsched's own pod annotations; optsched's service
account then does what only it may. Tokens come from the TokenRequest API, so
each request carries exactly that account's identity. The webhook's side of
the boundary is in test_pod_gate.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.kube import ApiError, Kube, load_yaml_docs
from e2e.testing import E2ECluster, Namespace, bearer_client

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "manifests" / "base" / "gate-policy.yaml"
GATE = "optsched.io/placement"
PLAN_ID = "optsched.io/plan-id"
GPUS = "optsched.io/gpus"
QUEUE_NAME = "kueue.x-k8s.io/queue-name"
OPTSCHED_NS = "optsched-system"


@pytest.fixture(scope="module")
def policy(cluster: E2ECluster) -> Iterator[None]:
    cluster.wait(lambda: _usable(cluster), f"namespace {OPTSCHED_NS} not terminating", timeout=120)
    created_ns = cluster.get("v1", "Namespace", OPTSCHED_NS) is None
    cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": OPTSCHED_NS}})
    account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "optsched", "namespace": OPTSCHED_NS},
    }
    cluster.apply(account)
    objects = load_yaml_docs(POLICY)
    cluster.apply(objects)
    yield
    for obj in reversed(objects):
        cluster.delete(obj)
    cluster.delete(account)
    if created_ns:
        cluster.kube.delete("v1", "Namespace", OPTSCHED_NS)


def _usable(cluster: E2ECluster) -> bool | None:
    """The namespace is absent or active (a test before may have just deleted it)."""
    found = cluster.get("v1", "Namespace", OPTSCHED_NS)
    return True if found is None or (found.get("status") or {}).get("phase") != "Terminating" else None


def account_client(cluster: E2ECluster, namespace: str, name: str) -> Kube:
    path = cluster.kube.path("v1", "ServiceAccount", name, namespace, "token")
    review = cluster.kube.request(
        "POST", path, json={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
    )
    return bearer_client(cluster, review["status"]["token"], name)


def may_edit_pods(ns: Namespace, namespace_of_account: str, account: str) -> None:
    role = ns.unique(f"pods-{account}")
    ns.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": role},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["pods"],
                    "verbs": ["get", "list", "patch", "update", "delete"],
                }
            ],
        }
    )
    ns.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": role},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace_of_account}],
        }
    )


def gated_pod(ns: Namespace, name: str) -> dict[str, Any]:
    return ns.apply_one(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "schedulingGates": [{"name": GATE}, {"name": "example.com/other"}],
                "containers": [{"name": "main", "image": "busybox:1.36"}],
            },
        }
    )


def test_a_tenant_cannot_lift_the_gate_and_optsched_can(
    cluster: E2ECluster, policy: None, ns: Namespace
) -> None:
    ns.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "tenant"}})
    may_edit_pods(ns, ns.name, "tenant")
    may_edit_pods(ns, OPTSCHED_NS, "optsched")
    gated_pod(ns, "held")
    tenant = account_client(cluster, ns.name, "tenant")
    optsched = account_client(cluster, OPTSCHED_NS, "optsched")
    keep_other = {"spec": {"schedulingGates": [{"name": "example.com/other"}]}}

    probes = iter(range(1000))

    def enforced() -> bool | None:
        """A fresh gated probe pod per try: a policy still loading lets the lift through, once."""
        probe = f"probe-{next(probes)}"
        gated_pod(ns, probe)
        try:
            tenant.patch("v1", "Pod", probe, keep_other, namespace=ns.name)
        except ApiError as exc:
            # RBAC (the RoleBinding just made) and the policy both answer 403; wait for the policy's.
            return True if exc.status == 403 and "only optsched lifts" in str(exc) else None
        return None

    cluster.wait(enforced, "the gate policy to be enforced")
    with pytest.raises(ApiError) as info:
        tenant.patch("v1", "Pod", "held", {"spec": {"schedulingGates": None}}, namespace=ns.name)
    assert info.value.status == 403
    assert f"pod {ns.name}/held" in str(info.value) and f"system:serviceaccount:{ns.name}:tenant" in str(
        info.value
    )
    labelled = tenant.patch("v1", "Pod", "held", {"metadata": {"labels": {"team": "a"}}}, namespace=ns.name)
    assert [g["name"] for g in labelled["spec"]["schedulingGates"]] == [GATE, "example.com/other"]
    lifted = optsched.patch("v1", "Pod", "held", keep_other, namespace=ns.name)
    assert [g["name"] for g in lifted["spec"]["schedulingGates"]] == ["example.com/other"]
    gated_pod(ns, "gone")
    assert tenant.delete("v1", "Pod", "gone", ns.name), "deleting a gated pod stays allowed"
    tenant.close()
    optsched.close()


def until_denied(create: Callable[[str], object], phrase: str, what: str, cluster: E2ECluster) -> None:
    """Wait for a policy just applied to be enforced: a fresh probe per try until one is refused."""
    probes = iter(range(1000))

    def refused() -> bool | None:
        try:
            create(f"probe-{next(probes)}")
        except ApiError as exc:
            return True if exc.status in (400, 403) and phrase in str(exc) else None
        return None

    cluster.wait(refused, what)


CONTAINER = {"name": "main", "image": "busybox:1.36", "resources": {"requests": {"cpu": "100m"}}}
"""A request, so Kueue assigns the workload a flavor and with it the ClusterQueue's admission check."""


def plain_pod(name: str, *, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"containers": [CONTAINER], **spec},
    }


def test_a_pod_with_a_plan_id_created_bound_to_a_node_is_refused(
    cluster: E2ECluster, policy: None, ns: Namespace
) -> None:
    ours = {PLAN_ID: "forged-plan"}

    def bound(name: str) -> object:
        return ns.apply_one(plain_pod(name, labels=ours, nodeName="h100-000"))

    until_denied(bound, "may not be set at creation", "the not-bound-at-create policy", cluster)
    with pytest.raises(ApiError) as info:
        bound("bound")
    assert info.value.status == 403
    assert f"pod {ns.name}/bound" in str(info.value) and "spec.nodeName (h100-000)" in str(info.value)
    assert ns.apply_one(plain_pod("unbound", labels=ours))["spec"].get("nodeName") in (None, "")
    assert ns.apply_one(plain_pod("foreign", nodeName="h100-000"))["spec"]["nodeName"] == "h100-000"


def test_only_optsched_writes_its_pod_annotations(cluster: E2ECluster, policy: None, ns: Namespace) -> None:
    ns.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "tenant"}})
    may_edit_pods(ns, ns.name, "tenant")
    may_edit_pods(ns, OPTSCHED_NS, "optsched")
    tenant = account_client(cluster, ns.name, "tenant")
    optsched = account_client(cluster, OPTSCHED_NS, "optsched")

    def with_gpus(name: str) -> object:
        pod = plain_pod(name)
        pod["metadata"]["annotations"] = {GPUS: "0,1"}
        return ns.apply_one(pod)

    until_denied(with_gpus, "written by optsched", "the pod-annotations policy", cluster)
    gated_pod(ns, "p")
    claim = {"metadata": {"annotations": {GPUS: "4,5,6,7"}}}
    with pytest.raises(ApiError) as info:
        tenant.patch("v1", "Pod", "p", claim, namespace=ns.name)
    assert info.value.status == 403 and f"system:serviceaccount:{ns.name}:tenant tried" in str(info.value)
    pinned = optsched.patch("v1", "Pod", "p", {"metadata": {"annotations": {GPUS: "0,1"}}}, namespace=ns.name)
    assert pinned["metadata"]["annotations"][GPUS] == "0,1"
    for change in ({GPUS: "2,3"}, {GPUS: None}):
        with pytest.raises(ApiError):
            tenant.patch("v1", "Pod", "p", {"metadata": {"annotations": change}}, namespace=ns.name)
    labelled = tenant.patch("v1", "Pod", "p", {"metadata": {"labels": {"team": "a"}}}, namespace=ns.name)
    assert labelled["metadata"]["annotations"][GPUS] == "0,1", "other edits stay allowed"
    tenant.close()
    optsched.close()


def test_every_policy_type_checks_against_the_pod_schema(cluster: E2ECluster, policy: None) -> None:
    """The API server type-checks each expression against Pod's schema and reports any doubt in status."""
    kind = "ValidatingAdmissionPolicy"
    for name in [d["metadata"]["name"] for d in load_yaml_docs(POLICY) if d["kind"] == kind]:

        def checked(name: str = name) -> dict[str, Any] | None:
            found = cluster.get("admissionregistration.k8s.io/v1", kind, name)
            status = (found or {}).get("status") or {}
            current = status.get("observedGeneration") == (found or {}).get("metadata", {}).get("generation")
            return status if current and "typeChecking" in status else None

        status = cluster.wait(checked, f"type checking of {name}")
        assert not status["typeChecking"].get("expressionWarnings"), f"{name}: {status['typeChecking']}"


def test_the_availability_manifests_are_accepted_by_the_api_server(
    cluster: E2ECluster, ns: Namespace
) -> None:
    """PodDisruptionBudget, NetworkPolicy and the Deployment with its priority class, created as a dry run."""
    base = ROOT / "manifests" / "base"
    for path in (base / "pdb.yaml", base / "networkpolicy.yaml", base / "deployment.yaml"):
        for obj in load_yaml_docs(path):
            obj["metadata"]["namespace"] = ns.name
            created = cluster.kube.create(obj, dry_run=True)
            assert created["metadata"]["name"] == obj["metadata"]["name"], path.name
