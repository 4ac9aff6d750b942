"""optsched run's runtime on the real API server: secure metrics reviewed by it, liveness, shutdown.

* ``/metrics`` over HTTPS: the API server's TokenReview and SubjectAccessReview
  decide each scrape (no token 401, a service account without the
  ``nonResourceURLs: [/metrics]`` grant 403, one with it 200);
  ``/healthz`` answers without a token.
* A clean stop of the only replica sets its AdmissionCheck ``Active=False``.
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from e2e.optsched_helpers import ControllerProcess, admission_check, free_port
from e2e.testing import KUEUE_API, E2ECluster, Namespace

FAST = ("--interval", "2", "--debounce", "0.5", "--time-limit", "5", "--workers", "1")


def _token(cluster: E2ECluster, namespace: str, account: str) -> str:
    path = cluster.kube.path("v1", "ServiceAccount", account, namespace, "token")
    review = cluster.kube.request(
        "POST", path, json={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
    )
    return str(review["status"]["token"])


def _accounts(ns: Namespace, reader_role: str) -> None:
    for account in ("scraper", "nobody"):
        ns.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account}})
    ns.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": reader_role},
            "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
        }
    )
    ns.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": reader_role},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": reader_role},
            "subjects": [{"kind": "ServiceAccount", "name": "scraper", "namespace": ns.name}],
        }
    )


def _get(port: int, path: str, token: str | None = None) -> httpx.Response | None:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        return httpx.get(f"https://127.0.0.1:{port}{path}", headers=headers, verify=False, timeout=10)
    except httpx.TransportError:
        return None  # not listening yet


def test_secure_metrics_are_reviewed_by_the_api_server_and_healthz_is_open(
    cluster: E2ECluster, ns: Namespace
) -> None:
    _accounts(ns, ns.unique("metrics-reader"))
    scraper, nobody = _token(cluster, ns.name, "scraper"), _token(cluster, ns.name, "nobody")
    check = ns.unique("optsched")
    ns.apply(admission_check(check, f"optsched.io/{check}"))
    port = free_port()
    served = ("--check-name", check, "--controller-name", f"optsched.io/{check}", *FAST)
    with ControllerProcess(
        cluster.kubeconfig, *served, "--metrics-bind-address", f"127.0.0.1:{port}", "--metrics-secure"
    ) as proc:
        health = cluster.wait(lambda: _get(port, "/healthz"), "the metrics endpoint listening", timeout=60)
        assert (health.status_code, health.text) == (200, "ok\n"), proc.log()
        codes = {who: _get(port, "/metrics", token) for who, token in (("none", None), ("nobody", nobody))}
        allowed = _get(port, "/metrics", scraper)
    assert {who: r.status_code if r is not None else None for who, r in codes.items()} == {
        "none": 401,
        "nobody": 403,
    }
    assert codes["nobody"] is not None and "may not get /metrics" in codes["nobody"].text
    assert allowed is not None and allowed.status_code == 200, proc.log()
    assert "optsched_cycle_duration_seconds" in allowed.text


def _active(cluster: E2ECluster, check: str) -> dict[str, Any] | None:
    obj = cluster.get(KUEUE_API, "AdmissionCheck", check) or {}
    return next((c for c in (obj.get("status") or {}).get("conditions") or () if c["type"] == "Active"), None)


def test_the_last_replica_stopping_sets_its_check_inactive(cluster: E2ECluster, ns: Namespace) -> None:
    check = ns.unique("optsched")
    ns.apply(admission_check(check, f"optsched.io/{check}"))
    served = ("--check-name", check, "--controller-name", f"optsched.io/{check}", *FAST)
    proc = ControllerProcess(
        cluster.kubeconfig, *served, "--leader-elect", "--lease-namespace", ns.name, "--lease-duration", "3"
    ).start()
    try:
        cluster.wait_condition(KUEUE_API, "AdmissionCheck", check, "Active", timeout=60)
        started = time.monotonic()
        code = proc.stop(timeout=30)
    finally:
        proc.kill()
    condition = _active(cluster, check)
    assert code == 0, proc.log()
    assert condition is not None and condition["status"] == "False", proc.log()
    assert condition["reason"] == "ControllerStopped"
    print(f"shutdown: check inactive {time.monotonic() - started:.1f}s after SIGTERM")
