"""The optsched.io/placement gate is a boundary on the real API server: only optsched's account lifts it.

The shipped ValidatingAdmissionPolicy (manifests/base/gate-policy.yaml) is
applied as it is. A tenant's service account with edit rights on its own
namespace tries to release a gated pod; optsched's service account then
does. Tokens come from the TokenRequest API, so each request carries exactly
that account's identity.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.kube import ApiError, Kube, load_yaml_docs
from e2e.testing import E2ECluster, Namespace, bearer_client

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "manifests" / "base" / "gate-policy.yaml"
GATE = "optsched.io/placement"
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
