"""Running simulated node agents (``optsched agent --simulate``) against an e2e cluster.

:class:`AgentProcess` runs one agent process for every fake GPU node it is
told about (their ``optsched.io/hardware-profile`` label names the shipped
profile), as a subprocess a test can stop, kill and restart. :func:`served_nodes`
labels the small profile's nodes, installs the ``NodeGPUs`` CRD and, when the
test is done, puts the nodes back as they were (annotation, labels, MIG
capacity) and deletes the ``NodeGPUs`` objects and the ResourceSlices the agent
published for DRA nodes, so later tests see the cluster they expect.
"""

from __future__ import annotations

import contextlib
import copy
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from e2e.kube import ApiError
from e2e.testing import E2ECluster
from optsched.agent.resource_slices import slice_name
from optsched.model.names import RESOURCE_API

ROOT = Path(__file__).resolve().parents[1]
CRD = ROOT / "manifests" / "crd" / "nodegpus.yaml"
NODE_GPUS_API = "optsched.io/v1alpha1"
PROFILE_LABEL = "optsched.io/hardware-profile"
TOPOLOGY = "optsched.io/gpu-topology"
HARDWARE = {
    "h100": "dgx-h100",
    "a100": "a100-pcie-bridged",
    "t4": "t4",
    "h200": "hgx-h200",
    "gb200": "gb200-tray",
    "a100-sxm": "hgx-a100-sxm",
    "a100-pcie": "a100-pcie-bridged",
}
"""The e2e profiles' pools (small, then large) and the shipped hardware profile each one models."""


class AgentProcess:
    """``optsched agent --simulate --all-nodes`` as a subprocess with its log in a file."""

    def __init__(self, kubeconfig: Path, state_dir: Path, *extra: str) -> None:
        self.kubeconfig = kubeconfig
        self.state_dir = state_dir
        self.extra = list(extra)
        self.log_path = Path(tempfile.mkstemp(prefix="optsched-agent-", suffix=".log")[1])
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, *extra: str) -> AgentProcess:
        hardware = [arg for name in HARDWARE.values() for arg in ("--hardware", name)]
        command = [
            sys.executable,
            "-m",
            "optsched",
            "agent",
            "--simulate",
            *hardware,
            "--all-nodes",
            "--kubeconfig",
            str(self.kubeconfig),
            "--state-dir",
            str(self.state_dir),
            "--interval",
            "1",
            "--heartbeat",
            "30",
            "--metrics-port",
            "0",
            *self.extra,
            *extra,
        ]
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
                env=dict(os.environ),
                start_new_session=True,
            )
        return self

    def wait_exit(self, timeout: float) -> int | None:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        self.proc = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def _pool(node: dict[str, Any]) -> str:
    return str(node["metadata"]["name"]).rsplit("-", 1)[0]


def _restore(cluster: E2ECluster, before: dict[str, dict[str, Any]]) -> None:
    for name, node in before.items():
        meta = node["metadata"]
        annotations = meta.get("annotations") or {}
        labels = {PROFILE_LABEL: None, **{k: None for k in ("optsched.io/gpu-labels",)}}
        patch = {"metadata": {"annotations": {TOPOLOGY: annotations.get(TOPOLOGY)}, "labels": labels}}
        cluster.kube.patch("v1", "Node", name, patch)
        now = cluster.get("v1", "Node", name) or {}
        status = {}
        for part in ("capacity", "allocatable"):
            had, has = node["status"].get(part) or {}, (now.get("status") or {}).get(part) or {}
            changed = {
                k: had.get(k)
                for k in set(had) | set(has)
                if k.startswith("nvidia.com/") and had.get(k) != has.get(k)
            }
            if changed:
                status[part] = changed
        if status:
            cluster.kube.patch("v1", "Node", name, {"status": status}, subresource="status")
    for obj in cluster.list(NODE_GPUS_API, "NodeGPUs"):
        with contextlib.suppress(ApiError):
            cluster.delete(obj)
    for obj in cluster.list(RESOURCE_API, "ResourceSlice"):
        if obj["metadata"]["name"] in {slice_name(name) for name in before}:
            with contextlib.suppress(ApiError):
                cluster.delete({**obj, "apiVersion": RESOURCE_API, "kind": "ResourceSlice"})


@contextlib.contextmanager
def served_nodes(cluster: E2ECluster) -> Iterator[dict[str, dict[str, Any]]]:
    """Label the GPU nodes with their hardware profile and install the CRD; restore everything after."""
    cluster.apply(CRD)
    cluster.wait(lambda: _crd_served(cluster), "NodeGPUs CRD established", timeout=60)
    before = {n["metadata"]["name"]: copy.deepcopy(n) for n in cluster.gpu_nodes()}
    for name, node in before.items():
        profile = HARDWARE.get(_pool(node))
        if profile:
            cluster.kube.patch("v1", "Node", name, {"metadata": {"labels": {PROFILE_LABEL: profile}}})
    try:
        yield before
    finally:
        _restore(cluster, before)


def _crd_served(cluster: E2ECluster) -> bool | None:
    try:
        cluster.list(NODE_GPUS_API, "NodeGPUs")
        return True
    except ApiError:
        time.sleep(0.5)
        return None


Ready = Callable[[E2ECluster, set[str]], bool | None]
"""Whether what a test needs from the agents is published, given the names of the nodes served."""


def all_published(cluster: E2ECluster, names: set[str]) -> bool | None:
    """Every served node has a NodeGPUs with a status."""
    published = {o["metadata"]["name"] for o in cluster.list(NODE_GPUS_API, "NodeGPUs") if o.get("status")}
    return True if names <= published else None


def slices_of(nodes: list[str]) -> Ready:
    """Every one of ``nodes`` (DRA nodes) has its ResourceSlice."""
    return lambda cluster, _: (
        all(cluster.get(RESOURCE_API, "ResourceSlice", slice_name(n)) for n in nodes) or None
    )


@contextlib.contextmanager
def running_agent(
    cluster: E2ECluster,
    state_dir: Path,
    *extra: str,
    ready: Ready = all_published,
    what: str = "NodeGPUs for every GPU node",
    timeout: float = 120,
) -> Iterator[AgentProcess]:
    """One simulated agent serving every GPU node (see :func:`served_nodes`), once ``ready``; its log
    tail printed and everything put back afterwards."""
    with served_nodes(cluster) as before:
        proc = AgentProcess(cluster.kubeconfig, state_dir, *extra).start()
        try:
            cluster.wait(lambda: ready(cluster, set(before)), what, timeout)
            yield proc
        finally:
            proc.stop()
            print(f"--- agent log ({proc.log_path}) tail ---\n" + "\n".join(proc.log().splitlines()[-40:]))
