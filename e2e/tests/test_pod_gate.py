"""The webhook's side of the gate boundary, on the real API server with Kueue's pod-based integrations.

The shipped MutatingWebhookConfiguration (manifests/webhook/) is applied as it
is, pointed at a controller run here: a plain pod and a StatefulSet's pods of
a LocalQueue optsched decides are gated at creation, planned, pinned and
bound where optsched placed them; a pod of a LocalQueue optsched has not seen
is gated (fail closed), one of a foreign queue is not, and one created bound
to a node is refused with the reason. The MutatingAdmissionPolicy variant
(manifests/mutating-admission-policy/) gates by labels alone. The controller runs with the admin
credentials of the e2e cluster, so this module runs without the gate
policies of test_gate_policy.py (they admit only optsched's service account).
"""

from __future__ import annotations

import base64
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from e2e.kube import ApiError, load_yaml_docs
from e2e.optsched_helpers import ControllerProcess, admission_check, free_port, optsched_queue
from e2e.testing import KUEUE_API, E2ECluster, Namespace, cluster_queue, local_queue
from e2e.tests.test_gate_policy import CONTAINER, GATE, QUEUE_NAME, plain_pod
from optsched.controller.certs import generate

ROOT = Path(__file__).resolve().parents[2]
WEBHOOK = ROOT / "manifests" / "webhook" / "mutatingwebhook.yaml"
MAP = ROOT / "manifests" / "mutating-admission-policy" / "policy.yaml"
FAST = ("--interval", "2", "--debounce", "0.5", "--time-limit", "5", "--workers", "1")


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


def test_the_policy_variant_gates_every_kueue_pod_that_asks_for_something(
    cluster: E2ECluster, ns: Namespace
) -> None:
    """manifests/mutating-admission-policy as shipped, its binding scoped to this namespace."""
    policy, binding = load_yaml_docs(MAP)
    policy["metadata"]["name"] = binding["spec"]["policyName"] = ns.unique("optsched-pod-gate")
    binding["metadata"]["name"] = ns.unique("optsched-pod-gate")
    only_here = {"matchLabels": {"kubernetes.io/metadata.name": ns.name}}
    binding["spec"]["matchResources"] = {"namespaceSelector": only_here}
    try:
        ns.apply([policy, binding])
    except ApiError as exc:
        if exc.status == 404:
            pytest.skip("this API server does not serve MutatingAdmissionPolicy v1")
        raise
    probes = iter(range(1000))

    def enforced() -> bool | None:
        pod = ns.apply_one(plain_pod(f"probe-{next(probes)}", labels={QUEUE_NAME: "lq"}))
        return True if GATE in gates_of(pod) else None

    cluster.wait(enforced, "the MutatingAdmissionPolicy to gate")
    assert GATE in gates_of(ns.apply_one(plain_pod("managed", labels={"kueue.x-k8s.io/managed": "true"})))
    assert GATE in gates_of(ns.apply_one(plain_pod("planned", labels={"optsched.io/plan-id": "p"})))
    empty = plain_pod("empty", labels={QUEUE_NAME: "lq"})
    empty["spec"]["containers"] = [{"name": "main", "image": "busybox:1.36"}]
    assert GATE not in gates_of(ns.apply_one(empty)), "a pod that asks for nothing is never checked"
    assert GATE not in gates_of(ns.apply_one(plain_pod("plain"))), "not Kueue's"
