"""Everything the soak installs, and takes away again: accounts, policies, webhook, queues, namespaces.

optsched runs as it is deployed: under its own service account
(``optsched-system/optsched``) with the shipped RBAC, behind the shipped
admission policies (every ValidatingAdmissionPolicy in ``manifests/base``)
and the shipped pod-gating webhook (``manifests/webhook``, pointed at the
soak's relay and scoped to the soak's namespaces by a label). A team namespace
holds the honest stream; a tenant namespace holds a service account with
the built-in ``edit`` role there and ``view`` on the team's namespace. Each
run gets its own AdmissionCheck, ResourceFlavor, ClusterQueue (all GPUs of
the cluster as quota, preemption of lower priorities) and Lease name.

:func:`teardown` deletes what :func:`setup` created (never what was there
before) and puts every node back as it was at the start.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from e2e.chaos.workloads import PRIORITIES, priority_class
from e2e.kube import ApiError, load_yaml_docs
from e2e.testing import KUEUE_API, E2ECluster, local_queue, resource_flavor

ROOT = Path(__file__).resolve().parents[2]
SYSTEM_NS = "optsched-system"
ACCOUNT = "optsched"
RUN_LABEL = "e2e.optsched.io/chaos"
POLICY_KINDS = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
RBAC_KINDS = ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
GPU = "nvidia.com/gpu"


@dataclass
class Environment:
    cluster: E2ECluster
    run: str
    team: str
    tenant: str
    check: str
    controller_name: str
    cluster_queue: str
    lease: str
    webhook_dir: Path
    created: list[dict[str, Any]] = field(default_factory=list)
    """Objects to delete at teardown, in creation order."""
    nodes_before: dict[str, dict[str, Any]] = field(default_factory=dict)
    tenant_token: str = ""
    controller_token: str = ""

    @property
    def namespaces(self) -> frozenset[str]:
        return frozenset({self.team, self.tenant})


def _create(env: Environment, obj: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
    """Apply ``obj``; remember it for teardown unless it existed already."""
    md = obj["metadata"]
    ns = md.get("namespace") or namespace
    existed = env.cluster.kube.get(obj["apiVersion"], obj["kind"], md["name"], ns) is not None
    applied = env.cluster.apply(obj, namespace=ns)[0]
    if not existed:
        env.created.append(applied)
    return applied


def _usable_namespace(env: Environment, name: str) -> None:
    def ready() -> bool | None:
        found = env.cluster.get("v1", "Namespace", name)
        return True if found is None or (found.get("status") or {}).get("phase") != "Terminating" else None

    env.cluster.wait(ready, f"namespace {name} not terminating", timeout=180)


def _namespace(env: Environment, name: str) -> None:
    _usable_namespace(env, name)
    _create(
        env,
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {RUN_LABEL: env.run}}},
    )
    env.cluster.wait(
        lambda: env.cluster.get("v1", "ServiceAccount", "default", name), f"{name}/default account"
    )


def token(env: Environment, namespace: str, account: str, seconds: int) -> str:
    path = env.cluster.kube.path("v1", "ServiceAccount", account, namespace, "token")
    review = env.cluster.kube.request(
        "POST",
        path,
        json={
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": seconds},
        },
    )
    return str(review["status"]["token"])


def _binding(name: str, role: str, namespace: str, subject_ns: str, account: str) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": subject_ns}],
    }


def _controller_account(env: Environment, seconds: int) -> None:
    """optsched's namespace, service account and shipped RBAC; its token for the controller's kubeconfig."""
    _usable_namespace(env, SYSTEM_NS)
    _create(env, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NS}})
    _create(
        env,
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": ACCOUNT, "namespace": SYSTEM_NS}},
    )
    for obj in load_yaml_docs(ROOT / "manifests" / "base" / "rbac.yaml"):
        if obj.get("kind") not in RBAC_KINDS:
            continue
        obj = copy.deepcopy(obj)
        if obj["kind"] in ("Role", "RoleBinding"):
            obj["metadata"]["namespace"] = SYSTEM_NS
        for subject in obj.get("subjects") or []:
            subject.setdefault("namespace", SYSTEM_NS)
        _create(env, obj)
    env.controller_token = token(env, SYSTEM_NS, ACCOUNT, seconds)


def _policies(env: Environment) -> None:
    for path in sorted((ROOT / "manifests" / "base").glob("*.yaml")):
        for obj in load_yaml_docs(path):
            if obj.get("kind") in POLICY_KINDS:
                _create(env, obj)


def _webhook(env: Environment, relay_port: int) -> None:
    """The shipped pod-gate webhook, served through the relay, for the soak's namespaces only."""
    from optsched.controller.certs import generate  # deferred: the checker side never needs optsched

    material = generate(["localhost"], ("127.0.0.1",))
    material.write(str(env.webhook_dir))
    bundle = base64.b64encode(material.ca_pem).decode()
    for obj in load_yaml_docs(ROOT / "manifests" / "webhook" / "mutatingwebhook.yaml"):
        obj = copy.deepcopy(obj)
        obj["metadata"] = {"name": f"{env.run}-pod-gate"}
        for hook in obj.get("webhooks") or []:
            path = ((hook.get("clientConfig") or {}).get("service") or {}).get("path", "/mutate-pods")
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{relay_port}{path}", "caBundle": bundle}
            hook["namespaceSelector"] = {"matchLabels": {RUN_LABEL: env.run}}
        _create(env, obj)


def _tenant(env: Environment, seconds: int) -> None:
    _create(
        env,
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "tenant", "namespace": env.tenant},
        },
    )
    _create(env, _binding("tenant-edit", "edit", env.tenant, env.tenant, "tenant"))
    _create(env, _binding("tenant-view", "view", env.team, env.tenant, "tenant"))
    env.tenant_token = token(env, env.tenant, "tenant", seconds)


def _queues(env: Environment) -> None:
    gpus = sum(
        int((n.get("status") or {}).get("allocatable", {}).get(GPU, 0)) for n in env.nodes_before.values()
    )
    flavor = f"{env.run}-gpu"
    _create(
        env,
        {
            "apiVersion": KUEUE_API,
            "kind": "AdmissionCheck",
            "metadata": {"name": env.check},
            "spec": {"controllerName": env.controller_name},
        },
    )
    for name, value in PRIORITIES.items():
        _create(env, priority_class(f"chaos-{name}", value))
    _create(env, resource_flavor(flavor))
    resources = [
        {"name": "cpu", "nominalQuota": "5000"},
        {"name": "memory", "nominalQuota": "10Ti"},
        {"name": GPU, "nominalQuota": gpus},
    ]
    cq = {
        "apiVersion": KUEUE_API,
        "kind": "ClusterQueue",
        "metadata": {"name": env.cluster_queue},
        "spec": {
            "namespaceSelector": {"matchLabels": {RUN_LABEL: env.run}},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory", GPU],
                    "flavors": [{"name": flavor, "resources": resources}],
                }
            ],
            "admissionChecksStrategy": {"admissionChecks": [{"name": env.check}]},
            "preemption": {"withinClusterQueue": "LowerPriority"},
        },
    }
    _create(env, cq)
    for ns in (env.team, env.tenant):
        _create(env, local_queue("lq", env.cluster_queue), namespace=ns)


def setup(cluster: E2ECluster, run_dir: Path, relay_port: int, seconds: int) -> Environment:
    """Install everything for one run; on failure, what was installed is removed again."""
    run = f"chaos-{secrets.token_hex(3)}"
    webhook_dir = run_dir / "webhook"
    webhook_dir.mkdir(parents=True, exist_ok=True)
    env = Environment(
        cluster,
        run,
        f"{run}-team",
        f"{run}-tenant",
        run,
        f"optsched.io/{run}",
        f"{run}-cq",
        f"{run}-leader",
        webhook_dir,
    )
    env.nodes_before = {
        n["metadata"]["name"]: n
        for n in cluster.list("v1", "Node")
        if int((n.get("status") or {}).get("capacity", {}).get(GPU, 0) or 0) > 0
    }
    try:
        _controller_account(env, seconds)
        _policies(env)
        for ns in (env.team, env.tenant):
            _namespace(env, ns)
        _webhook(env, relay_port)
        _tenant(env, seconds)
        _queues(env)
    except BaseException:
        teardown(env)
        raise
    return env


def controller_kubeconfig(env: Environment, path: Path, proxy_port: int) -> Path:
    """The controller's kubeconfig: the fault proxy's address and the controller's own token."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "proxy", "cluster": {"server": f"http://127.0.0.1:{proxy_port}"}}],
        "users": [{"name": ACCOUNT, "user": {"token": env.controller_token}}],
        "contexts": [{"name": "proxy", "context": {"cluster": "proxy", "user": ACCOUNT}}],
        "current-context": "proxy",
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


def wait_active(env: Environment, timeout: float = 120) -> None:
    cluster = env.cluster
    cluster.wait_condition(KUEUE_API, "AdmissionCheck", env.check, "Active", timeout=timeout)
    cluster.wait_condition(KUEUE_API, "ClusterQueue", env.cluster_queue, "Active", timeout=timeout)
    for ns in (env.team, env.tenant):
        cluster.wait_condition(KUEUE_API, "LocalQueue", "lq", "Active", namespace=ns, timeout=timeout)


def _restore_map(old: dict[str, Any], now: dict[str, Any]) -> dict[str, Any]:
    return {**{k: None for k in now if k not in old}, **old}


def restore_node(cluster: E2ECluster, before: dict[str, Any]) -> None:
    """Put one node back as it was: recreated if deleted, else labels, annotations, taints, GPU figures."""
    name = before["metadata"]["name"]
    now = cluster.get("v1", "Node", name)
    old_md, old_status = before["metadata"], before.get("status") or {}
    if now is None:
        md = {k: v for k, v in old_md.items() if k in ("name", "labels", "annotations")}
        spec = {k: v for k, v in (before.get("spec") or {}).items() if k != "providerID"}
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": md,
            "spec": copy.deepcopy(spec),
            "status": {k: old_status[k] for k in ("capacity", "allocatable") if k in old_status},
        }
        cluster.kube.create_or_replace(node)
        return
    meta = {
        k: _restore_map(old_md.get(k) or {}, now["metadata"].get(k) or {}) for k in ("labels", "annotations")
    }
    spec = {
        "taints": (before.get("spec") or {}).get("taints"),
        "unschedulable": (before.get("spec") or {}).get("unschedulable"),
    }
    cluster.kube.patch("v1", "Node", name, {"metadata": meta, "spec": spec})
    status = {k: old_status[k] for k in ("capacity", "allocatable") if k in old_status}
    if status != {k: (now.get("status") or {}).get(k) for k in status}:
        cluster.kube.patch("v1", "Node", name, {"status": status}, subresource="status")


def restore_nodes(cluster: E2ECluster, before: dict[str, dict[str, Any]], timeout: float = 90) -> list[str]:
    """Every node as at the start, then Ready; the names that could not be restored."""
    failed = []
    for node in before.values():
        try:
            restore_node(cluster, node)
        except ApiError as exc:
            failed.append(f"{node['metadata']['name']}: {exc}")
    with contextlib.suppress(TimeoutError):
        cluster.wait(lambda: _all_ready(cluster, set(before)), "every node Ready again", timeout=timeout)
    return failed


def _all_ready(cluster: E2ECluster, names: set[str]) -> bool | None:
    ready = {
        n["metadata"]["name"]
        for n in cluster.list("v1", "Node")
        if any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in n["status"].get("conditions") or []
        )
    }
    return True if names <= ready else None


def teardown(env: Environment, timeout: float = 180) -> list[str]:
    """Delete what setup created (namespaces first, waiting until their pods are gone); restore nodes."""
    problems = restore_nodes(env.cluster, env.nodes_before) if env.nodes_before else []
    namespaces = [o for o in env.created if o["kind"] == "Namespace"]
    for obj in namespaces:
        with contextlib.suppress(ApiError):
            env.cluster.delete(obj)
    deadline = time.monotonic() + timeout
    for obj in namespaces:
        name = obj["metadata"]["name"]
        while env.cluster.get("v1", "Namespace", name) is not None and time.monotonic() < deadline:
            time.sleep(1)
    for obj in reversed([o for o in env.created if o["kind"] != "Namespace"]):
        try:
            env.cluster.delete(obj)
        except ApiError as exc:
            problems.append(f"{obj['kind']} {obj['metadata']['name']}: {exc}")
    return problems


def policy_enforced(env: Environment, tenant: Any, timeout: float = 20) -> bool:
    """Whether an admission policy refuses a tenant's lift of optsched's gate (probed with fresh pods)."""
    deadline = time.monotonic() + timeout
    number = 0
    while time.monotonic() < deadline:
        name = f"gate-probe-{number}"
        number += 1
        probe = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": env.tenant},
            "spec": {
                "schedulingGates": [{"name": "optsched.io/placement"}],
                "containers": [{"name": "main", "image": "busybox:1.36"}],
            },
        }
        try:
            env.cluster.kube.create(probe)
            tenant.patch("v1", "Pod", name, {"spec": {"schedulingGates": None}}, namespace=env.tenant)
        except ApiError as exc:
            if exc.status == 403 and "ValidatingAdmissionPolicy" in str(exc):
                return True
        finally:
            with contextlib.suppress(ApiError):
                env.cluster.kube.delete("v1", "Pod", name, env.tenant)
        time.sleep(1)
    return False
