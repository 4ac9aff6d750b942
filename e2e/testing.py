"""Test-side API over an e2e cluster, shared by every e2e test module.

Tests get a :class:`E2ECluster` from the ``cluster`` fixture and a
:class:`Namespace` from the ``ns`` fixture (see ``e2e/conftest.py``).  The same
objects work against the local harness and against any cluster named by
``KUBECONFIG`` with ``OPTSCHED_E2E_EXTERNAL=1`` (e.g. kind), so the tests are
identical on both.
"""

from __future__ import annotations

import os
import secrets
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from e2e.kube import ApiError, Kube, ObjList, condition, has_condition, load_yaml_docs, wait_for

T = TypeVar("T")

KUEUE_API = "kueue.x-k8s.io/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
RUN_DURATION = "e2e.optsched.io/run-duration"
EXIT_CODE = "e2e.optsched.io/exit-code"
RACK_LABEL = "cloud.provider.com/topology-rack"
BLOCK_LABEL = "cloud.provider.com/topology-block"
HOSTNAME_LABEL = "kubernetes.io/hostname"
GPU = "nvidia.com/gpu"
GPU_PRODUCT = "nvidia.com/gpu.product"
H100 = "NVIDIA-H100-80GB-HBM3"

#: Seconds a test waits for the control plane to react; slow shared CI machines need slack.
TIMEOUT = float(os.environ.get("OPTSCHED_E2E_TIMEOUT", "90"))


@dataclass
class E2ECluster:
    """A running cluster: where its kubeconfig and logs are, plus a client."""

    kubeconfig: Path
    logs_dir: Path | None
    external: bool
    kube: Kube = field(init=False)

    def __post_init__(self) -> None:
        self.kube = Kube.from_kubeconfig(self.kubeconfig)

    def close(self) -> None:
        self.kube.close()

    # -- objects ------------------------------------------------------------------------
    def apply(self, source: Any, namespace: str | None = None) -> ObjList:
        """Server-side apply a dict, list of dicts, YAML text or file."""
        return self.kube.apply(source, namespace=namespace)

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        return self.kube.get(api_version, kind, name, namespace)

    def list(
        self, api_version: str, kind: str, namespace: str | None = None, label_selector: str | None = None
    ) -> ObjList:
        return self.kube.list(api_version, kind, namespace, label_selector)

    def delete(self, obj: dict[str, Any]) -> bool:
        md = obj["metadata"]
        return self.kube.delete(obj["apiVersion"], obj["kind"], md["name"], md.get("namespace"))

    # -- waiting ------------------------------------------------------------------------
    def wait(self, fn: Callable[[], T | None], what: str, timeout: float = TIMEOUT) -> T:
        return wait_for(fn, timeout, what)

    def wait_condition(
        self,
        api_version: str,
        kind: str,
        name: str,
        ctype: str,
        *,
        namespace: str | None = None,
        status: str = "True",
        timeout: float = TIMEOUT,
    ) -> dict[str, Any]:
        """Wait until the object has condition ``ctype`` = ``status``; returns the object."""

        def check() -> dict[str, Any] | None:
            obj = self.get(api_version, kind, name, namespace)
            return obj if has_condition(obj, ctype, status) else None

        where = f"{namespace}/" if namespace else ""
        return self.wait(check, f"{kind} {where}{name} condition {ctype}={status}", timeout)

    # -- nodes --------------------------------------------------------------------------
    def gpu_nodes(self, product: str | None = None) -> ObjList:
        sel = f"{GPU_PRODUCT}={product}" if product else GPU_PRODUCT
        return self.list("v1", "Node", label_selector=sel)

    def gpu_capacity(self, product: str | None = None) -> int:
        return sum(int(n["status"]["allocatable"].get(GPU, 0)) for n in self.gpu_nodes(product))

    # -- Kueue ----------------------------------------------------------------------------
    def workload_for(self, job: dict[str, Any]) -> dict[str, Any] | None:
        """The Workload Kueue created for ``job`` (found by owner reference)."""
        ns, uid = job["metadata"]["namespace"], job["metadata"]["uid"]
        for wl in self.list(KUEUE_API, "Workload", ns):
            if any(o.get("uid") == uid for o in wl["metadata"].get("ownerReferences", [])):
                return wl
        return None

    def wait_workload(self, job: dict[str, Any], timeout: float = TIMEOUT) -> dict[str, Any]:
        return self.wait(
            lambda: self.workload_for(job), f"Workload of Job {job['metadata']['name']}", timeout
        )

    def pods_of(self, job: dict[str, Any]) -> ObjList:
        md = job["metadata"]
        return self.list(
            "v1", "Pod", md["namespace"], label_selector=f"batch.kubernetes.io/job-name={md['name']}"
        )

    def wait_pods(
        self, job: dict[str, Any], count: int, *, phase: str | None = None, timeout: float = TIMEOUT
    ) -> ObjList:
        """Wait until ``job`` has ``count`` pods, all bound to a node (and in ``phase``)."""

        def check() -> ObjList | None:
            pods = self.pods_of(job)
            if len(pods) != count or not all(p["spec"].get("nodeName") for p in pods):
                return None
            if phase and not all(p.get("status", {}).get("phase") == phase for p in pods):
                return None
            return pods

        what = f"{count} pods of Job {job['metadata']['name']} bound" + (f" and {phase}" if phase else "")
        return self.wait(check, what, timeout)

    # -- diagnostics ----------------------------------------------------------------------
    def dump_logs(self, lines: int = 40, out: Any = None) -> None:
        if self.logs_dir:
            from e2e.cluster import dump_logs

            dump_logs(self.logs_dir, lines, out or sys.stderr)


class Namespace:
    """A throw-away namespace plus the cluster-scoped objects a test created.

    ``cleanup()`` deletes the namespace (and so every Job, Workload and
    LocalQueue in it) and then the tracked cluster-scoped objects in reverse
    order, so a ClusterQueue goes before the ResourceFlavor it references.
    """

    def __init__(self, cluster: E2ECluster, prefix: str) -> None:
        self.cluster = cluster
        self.name = f"{prefix[:40].strip('-').lower()}-{secrets.token_hex(3)}"
        self.suffix = self.name.rsplit("-", 1)[1]
        self._cluster_scoped: list[dict[str, Any]] = []
        cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.name}})
        # The ServiceAccount admission plugin rejects pods until "default" exists.
        cluster.wait(
            lambda: cluster.get("v1", "ServiceAccount", "default", self.name),
            f"ServiceAccount {self.name}/default",
        )

    def unique(self, name: str) -> str:
        """A cluster-wide unique name for cluster-scoped objects of this test."""
        return f"{name}-{self.suffix}"

    def apply(self, source: Any) -> list[dict[str, Any]]:
        """Apply into this namespace; cluster-scoped objects are remembered for cleanup."""
        out = []
        for obj in load_yaml_docs(source):
            applied = self.cluster.apply(obj, namespace=self.name)[0]
            if not applied["metadata"].get("namespace"):
                self._cluster_scoped.append(applied)
            out.append(applied)
        return out

    def apply_one(self, source: Any) -> dict[str, Any]:
        return self.apply(source)[0]

    def cleanup(self) -> None:
        kube = self.cluster.kube
        try:
            kube.delete("v1", "Namespace", self.name)
        except ApiError as exc:
            print(f"cleanup: namespace {self.name}: {exc}", file=sys.stderr)
        for obj in reversed(self._cluster_scoped):
            try:
                self.cluster.delete(obj)
            except ApiError as exc:
                print(f"cleanup: {obj['kind']} {obj['metadata']['name']}: {exc}", file=sys.stderr)


# --- manifest builders ------------------------------------------------------------------


def bearer_client(cluster: E2ECluster, bearer: str, user: str = "token-user") -> Kube:
    """A client of ``cluster`` that authenticates with ``bearer`` only (its CA, no client certificate)."""
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    for entry in config["clusters"]:
        ca = entry["cluster"].get("certificate-authority")
        if ca and not Path(ca).is_absolute():
            entry["cluster"]["certificate-authority"] = str(cluster.kubeconfig.resolve().parent / ca)
    context = next(c for c in config["contexts"] if c["name"] == config["current-context"])
    context["context"]["user"] = user
    config["users"] = [{"name": user, "user": {"token": bearer}}]
    with tempfile.TemporaryDirectory(prefix="optsched-e2e-token-") as tmp:
        path = Path(tmp) / "kubeconfig"
        path.write_text(yaml.safe_dump(config))
        return Kube.from_kubeconfig(path)


def resource_flavor(
    name: str, node_labels: dict[str, str] | None = None, topology: str | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if node_labels:
        spec["nodeLabels"] = node_labels
    if topology:
        spec["topologyName"] = topology
    return {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def topology(name: str, levels: Iterable[str] = (BLOCK_LABEL, RACK_LABEL, HOSTNAME_LABEL)) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE_API,
        "kind": "Topology",
        "metadata": {"name": name},
        "spec": {"levels": [{"nodeLabel": lv} for lv in levels]},
    }


def cluster_queue(
    name: str, flavor: str, gpus: int, cpu: str = "1000", memory: str = "10Ti"
) -> dict[str, Any]:
    """A ClusterQueue with one flavor covering cpu, memory and GPUs."""
    return {
        "apiVersion": KUEUE_API,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory", GPU],
                    "flavors": [
                        {
                            "name": flavor,
                            "resources": [
                                {"name": "cpu", "nominalQuota": cpu},
                                {"name": "memory", "nominalQuota": memory},
                                {"name": GPU, "nominalQuota": gpus},
                            ],
                        }
                    ],
                }
            ],
        },
    }


def local_queue(name: str, cluster_queue_name: str) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE_API,
        "kind": "LocalQueue",
        "metadata": {"name": name},
        "spec": {"clusterQueue": cluster_queue_name},
    }


def gpu_job(
    name: str,
    queue: str,
    *,
    pods: int = 1,
    gpus_per_pod: int = 1,
    run_duration: str | None = None,
    template_annotations: dict[str, str] | None = None,
    node_selector: dict[str, str] | None = None,
) -> dict[str, Any]:
    """An indexed batch Job of ``pods`` GPU pods, queued in LocalQueue ``queue``.

    ``run_duration`` ("5s") makes each pod finish after that long: KWOK reads
    the annotation, and on a real cluster (kind) the container sleeps as long.
    Without it, pods run until deleted.
    """
    annotations = dict(template_annotations or {})
    seconds = "infinity"
    if run_duration:
        annotations[RUN_DURATION] = run_duration
        seconds = str(int(float(run_duration.rstrip("s"))))
    container = {
        "name": "main",
        "image": "busybox:1.36",
        "command": ["sleep", seconds],
        "resources": {
            "requests": {"cpu": "1", "memory": "1Gi"},
            "limits": {"cpu": "1", "memory": "1Gi", GPU: str(gpus_per_pod)},
        },
    }
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [container],
        "terminationGracePeriodSeconds": 0,
    }
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {QUEUE_LABEL: queue}},
        "spec": {
            "parallelism": pods,
            "completions": pods,
            "completionMode": "Indexed",
            "backoffLimit": 0,
            "template": {"metadata": {"annotations": annotations}, "spec": spec},
        },
    }


__all__ = [
    "E2ECluster",
    "Namespace",
    "cluster_queue",
    "condition",
    "gpu_job",
    "has_condition",
    "local_queue",
    "resource_flavor",
    "topology",
]
