"""Start, inspect and stop a local Kubernetes + Kueue + KWOK control plane.

    python -m e2e.cluster up [--profile small] [--fresh]
    python -m e2e.cluster status
    python -m e2e.cluster down

``up`` is idempotent: if a healthy cluster already runs in the state dir
(``$OPTSCHED_E2E_STATE``, default /tmp/optsched-e2e) it is reused, which is what
makes a warm test run take seconds.  If any step fails, ``up`` names the
component, prints its log tail, stops everything it started and exits 1: a
half-started cluster is never left behind.

Exit codes: 0 success, 1 a component failed, 2 bad input (profile, missing
binaries, missing Go).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import fcntl
import functools
import json
import os
import re
import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from e2e import certs as pki
from e2e.components import (
    KUEUE_NAMESPACE,
    ComponentError,
    Ports,
    ProcessSet,
    apiserver_args,
    controller_manager_args,
    etcd_args,
    kueue_args,
    kueue_config,
    kueue_webhooks,
    kwok_args,
    log_tail,
    scheduler_args,
)
from e2e.kube import ApiError, Kube, has_condition, load_yaml_docs, wait_for
from e2e.nodes import create_nodes
from e2e.profiles import ProfileError, load_profile
from e2e.versions import asset_dir, current_binaries, load_resolved
from optsched.snapshot.kubeyaml import dump_yaml

E2E_DIR = Path(__file__).resolve().parent
DEVICE_CLASS = E2E_DIR.parent / "manifests" / "dra" / "deviceclass.yaml"
"""NVIDIA's ``gpu.nvidia.com`` DeviceClass plus ``extendedResourceName: nvidia.com/gpu`` (users get it)."""
STAGES_FILE = E2E_DIR / "stages" / "stages.yaml"
#: Kueue reads its metrics serving cert from this fixed path when it does not manage certs.
KUEUE_METRICS_CERTS = Path("/etc/kueue/metrics/certs")
COMPONENTS = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kueue", "kwok"]


def state_dir() -> Path:
    return Path(os.environ.get("OPTSCHED_E2E_STATE", "/tmp/optsched-e2e"))


def log(msg: str) -> None:
    print(f"[e2e.cluster] {msg}", file=sys.stderr, flush=True)


@dataclass
class ClusterInfo:
    """What a running cluster looks like to tests (also saved as state.json)."""

    state_dir: str
    kubeconfig: str
    logs_dir: str
    profile: str
    ports: dict[str, int]
    versions: dict[str, str]
    started_at: float
    startup_seconds: float

    @classmethod
    def load(cls, directory: Path) -> ClusterInfo | None:
        path = directory / "state.json"
        if not path.exists():
            return None
        try:
            return cls(**json.loads(path.read_text()))
        except (ValueError, TypeError):
            return None

    def save(self) -> None:
        Path(self.state_dir, "state.json").write_text(json.dumps(asdict(self), indent=2) + "\n")


@contextmanager
def _lock(directory: Path) -> Iterator[None]:
    """Serialise up/down on one state dir (parallel pytest sessions, make targets)."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    with open(directory.with_name(directory.name + ".lock"), "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def write_kubeconfig(path: Path, server: str, certs: pki.PKI) -> None:
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "optsched-e2e",
                "cluster": {"server": server, "certificate-authority": str(certs.ca.cert)},
            }
        ],
        "users": [
            {
                "name": "admin",
                "user": {"client-certificate": str(certs.admin.cert), "client-key": str(certs.admin.key)},
            }
        ],
        "contexts": [{"name": "optsched-e2e", "context": {"cluster": "optsched-e2e", "user": "admin"}}],
        "current-context": "optsched-e2e",
    }
    path.write_text(dump_yaml(cfg))
    path.chmod(0o600)


def _healthy(ps: ProcessSet, name: str, log_file: Path, probe: Callable[[], bool], timeout: float) -> None:
    """Wait until ``probe`` passes; fail fast (with the log) if the process exits."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        ps.check(name)
        try:
            if probe():
                return
        except Exception as exc:
            last = exc
        time.sleep(0.25)
    ps.check(name)
    raise ComponentError(name, f"not healthy after {timeout:.0f}s (last probe error: {last!r})", log_file)


def _http_ok(url: str, verify: Any = False, expect: str | None = None) -> bool:
    resp = httpx.get(url, verify=verify, timeout=3.0)
    return resp.status_code == 200 and (expect is None or expect in resp.text)


def up(profile_name: str = "small", *, fresh: bool = False, timeout: float = 180.0) -> ClusterInfo:
    # Validate the input before touching anything: a typo must not stop a running cluster.
    profile = load_profile(profile_name)
    binaries = current_binaries()
    kueue_assets = asset_dir("kueue")
    if not (kueue_assets / "crds").is_dir():
        raise FileNotFoundError(f"Kueue CRDs missing in {kueue_assets}: run `make e2e-build`")
    sdir = state_dir()
    with _lock(sdir):
        if not fresh:
            info = ClusterInfo.load(sdir)
            if info and _is_healthy(sdir, info):
                wanted = {c: r.version for c, r in load_resolved().items()}
                if info.versions != wanted:
                    log(f"running cluster has versions {info.versions}, want {wanted}: restarting")
                elif info.profile != profile_name:
                    log(f"running cluster has profile {info.profile}, want {profile_name}: restarting")
                else:
                    log(f"reusing running cluster in {sdir} (profile {info.profile})")
                    return info
        _down(sdir, quiet=True)
        t0 = time.monotonic()
        if sdir.exists():
            shutil.rmtree(sdir)
        for d in (sdir / "logs", sdir / "certs", sdir / "kueue" / "certs"):
            d.mkdir(parents=True)
        ps = ProcessSet(sdir)
        try:
            return _bring_up(sdir, profile_name, profile, binaries, kueue_assets, ps, t0, timeout)
        except BaseException:
            log("startup failed; stopping every component that was started")
            ps.stop_all()
            raise


def _bring_up(
    sdir: Path,
    profile_name: str,
    profile: Any,
    binaries: dict[str, Path],
    kueue_assets: Path,
    ps: ProcessSet,
    t0: float,
    timeout: float,
) -> ClusterInfo:
    logs, cert_dir = sdir / "logs", sdir / "certs"
    ports = Ports.pick()
    certs = pki.generate_pki(cert_dir)
    kubeconfig = sdir / "kubeconfig"
    server = f"https://127.0.0.1:{ports.apiserver}"
    write_kubeconfig(kubeconfig, server, certs)
    env = {"KUBECONFIG": str(kubeconfig)}

    def step(msg: str) -> None:
        log(f"[{time.monotonic() - t0:5.1f}s] {msg}")

    # etcd
    ps.start("etcd", etcd_args(binaries["etcd"], sdir / "etcd", ports), logs / "etcd.log")
    _healthy(
        ps,
        "etcd",
        logs / "etcd.log",
        lambda: _http_ok(f"http://127.0.0.1:{ports.etcd}/health", expect="true"),
        60,
    )
    step("etcd healthy")

    # kube-apiserver
    gates = os.environ.get("OPTSCHED_E2E_FEATURE_GATES", "")
    ps.start(
        "kube-apiserver",
        apiserver_args(binaries["kube-apiserver"], cert_dir, ports, gates),
        logs / "kube-apiserver.log",
    )
    kube = Kube.from_kubeconfig(kubeconfig)
    try:
        _healthy(
            ps,
            "kube-apiserver",
            logs / "kube-apiserver.log",
            lambda: kube.request("GET", "/readyz") == "ok",
            timeout,
        )
        step("kube-apiserver ready")

        # controller-manager and scheduler
        for name, args in (
            (
                "kube-controller-manager",
                controller_manager_args(binaries["kube-controller-manager"], cert_dir, kubeconfig, ports),
            ),
            ("kube-scheduler", scheduler_args(binaries["kube-scheduler"], cert_dir, kubeconfig, ports)),
        ):
            ps.start(name, args, logs / f"{name}.log")
        for name, port in (
            ("kube-controller-manager", ports.controller_manager),
            ("kube-scheduler", ports.scheduler),
        ):
            _healthy(
                ps,
                name,
                logs / f"{name}.log",
                functools.partial(_http_ok, f"https://127.0.0.1:{port}/healthz", expect="ok"),
                120,
            )
        step("kube-controller-manager and kube-scheduler healthy")
        kube.apply(DEVICE_CLASS)
        step("DeviceClass gpu.nvidia.com applied (DRA, extended resource nvidia.com/gpu)")

        # Kueue: CRDs, namespace, certs, config, manager, webhooks
        ca = certs.ca.cert.read_bytes()
        webhook_url = f"https://127.0.0.1:{ports.webhook}"
        _install_kueue_crds(kube, kueue_assets, timeout, webhook_url, ca)
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": KUEUE_NAMESPACE}})
        step("Kueue CRDs established")
        webhook_certs = sdir / "kueue" / "certs"
        for target in (webhook_certs, KUEUE_METRICS_CERTS):
            _install_serving_cert(target, certs)
        cfg_file = sdir / "kueue" / "config.yaml"
        cfg_file.write_text(dump_yaml(kueue_config(webhook_certs, ports)))
        ps.start("kueue", kueue_args(binaries["kueue"], cfg_file), logs / "kueue.log", env=env)
        _healthy(
            ps,
            "kueue",
            logs / "kueue.log",
            lambda: _http_ok(f"http://127.0.0.1:{ports.kueue_health}/readyz"),
            timeout,
        )
        kube.apply(kueue_webhooks(kueue_assets / "webhooks.yaml", webhook_url, ca))
        _healthy(ps, "kueue", logs / "kueue.log", lambda: _webhook_answers(kube), 60)
        step("Kueue manager ready, webhooks answering")

        # KWOK and the fake GPU nodes
        stages = sdir / "kwok-stages.yaml"
        shutil.copyfile(STAGES_FILE, stages)
        ps.start("kwok", kwok_args(binaries["kwok"], kubeconfig, stages), logs / "kwok.log")
        names = create_nodes(kube, profile)
        step(f"created {len(names)} nodes ({profile.gpu_count} GPUs)")
        _healthy(
            ps,
            "kwok",
            logs / "kwok.log",
            lambda: _ready_nodes(kube) >= len(names),
            max(timeout, len(names) * 0.5),
        )
        wait_for(
            lambda: kube.get("v1", "ServiceAccount", "default", "default"),
            60,
            "the default ServiceAccount (kube-controller-manager)",
        )
        ps.check()
    finally:
        kube.close()
    elapsed = time.monotonic() - t0
    info = ClusterInfo(
        state_dir=str(sdir),
        kubeconfig=str(kubeconfig),
        logs_dir=str(logs),
        profile=profile_name,
        ports=asdict(ports),
        versions={c: r.version for c, r in load_resolved().items()},
        started_at=time.time(),
        startup_seconds=round(elapsed, 1),
    )
    info.save()
    step(f"cluster up: {len(names)} nodes Ready; KUBECONFIG={kubeconfig}")
    return info


def _install_serving_cert(target: Path, certs: pki.PKI) -> None:
    try:
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(certs.webhook.cert, target / "tls.crt")
        shutil.copyfile(certs.webhook.key, target / "tls.key")
        shutil.copyfile(certs.ca.cert, target / "ca.crt")
    except PermissionError as exc:
        raise ComponentError(
            "kueue",
            f"cannot write its serving certificate to {target} ({exc}); the Kueue manager reads its "
            "metrics certificate from that fixed path: create the directory writable for this user",
        ) from exc


def conversion_crds(kustomization: Path) -> set[str]:
    """Plurals of the CRDs Kueue's release wires to its conversion webhook.

    Read from the patches its CRD kustomization enables, so a Kueue upgrade that
    adds or drops one is followed without a code change.
    """
    if not kustomization.exists():
        return set()
    doc = yaml.safe_load(kustomization.read_text()) or {}
    out = set()
    for patch in doc.get("patches") or []:
        m = re.fullmatch(r"patches/webhook_in_(\w+)\.yaml", str(patch.get("path", "")))
        if m:
            out.add(m.group(1))
    return out


def _install_kueue_crds(kube: Kube, assets: Path, timeout: float, webhook_url: str, ca: bytes) -> None:
    """Apply Kueue's CRDs; the multi-version ones convert through the local manager's /convert."""
    convert = conversion_crds(assets / "crd-kustomization.yaml")
    names = []
    for f in sorted((assets / "crds").glob("*.yaml")):
        for crd in load_yaml_docs(f):
            if crd["spec"]["names"]["plural"] in convert:
                crd["spec"]["conversion"] = {
                    "strategy": "Webhook",
                    "webhook": {
                        "clientConfig": {
                            "url": f"{webhook_url}/convert",
                            "caBundle": base64.b64encode(ca).decode(),
                        },
                        "conversionReviewVersions": ["v1"],
                    },
                }
            names.append(kube.apply(crd)[0]["metadata"]["name"])
    for name in names:
        wait_for(functools.partial(_crd_established, kube, name), timeout, f"CRD {name} Established")


def _crd_established(kube: Kube, name: str) -> bool:
    return has_condition(kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name), "Established")


def _webhook_answers(kube: Kube) -> bool:
    """A dry-run create goes through Kueue's mutating + validating webhooks."""
    rf = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "e2e-webhook-probe"},
    }
    try:
        kube.create(rf, dry_run=True)
        return True
    except ApiError as exc:
        if exc.status == 409:
            return True
        raise


def _ready_nodes(kube: Kube) -> int:
    return sum(1 for n in kube.list("v1", "Node", label_selector="type=kwok") if has_condition(n, "Ready"))


def running(sdir: Path | None = None) -> ClusterInfo | None:
    """The healthy cluster in ``sdir`` (default: the state dir), if there is one."""
    sdir = sdir or state_dir()
    info = ClusterInfo.load(sdir)
    return info if info and _is_healthy(sdir, info) else None


def _is_healthy(sdir: Path, info: ClusterInfo) -> bool:
    ps = ProcessSet.load(sdir)
    alive = ps.alive()
    if set(alive) != set(COMPONENTS) or not all(alive.values()):
        return False
    try:
        with Kube.from_kubeconfig(info.kubeconfig) as kube:
            return bool(kube.request("GET", "/readyz") == "ok" and _webhook_answers(kube))
    except Exception:
        return False


def down() -> list[str]:
    sdir = state_dir()
    with _lock(sdir):
        return _down(sdir)


def _down(sdir: Path, quiet: bool = False) -> list[str]:
    ps = ProcessSet.load(sdir)
    stopped = ps.stop_all()
    if stopped and not quiet:
        log(f"stopped {', '.join(stopped)}")
    # etcd data is throw-away; logs stay for post-mortems until the next `up`.
    shutil.rmtree(sdir / "etcd", ignore_errors=True)
    state = sdir / "state.json"
    if state.exists():
        state.unlink()
    return stopped


def restart_component(name: str, *, down_seconds: float = 0.0, timeout: float = 120.0) -> float:
    """Stop one component of the running cluster and start it again with the same command line.

    For fault injection (the chaos soak): the process group gets SIGTERM
    (SIGKILL after 10 s), stays down ``down_seconds``, then runs again from
    the command line it had, logging to the same file and keeping its place in
    ``pids.json`` so ``down`` stops it as before. For kube-apiserver this waits
    until ``/readyz`` answers; returns the seconds from the stop until then.
    """
    sdir = state_dir()
    with _lock(sdir):
        ps = ProcessSet.load(sdir)
        proc = next((p for p in ps.procs if p.name == name), None)
        if proc is None:
            raise ComponentError(name, f"not a component of the cluster in {sdir}")
        argv = [a.decode() for a in Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0") if a]
        started = time.monotonic()
        _stop_group(proc.pid, 10.0)
        time.sleep(down_seconds)
        place = ps.procs.index(proc)
        ps.procs.remove(proc)
        ps.start(name, argv, Path(proc.log))
        ps.procs.insert(place, ps.procs.pop())
        ps._save()
    if name == "kube-apiserver":
        with Kube.from_kubeconfig(sdir / "kubeconfig") as kube:
            _healthy(ps, name, Path(proc.log), lambda: kube.request("GET", "/readyz") == "ok", timeout)
    return time.monotonic() - started


def _stop_group(pid: int, grace: float) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            if not Path(f"/proc/{pid}").exists() or _zombie(pid):
                return
            time.sleep(0.1)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def status() -> int:
    sdir = state_dir()
    info = ClusterInfo.load(sdir)
    alive = ProcessSet.load(sdir).alive()
    if not info and not alive:
        print(f"no cluster in {sdir}")
        return 1
    for name in COMPONENTS:
        print(f"{name:26s} {'running' if alive.get(name) else 'STOPPED'}")
    if not info:
        print("state.json missing: cluster start did not finish")
        return 1
    print(f"profile      {info.profile}\nkubeconfig   {info.kubeconfig}\nlogs         {info.logs_dir}")
    print("versions     " + ", ".join(f"{k} {v}" for k, v in sorted(info.versions.items())))
    ok = _is_healthy(sdir, info)
    if ok:
        with Kube.from_kubeconfig(info.kubeconfig) as kube:
            print(f"nodes Ready  {_ready_nodes(kube)}")
    print("healthy" if ok else "UNHEALTHY")
    return 0 if ok else 1


def dump_logs(logs_dir: str | Path, lines: int = 40, out: Any = None) -> None:
    """Print the tail of every component log (tests call this on failure)."""
    out = out or sys.stderr
    for f in sorted(Path(logs_dir).glob("*.log")):
        print(f"===== {f.name} (last {lines} lines) =====\n{log_tail(f, lines)}", file=out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m e2e.cluster", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p_up = sub.add_parser("up", help="start (or reuse) a cluster")
    p_up.add_argument("--profile", default=os.environ.get("OPTSCHED_E2E_PROFILE", "small"))
    p_up.add_argument("--fresh", action="store_true", help="restart even if a healthy cluster runs")
    p_up.add_argument("--timeout", type=float, default=180.0, help="seconds per readiness wait")
    sub.add_parser("down", help="stop every component")
    sub.add_parser("status", help="show components and health")
    sub.add_parser("kubeconfig", help="print the kubeconfig path")
    p_logs = sub.add_parser("logs", help="print the tail of every component log")
    p_logs.add_argument("-n", type=int, default=40)
    args = ap.parse_args(argv)
    # SIGTERM (CI timeout, `kill`) unwinds like Ctrl-C, so started components are stopped.
    signal.signal(signal.SIGTERM, _terminate)
    try:
        if args.cmd == "up":
            t0 = time.monotonic()
            info = up(args.profile, fresh=args.fresh, timeout=args.timeout)
            log(f"ready in {time.monotonic() - t0:.1f}s; export KUBECONFIG={info.kubeconfig}")
            return 0
        if args.cmd == "down":
            down()
            return 0
        if args.cmd == "status":
            return status()
        if args.cmd == "kubeconfig":
            print(state_dir() / "kubeconfig")
            return 0
        if args.cmd == "logs":
            dump_logs(state_dir() / "logs", args.n, sys.stdout)
            return 0
    except (ProfileError, FileNotFoundError) as exc:
        log(f"ERROR: {exc}")
        return 2
    except ComponentError as exc:
        log(f"ERROR: {exc}")
        return 1
    except (TimeoutError, ApiError, OSError) as exc:
        log(f"ERROR: {exc}")
        dump_logs(state_dir() / "logs", 20)
        return 1
    except KeyboardInterrupt:
        log("interrupted; cluster stopped")
        return 130
    return 2


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    sys.exit(main())
