"""Processes of the local control plane: how each is started, tracked and stopped.

Every component runs in its own session (process group) so ``down`` can kill
it together with anything it spawned, and its PID is written to ``pids.json``
the moment it starts, so even an ``up`` that dies half-way leaves nothing
that ``down`` cannot find.  A component that exits while we wait for it is
reported by name with the tail of its log.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


class ComponentError(RuntimeError):
    """A component failed to start or exited; carries its name and log tail."""

    def __init__(self, component: str, problem: str, log: Path | None = None) -> None:
        self.component = component
        self.log = log
        tail = log_tail(log) if log else ""
        msg = f"{component}: {problem}"
        if log:
            msg += f"\n--- last lines of {log} ---\n{tail}"
        super().__init__(msg)


def log_tail(path: Path, lines: int = 40, width: int = 400) -> str:
    """Last ``lines`` lines, each cut to ``width`` characters (JSON log lines get long)."""
    try:
        data = path.read_bytes()[-256_000:].decode(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(ln if len(ln) <= width else ln[:width] + " ..." for ln in data.splitlines()[-lines:])


def free_ports(n: int) -> list[int]:
    """n distinct free TCP ports on 127.0.0.1, all held open until chosen.

    Holding them together stops the kernel from handing the same port out
    twice; another process can still take one before the component binds it,
    which then shows up as that component exiting early.
    """
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@dataclass
class Proc:
    """One started component as recorded in pids.json."""

    name: str
    pid: int
    binary: str
    log: str


@dataclass
class ProcessSet:
    """All processes of one cluster; persisted so another process can stop them."""

    state_dir: Path
    procs: list[Proc] = field(default_factory=list)
    _popen: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def pids_file(self) -> Path:
        return self.state_dir / "pids.json"

    @classmethod
    def load(cls, state_dir: Path) -> ProcessSet:
        ps = cls(state_dir)
        if ps.pids_file.exists():
            try:
                ps.procs = [Proc(**p) for p in json.loads(ps.pids_file.read_text())]
            except (ValueError, TypeError):
                ps.procs = []
        return ps

    def _save(self) -> None:
        tmp = self.pids_file.with_suffix(".tmp")
        tmp.write_text(json.dumps([p.__dict__ for p in self.procs], indent=2))
        tmp.replace(self.pids_file)

    def start(self, name: str, argv: list[str], log: Path, env: dict[str, str] | None = None) -> Proc:
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as fh:
            fh.write(f"$ {' '.join(argv)}\n".encode())
            fh.flush()
            try:
                popen = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=fh,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    env={**os.environ, **(env or {})},
                    cwd=self.state_dir,
                )
            except OSError as exc:
                raise ComponentError(name, f"cannot start {argv[0]}: {exc}", log) from exc
        proc = Proc(name=name, pid=popen.pid, binary=argv[0], log=str(log))
        self.procs.append(proc)
        self._popen[name] = popen
        self._save()
        return proc

    def check(self, name: str | None = None) -> None:
        """Raise ComponentError if a component (or any) has exited."""
        for p in self.procs:
            if name and p.name != name:
                continue
            popen = self._popen.get(p.name)
            rc = popen.poll() if popen else (None if _alive(p) else "?")
            if rc is not None:
                raise ComponentError(p.name, f"exited early (exit code {rc})", Path(p.log))

    def alive(self) -> dict[str, bool]:
        return {p.name: _alive(p) for p in self.procs}

    def stop_all(self, grace: float = 3.0) -> list[str]:
        """Stop every process group, last started first; SIGKILL what ignores SIGTERM.

        One at a time, so the apiserver can still reach etcd while it shuts down
        (killing etcd first makes it hang in its shutdown); ``grace`` bounds each.
        """
        stopped = []
        for p in reversed(self.procs):
            if not _alive(p):
                continue
            _signal_group(p.pid, signal.SIGTERM)
            stopped.append(p.name)
            deadline = time.monotonic() + grace
            while _alive(p) and time.monotonic() < deadline:
                self._reap()
                time.sleep(0.05)
            if _alive(p):
                _signal_group(p.pid, signal.SIGKILL)
        self._reap()
        self.procs = []
        if self.pids_file.exists():
            self.pids_file.unlink()
        return stopped

    def _reap(self) -> None:
        for popen in self._popen.values():
            popen.poll()


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _alive(p: Proc) -> bool:
    """Alive and really ours: a recycled PID running something else is not."""
    try:
        stat = Path(f"/proc/{p.pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
        cmd = Path(f"/proc/{p.pid}/cmdline").read_bytes().split(b"\0")[0].decode()
    except (OSError, IndexError):
        return False
    return cmd == p.binary


# --- command lines ----------------------------------------------------------------------

SERVICE_CIDR = "10.0.0.0/24"
DRA_FEATURE_GATES = "DRAExtendedResource=true"
"""DRA-backed extended resources (a DeviceClass's ``extendedResourceName``), on in apiserver (the field),
kube-scheduler (serving ``nvidia.com/gpu`` from a ResourceSlice) and kube-controller-manager (the claims
it creates). Beta and on by default in Kubernetes 1.36; set anyway, so the cluster does not depend on a
default changing. DRA itself (``resource.k8s.io/v1``, the scheduler's DynamicResources plugin) is GA."""
DRA_RUNTIME_CONFIG = "resource.k8s.io/v1=true"


def feature_gates(extra: str = "") -> str:
    """The DRA gates plus ``extra`` (``OPTSCHED_E2E_FEATURE_GATES``), which wins where both set a gate."""
    return ",".join(g for g in (DRA_FEATURE_GATES, extra.strip(",")) if g)


@dataclass(frozen=True)
class Ports:
    etcd: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int
    webhook: int
    kueue_health: int

    @classmethod
    def pick(cls) -> Ports:
        return cls(*free_ports(7))


def etcd_args(binary: Path, data: Path, ports: Ports) -> list[str]:
    client = f"http://127.0.0.1:{ports.etcd}"
    peer = f"http://127.0.0.1:{ports.etcd_peer}"
    return [
        str(binary),
        "--name=e2e",
        f"--data-dir={data}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=e2e={peer}",
        "--initial-cluster-state=new",
        # Throw-away data: fsync only costs time on a shared CI disk.
        "--unsafe-no-fsync",
        "--quota-backend-bytes=4294967296",
        "--log-level=warn",
    ]


def apiserver_args(binary: Path, certs: Path, ports: Ports, gates: str = "") -> list[str]:
    args = [
        str(binary),
        f"--etcd-servers=http://127.0.0.1:{ports.etcd}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={ports.apiserver}",
        f"--tls-cert-file={certs / 'apiserver.crt'}",
        f"--tls-private-key-file={certs / 'apiserver.key'}",
        f"--client-ca-file={certs / 'ca.crt'}",
        f"--service-account-key-file={certs / 'sa.pub'}",
        f"--service-account-signing-key-file={certs / 'sa.key'}",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        "--api-audiences=https://kubernetes.default.svc.cluster.local",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--authorization-mode=Node,RBAC",
        # This plugin taints every new Node not-ready until node-lifecycle-controller
        # sees it Ready; that controller is off (see controller_manager_args), so the
        # taint would never go and no pod could schedule on the fake nodes.
        "--disable-admission-plugins=TaintNodesByCondition",
        # The loopback address cannot be an Endpoints IP; no in-cluster client needs it.
        "--endpoint-reconciler-type=none",
        "--allow-privileged=true",
        f"--runtime-config={DRA_RUNTIME_CONFIG}",
        f"--feature-gates={feature_gates(gates)}",
        "--profiling=false",
        "--v=1",
    ]
    return args


def controller_manager_args(binary: Path, certs: Path, kubeconfig: Path, ports: Ports) -> list[str]:
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={ports.controller_manager}",
        f"--cert-dir={certs / 'controller-manager'}",
        "--leader-elect=false",
        f"--service-account-private-key-file={certs / 'sa.key'}",
        f"--root-ca-file={certs / 'ca.crt'}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        # Fake nodes send no heartbeats: without this controller they would be
        # tainted unreachable and their pods evicted after ~40 s.
        "--controllers=*,-node-lifecycle-controller",
        f"--feature-gates={feature_gates()}",
        "--v=1",
    ]


def scheduler_args(binary: Path, certs: Path, kubeconfig: Path, ports: Ports) -> list[str]:
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={ports.scheduler}",
        f"--cert-dir={certs / 'scheduler'}",
        "--leader-elect=false",
        f"--feature-gates={feature_gates()}",
        "--v=1",
    ]


KUEUE_NAMESPACE = "kueue-system"
KUEUE_INTEGRATIONS = ["batch/job", "pod", "statefulset"]
"""Integrations whose APIs this control plane serves (StatefulSets are built in; LWS, JobSet, Ray not)."""


def kueue_config(webhook_cert_dir: Path, ports: Ports) -> dict[str, Any]:
    """Kueue Configuration for an out-of-cluster manager.

    Internal cert management is off (it assumes an in-cluster Service DNS name);
    the visibility server is off (it would bind a fixed port and needs an
    APIService); only integrations whose APIs exist here are enabled.
    """
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": KUEUE_NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{ports.kueue_health}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"port": ports.webhook, "host": "127.0.0.1", "certDir": str(webhook_cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "manageJobsWithoutQueueName": False,
        "clientConnection": {"qps": 300, "burst": 500},
        "integrations": {"frameworks": KUEUE_INTEGRATIONS},
        "featureGates": {"VisibilityOnDemand": False},
    }


def kueue_args(binary: Path, config: Path) -> list[str]:
    return [str(binary), f"--config={config}", "--zap-log-level=2"]


def kwok_args(binary: Path, kubeconfig: Path, stages: Path) -> list[str]:
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--config={stages}",
        "--manage-all-nodes=false",
        "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
        "--cidr=10.128.0.0/12",
        "--node-ip=10.96.0.1",
        # Leases are renewed every quarter of this; long leases keep a
        # 1,000-node profile from spending the CPU on heartbeats.
        "--node-lease-duration-seconds=600",
    ]


_KEPT_GROUPS = {"kueue.x-k8s.io", "batch", ""}
_KEPT_RESOURCES = {("apps", "statefulsets")}
"""Kueue's webhooks on other groups that are kept: those of the enabled ``statefulset`` integration."""
_SYSTEM_NS_SELECTOR = {
    "matchExpressions": [
        {
            "key": "kubernetes.io/metadata.name",
            "operator": "NotIn",
            "values": ["kube-system", KUEUE_NAMESPACE],
        }
    ]
}


def kueue_webhooks(manifests: Path, base_url: str, ca_bundle: bytes) -> list[dict[str, Any]]:
    """Kueue's webhook configurations rewritten for a manager on 127.0.0.1.

    Only webhooks for APIs served here and integrations enabled (Kueue's own,
    batch, core, StatefulSets) are kept: a webhook for a disabled integration
    would make every Deployment create fail.
    Workload-type webhooks skip kube-system and kueue-system like the release does.
    """
    import base64

    out = []
    for doc in yaml.safe_load_all(manifests.read_text()):
        if not doc:
            continue
        hooks = []
        for hook in doc.get("webhooks", []):
            rules = hook.get("rules", [])
            groups = {g for rule in rules for g in rule.get("apiGroups", [])}
            resources = {
                (g, r) for rule in rules for g in rule.get("apiGroups", []) for r in rule.get("resources", [])
            }
            if not (groups <= _KEPT_GROUPS or resources <= _KEPT_RESOURCES):
                continue
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": base_url + path, "caBundle": base64.b64encode(ca_bundle).decode()}
            if groups != {"kueue.x-k8s.io"}:
                hook["namespaceSelector"] = _SYSTEM_NS_SELECTOR
            hook["timeoutSeconds"] = 10
            hooks.append(hook)
        doc["metadata"] = {"name": "optsched-e2e-kueue-" + doc["metadata"]["name"]}
        doc["webhooks"] = hooks
        out.append(doc)
    return out
