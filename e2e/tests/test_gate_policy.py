"""The optsched.io/placement gate is a boundary on the real API server.

The shipped ValidatingAdmissionPolicies (manifests/base/gate-policy.yaml) are
applied as they are: a tenant's service account with edit rights on its own
namespace tries to release a gated pod, to create a pod of optsched's bound to
a node, and to write optsched's own pod annotations; optsched's service
account then does what only it may. Tokens come from the TokenRequest API, so
each request carries exactly that account's identity. The shipped
MutatingWebhookConfiguration (manifests/webhook/, pointed at a controller run
here) gates a plain pod of a LocalQueue optsched decides at creation, through
Kueue's pod integration, and refuses one created bound.
"""

from __future__ import annotations

import base64
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from e2e.kube import ApiError, Kube, load_yaml_docs
from e2e.optsched_helpers import ControllerProcess, admission_check, free_port, optsched_queue
from e2e.testing import KUEUE_API, E2ECluster, Namespace, bearer_client, cluster_queue, local_queue
from optsched.controller.certs import generate

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "manifests" / "base" / "gate-policy.yaml"
WEBHOOK = ROOT / "manifests" / "webhook" / "mutatingwebhook.yaml"
GATE = "optsched.io/placement"
PLAN_ID = "optsched.io/plan-id"
GPUS = "optsched.io/gpus"
QUEUE_NAME = "kueue.x-k8s.io/queue-name"
FAST = ("--interval", "2", "--debounce", "0.5", "--time-limit", "5", "--workers", "1")
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


def shipped_webhook(ns: Namespace, port: int) -> Path:
    """The shipped MutatingWebhookConfiguration, pointed at 127.0.0.1:port and scoped to ``ns``.

    Returns the directory with the serving certificate for ``--webhook-cert-dir``.
    """
    material = generate(["localhost"], ("127.0.0.1",))
    directory = Path(tempfile.mkdtemp(prefix="optsched-webhook-"))
    material.write(str(directory))
    (config,) = load_yaml_docs(WEBHOOK)
    config["metadata"]["name"] = ns.unique("optsched-pod-gate")
    for hook in config["webhooks"]:
        hook["clientConfig"] = {
            "url": f"https://127.0.0.1:{port}/mutate-pods",
            "caBundle": base64.b64encode(material.ca_pem).decode(),
        }
        hook["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": ns.name}}
    ns.apply(config)
    return directory


def gates_of(pod: dict[str, Any]) -> list[str]:
    return [g["name"] for g in pod["spec"].get("schedulingGates") or []]


@contextmanager
def gating_controller(cluster: E2ECluster, ns: Namespace) -> Iterator[ControllerProcess]:
    """A controller serving the shipped webhook for ``ns``, LocalQueue ``lq`` (ours) and ``foreign`` (not).

    Yields once the webhook answers and the replica has seen that ``foreign`` is not optsched's.
    """
    check = ns.unique("optsched")
    ns.apply(admission_check(check, f"optsched.io/{check}"))
    port = free_port()
    certs = shipped_webhook(ns, port)
    args = ["--check-name", check, "--controller-name", f"optsched.io/{check}", *FAST]
    with ControllerProcess(
        cluster.kubeconfig, *args, "--webhook-port", str(port), "--webhook-cert-dir", str(certs)
    ) as proc:
        try:
            cluster.wait_condition(KUEUE_API, "AdmissionCheck", check, "Active", timeout=60)
            optsched_queue(ns, check, gpus=8)
            foreign_cq = ns.unique("cq-foreign")
            foreign_flavor = ns.unique("gpu")  # the flavor optsched_queue made
            ns.apply(
                [cluster_queue(foreign_cq, foreign_flavor, 8, cpu="50"), local_queue("foreign", foreign_cq)]
            )
            probe = cluster.wait(creating(ns, "lq"), "the webhook to answer", timeout=120)
            assert GATE in gates_of(probe), f"gates: {gates_of(probe)}"
            in_foreign = creating(ns, "foreign")

            def foreign_seen() -> bool | None:
                pod = in_foreign()
                return True if pod is not None and GATE not in gates_of(pod) else None

            cluster.wait(foreign_seen, "the replica to see that LocalQueue foreign is not optsched's")
            yield proc
        finally:
            print(
                f"--- controller log ({proc.log_path}) tail ---\n" + "\n".join(proc.log().splitlines()[-40:])
            )


def test_a_plain_pod_of_a_queue_optsched_decides_is_gated_at_creation_and_pinned(
    cluster: E2ECluster, ns: Namespace
) -> None:
    with gating_controller(cluster, ns):
        ours = ns.apply_one(plain_pod("ours", labels={QUEUE_NAME: "lq"}))
        assert GATE in gates_of(ours) and "kueue.x-k8s.io/admission" in gates_of(ours)
        pinned_by_optsched(cluster, ns, "ours")
        unknown = ns.apply_one(plain_pod("unknown", labels={QUEUE_NAME: "no-such-queue"}))
        assert GATE in gates_of(unknown), "a LocalQueue optsched has not seen is gated (fail closed)"
        foreign = ns.apply_one(plain_pod("foreign", labels={QUEUE_NAME: "foreign"}))
        assert GATE not in gates_of(foreign), "a LocalQueue whose ClusterQueue lacks our check is not"
        with pytest.raises(ApiError) as info:
            ns.apply_one(plain_pod("bound", labels={QUEUE_NAME: "lq"}, nodeName="h100-000"))
        message = str(info.value)
        assert f"pod {ns.name}/bound" in message and "spec.nodeName (h100-000)" in message
        assert f"LocalQueue {ns.name}/lq" in message


def test_the_pods_of_a_statefulset_in_a_queue_optsched_decides_are_gated_and_pinned(
    cluster: E2ECluster, ns: Namespace
) -> None:
    """Kueue's statefulset integration: pods made before admission, their queue label added later."""
    with gating_controller(cluster, ns):
        ns.apply(
            {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "metadata": {"name": "web", "labels": {QUEUE_NAME: "lq"}},
                "spec": {
                    "replicas": 2,
                    "podManagementPolicy": "Parallel",
                    "serviceName": "web",
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": {
                        "metadata": {"labels": {"app": "web"}},
                        "spec": {"containers": [CONTAINER]},
                    },
                },
            }
        )

        for name in ("web-0", "web-1"):
            pod = pinned_by_optsched(cluster, ns, name)
            assert pod["metadata"]["labels"].get(QUEUE_NAME) == "lq"


def pinned_by_optsched(cluster: E2ECluster, ns: Namespace, name: str) -> dict[str, Any]:
    """Wait for the pod to be bound where optsched pinned it: only a pod optsched gated gets a pin.

    kube-scheduler would bind an ungated pod anywhere, without ``optsched.io/pod-index``.
    """

    def bound() -> dict[str, Any] | None:
        pod = cluster.get("v1", "Pod", name, ns.name)
        return pod if pod is not None and pod["spec"].get("nodeName") else None

    pod = cluster.wait(bound, f"pod {name} bound")
    pinned_to = (pod["spec"].get("nodeSelector") or {}).get("kubernetes.io/hostname")
    assert "optsched.io/pod-index" in (pod["metadata"].get("annotations") or {}), f"{name} bound unpinned"
    assert pinned_to == pod["spec"]["nodeName"], (
        f"{name} bound to {pod['spec']['nodeName']}, pinned to {pinned_to}"
    )
    return pod


def creating(ns: Namespace, queue: str) -> Callable[[], dict[str, Any] | None]:
    """A probe-pod maker for ``queue``: the created pod, or None while the webhook does not answer."""
    names = iter(range(1000))

    def create() -> dict[str, Any] | None:
        try:
            return ns.apply_one(plain_pod(f"probe-{queue}-{next(names)}", labels={QUEUE_NAME: queue}))
        except ApiError as exc:  # the webhook is not listening yet: failurePolicy Fail refuses
            if "failed calling webhook" in str(exc):
                return None
            raise

    return create
