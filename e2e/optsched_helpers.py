"""Running ``optsched run`` against an e2e cluster, and the Kueue wiring its tests share.

``python -m e2e.optsched_helpers run ...`` is ``optsched run`` without going
through the CLI module, so the controller tests do not depend on how the CLI
is assembled. :class:`ControllerProcess` runs it as a subprocess (so a test
can kill it mid-cycle and restart it), with its log in a file.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from e2e.testing import (
    GPU,
    KUEUE_API,
    E2ECluster,
    Namespace,
    cluster_queue,
    local_queue,
    resource_flavor,
    topology,
)

ROOT = Path(__file__).resolve().parents[1]
PLACEMENT = "optsched.io/placement"
PLAN_ID = "optsched.io/plan-id"
POD_INDEX = "optsched.io/pod-index"
GPUS = "optsched.io/gpus"
REQUIRED_TOPOLOGY = "optsched.io/required-topology"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ControllerProcess:
    """``optsched run`` as a subprocess; ``stop()`` sends SIGTERM, ``kill()`` SIGKILL."""

    def __init__(self, kubeconfig: Path, *args: str, log_dir: Path | None = None) -> None:
        self.kubeconfig = kubeconfig
        self.args = list(args)
        self.log_path = Path(tempfile.mkstemp(prefix="optsched-run-", suffix=".log", dir=log_dir)[1])
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> ControllerProcess:
        env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "e2e.optsched_helpers",
                    "run",
                    "--kubeconfig",
                    str(self.kubeconfig),
                    "--metrics-port",
                    "0",
                    *self.args,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
                env=env,
                start_new_session=True,
            )
        return self

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 15.0) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def __enter__(self) -> ControllerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def run_once(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "e2e.optsched_helpers",
            "run",
            "--kubeconfig",
            str(kubeconfig),
            "--once",
            "--metrics-port",
            "0",
            *args,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=180,
        check=False,
    )


def admission_check(name: str, controller: str) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE_API,
        "kind": "AdmissionCheck",
        "metadata": {"name": name},
        "spec": {"controllerName": controller},
    }


def optsched_queue(
    ns: Namespace, check: str, *, gpus: int = 400, node_labels: dict[str, str] | None = None
) -> tuple[str, str]:
    """Flavor + ClusterQueue requiring ``check`` + LocalQueue ``lq``; returns (flavor, ClusterQueue)."""
    flavor = ns.unique("gpu")
    cq_name = ns.unique("cq")
    cq = cluster_queue(cq_name, flavor, gpus, cpu="5000")
    cq["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": check}]}
    ns.apply([resource_flavor(flavor, node_labels), cq, local_queue("lq", cq_name)])
    ns.cluster.wait_condition(KUEUE_API, "ClusterQueue", cq_name, "Active")
    ns.cluster.wait_condition(KUEUE_API, "LocalQueue", "lq", "Active", namespace=ns.name)
    return flavor, cq_name


def tas_queue(ns: Namespace, *, gpus: int, cpu: str, memory: str = "10Ti") -> None:
    """Kueue's own topology-aware path in ``ns``: a Topology, a GPU flavor bound to it,
    a ClusterQueue without optsched's check and LocalQueue ``lq``, all Active."""
    topo, flavor, cq = ns.unique("topo"), ns.unique("tas"), ns.unique("cq")
    ns.apply(
        [
            topology(topo),
            resource_flavor(flavor, {"nvidia.com/gpu.present": "true"}, topology=topo),
            cluster_queue(cq, flavor, gpus, cpu=cpu, memory=memory),
            local_queue("lq", cq),
        ]
    )
    ns.cluster.wait_condition(KUEUE_API, "ClusterQueue", cq, "Active")
    ns.cluster.wait_condition(KUEUE_API, "LocalQueue", "lq", "Active", namespace=ns.name)


def wait_namespace_gone(cluster: E2ECluster, name: str, timeout: float = 180) -> None:
    """Block until a deleted namespace (and so every pod in it) is gone."""
    cluster.wait(
        lambda: cluster.get("v1", "Namespace", name) is None or None,
        f"namespace {name} gone",
        timeout=timeout,
    )


def webhook_controller(
    cluster: E2ECluster, ns: Namespace, *args: str, webhook_on: bool = True
) -> tuple[ControllerProcess, str]:
    """An optsched AdmissionCheck, the pod-gate webhook for ``ns`` and a controller serving both.

    The controller is returned unstarted, with the check's name, so a test decides when
    it runs and can restart it with the same arguments.
    """
    check = ns.unique("optsched")
    name = f"optsched.io/{check}"
    ns.apply(admission_check(check, name))
    served = ["--check-name", check, "--controller-name", name, *args]
    if webhook_on:
        port = free_port()
        certs = webhook(ns, port)
        served += ["--webhook-port", str(port), "--webhook-cert-dir", str(certs)]
    return ControllerProcess(cluster.kubeconfig, *served), check


def wait_check_ready(cluster: E2ECluster, ns: Namespace, workload: str, check: str, what: str) -> None:
    """Block until ``check`` on the Workload is Ready (optsched admitted it)."""
    cluster.wait(
        lambda: (
            check_state(cluster.get(KUEUE_API, "Workload", workload, ns.name), check).get("state") == "Ready"
            or None
        ),
        what,
        timeout=90,
    )


def webhook(ns: Namespace, port: int) -> Path:
    """Serving certificate for 127.0.0.1 and a MutatingWebhookConfiguration for this namespace.

    Returns the directory holding tls.crt/tls.key for ``--webhook-cert-dir``.
    """
    import base64

    from optsched.controller.certs import generate

    material = generate(["localhost"], ("127.0.0.1",))
    directory = Path(tempfile.mkdtemp(prefix="optsched-webhook-"))
    material.write(str(directory))
    ns.apply(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": ns.unique("optsched-pod-gate")},
            "webhooks": [
                {
                    "name": "pod-gate.optsched.io",
                    "admissionReviewVersions": ["v1"],
                    "sideEffects": "None",
                    "failurePolicy": "Fail",
                    "timeoutSeconds": 5,
                    "clientConfig": {
                        "url": f"https://127.0.0.1:{port}/mutate-pods",
                        "caBundle": base64.b64encode(material.ca_pem).decode(),
                    },
                    "rules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE"],
                            "resources": ["pods"],
                            "scope": "Namespaced",
                        }
                    ],
                    "objectSelector": {"matchExpressions": [{"key": PLAN_ID, "operator": "Exists"}]},
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns.name}},
                }
            ],
        }
    )
    return directory


def record_of(workload: dict[str, Any]) -> dict[str, Any] | None:
    raw = (workload.get("metadata", {}).get("annotations") or {}).get(PLACEMENT)
    return json.loads(raw) if raw else None


def check_state(workload: dict[str, Any] | None, check: str) -> dict[str, Any]:
    for entry in (workload or {}).get("status", {}).get("admissionChecks") or []:
        if entry.get("name") == check:
            return dict(entry)
    return {}


def pod_gpus(pod: dict[str, Any]) -> list[int]:
    raw = (pod["metadata"].get("annotations") or {}).get(GPUS, "")
    return [int(x) for x in raw.split(",") if x.strip()]


def gpus_of(pod: dict[str, Any]) -> int:
    """Whole GPUs a pod asks for: its containers' nvidia.com/gpu, or, where optsched's webhook moved
    them onto a ResourceClaim (DRA mode), the GPUs that claim selects (``optsched.io/gpu-uuids``)."""
    total = 0
    for container in pod["spec"]["containers"]:
        resources = container.get("resources") or {}
        total += int((resources.get("limits") or {}).get(GPU, (resources.get("requests") or {}).get(GPU, 0)))
    claims = [c.get("resourceClaimName", "") for c in pod["spec"].get("resourceClaims") or []]
    if not total and any(name.startswith("optsched-") for name in claims):
        uuids = (pod["metadata"].get("annotations") or {}).get("optsched.io/gpu-uuids", "")
        total = len([u for u in uuids.split(",") if u])
    return total


def wait_quiet(cluster: E2ECluster, seconds: float) -> None:
    """Let the control plane and controller run for a while (for "nothing happens" checks)."""
    time.sleep(seconds)


def main(argv: list[str] | None = None) -> int:
    from optsched.commands.run import register_run
    from optsched.errors import InputError

    parser = argparse.ArgumentParser(prog="optsched")
    subparsers = parser.add_subparsers(dest="verb", required=True)
    register_run(subparsers)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except InputError as exc:
        print(f"optsched: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
