"""Build the e2e control-plane binaries from source through the Go module proxy.

Why from source: the machines that run this suite have no Docker, so kind and
release images are out, and release tarballs are not reachable; the Go module
proxy is.  Each component is built from a throw-away *wrapper module* in the
cache that ``require``s the pinned upstream module.  Kubernetes needs one
extra step: ``k8s.io/kubernetes`` refers to its staging modules as
``v0.0.0 => ./staging/...``, which a dependent module cannot use, so the
wrapper ``replace``s every staging module with its published ``v0.<minor>.<patch>``
tag.

Binaries are cached by version (``<cache>/bin/<binary>-<version>``), so a warm
run skips the build entirely.  Usage::

    python -m e2e.build            # build what is missing
    python -m e2e.build --force    # rebuild everything
    python -m e2e.build --resolve-only
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from e2e.versions import (
    BINARIES,
    MODULES,
    VERSIONS_FILE,
    Resolved,
    asset_dir,
    binary_path,
    cache_dir,
    load_resolved,
    read_pins,
    save_resolved,
)

#: Build order: one at a time, because the CI machine has two shared cores.
ORDER = ["etcd", "kwok", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kueue"]

#: The Go package of each binary.
PACKAGES: dict[str, str] = {
    "etcd": "go.etcd.io/etcd/server/v3",
    "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
    "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
    "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
    "kueue": "sigs.k8s.io/kueue/cmd/kueue",
    "kwok": "sigs.k8s.io/kwok/cmd/kwok",
}

SEMVER = re.compile(r"^v(\d+)\.(\d+)\.(\d+)$")


class BuildError(RuntimeError):
    """A build step failed; the message names the component and shows the log tail."""


def log(msg: str) -> None:
    print(f"[e2e.build] {msg}", flush=True)


def go_env() -> dict[str, str]:
    """Environment for every go invocation.

    GOTOOLCHAIN=local: never fetch another toolchain behind the user's back.
    GOWORK=off: an enclosing go.work must not leak into the wrapper modules.
    CGO_ENABLED=0: static binaries, no C toolchain needed.
    """
    env = dict(os.environ)
    env.update(
        GOFLAGS="-mod=mod -buildvcs=false",
        GOTOOLCHAIN="local",
        GOWORK="off",
        CGO_ENABLED="0",
    )
    return env


def require_go() -> str:
    go = shutil.which("go")
    if not go:
        raise BuildError(
            "Go toolchain not found on PATH: install Go >= 1.26 (https://go.dev/dl/) "
            "or use the prebuilt binaries cache (OPTSCHED_E2E_CACHE)"
        )
    return go


def _go(args: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["go", *args], cwd=cwd, env=go_env(), capture_output=True, text=True, timeout=timeout
    )


def is_served(module: str, version: str, workdir: Path) -> bool:
    """True if the proxy serves module@version (a listing can be incomplete, so ask directly)."""
    proc = _go(["list", "-m", "-json", f"{module}@{version}"], workdir, timeout=120)
    return proc.returncode == 0


def listed_versions(module: str, workdir: Path) -> list[str]:
    proc = _go(["list", "-m", "-versions", module], workdir, timeout=120)
    if proc.returncode != 0:
        return []
    return proc.stdout.split()[1:]


def resolve(component: str, pinned: str, workdir: Path) -> Resolved:
    """The pinned version if served, else the nearest served one of the same minor.

    Nearest means smallest patch distance, newer first on ties.  Kubernetes
    counts as served only when its staging tag (k8s.io/api v0.<minor>.<patch>)
    is served too, because the wrapper module needs both.
    """
    module, _ = MODULES[component]

    def ok(version: str) -> bool:
        if not is_served(module, version, workdir):
            return False
        if component == "kubernetes":
            return is_served("k8s.io/api", staging_version(version), workdir)
        return True

    if ok(pinned):
        return Resolved(component, module, pinned, pinned)
    m = SEMVER.match(pinned)
    if not m:
        raise BuildError(f"{component}: pinned version {pinned!r} is refused and is not vX.Y.Z")
    major, minor, patch = (int(x) for x in m.groups())
    # The proxy's version list can be incomplete, so also probe the patches around the pin.
    candidates = {f"v{major}.{minor}.{p}" for p in range(max(0, patch - 5), patch + 6)}
    for v in listed_versions(module, workdir):
        vm = SEMVER.match(v)
        if vm and int(vm.group(1)) == major and int(vm.group(2)) == minor:
            candidates.add(v)
    candidates.discard(pinned)

    def distance(v: str) -> tuple[int, int]:
        p = int(v.rsplit(".", 1)[1])
        return (abs(p - patch), -p)

    for version in sorted(candidates, key=distance):
        if ok(version):
            note = f"{module}@{pinned} is not served by the module proxy; using {version}"
            log(f"WARNING: {note}")
            return Resolved(component, module, pinned, version, note)
    raise BuildError(
        f"{component}: the module proxy serves neither {module}@{pinned} nor any "
        f"v{major}.{minor}.x release; change {VERSIONS_FILE}"
    )


def staging_version(kube_version: str) -> str:
    """k8s.io/kubernetes v1.36.5 -> staging modules v0.36.5."""
    m = SEMVER.match(kube_version)
    if not m:
        raise BuildError(f"kubernetes version {kube_version!r} is not vX.Y.Z")
    return f"v0.{m.group(2)}.{m.group(3)}"


def kube_staging_modules(version: str, workdir: Path) -> list[str]:
    """Staging module paths, read from k8s.io/kubernetes's own go.mod replace block."""
    proc = _go(["mod", "download", "-json", f"k8s.io/kubernetes@{version}"], workdir, timeout=1800)
    if proc.returncode != 0:
        raise BuildError(f"kube: cannot download k8s.io/kubernetes@{version}:\n{proc.stderr[-2000:]}")
    gomod = Path(json.loads(proc.stdout)["GoMod"]).read_text()
    mods = re.findall(r"^\s*(k8s\.io/[\w.-]+)\s+=>\s+\./staging/", gomod, re.M)
    if not mods:
        raise BuildError(f"kube: no staging replacements found in k8s.io/kubernetes@{version} go.mod")
    return sorted(set(mods))


def wrapper_gomod(binary: str, resolved: dict[str, Resolved], workdir: Path) -> str:
    comp = BINARIES[binary]
    r = resolved[comp]
    lines = ["module optsched.local/e2e-build/" + binary, "", "go 1.26", ""]
    lines.append(f"require {r.module} {r.version}")
    if comp == "kubernetes":
        staging = staging_version(r.version)
        lines += ["", "replace ("]
        lines += [f"\t{m} => {m} {staging}" for m in kube_staging_modules(r.version, workdir)]
        lines.append(")")
    return "\n".join(lines) + "\n"


def module_commit(module: str, version: str, workdir: Path) -> str | None:
    """The upstream commit of module@version, when the proxy reports its origin."""
    proc = _go(["list", "-m", "-json", f"{module}@{version}"], workdir, timeout=120)
    if proc.returncode != 0:
        return None
    origin = json.loads(proc.stdout).get("Origin") or {}
    return origin.get("Hash")


def ldflags(binary: str, version: str, commit: str | None = None) -> str:
    """Version stamps, so ``--version`` and the apiserver's /version report the real release."""
    date = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    flags = ["-s", "-w"]
    comp = BINARIES[binary]
    if comp == "kubernetes":
        m = SEMVER.match(version)
        assert m
        stamps = {
            "gitVersion": version,
            "gitMajor": m.group(1),
            "gitMinor": m.group(2),
            "gitTreeState": "clean",
            "buildDate": date,
        }
        if commit:
            stamps["gitCommit"] = commit
        for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
            flags += [f"-X {pkg}.{k}={v}" for k, v in stamps.items()]
    elif comp == "kueue":
        flags += [
            f"-X sigs.k8s.io/kueue/pkg/version.GitVersion={version}",
            f"-X sigs.k8s.io/kueue/pkg/version.GitCommit={commit or 'unknown'}",
            f"-X sigs.k8s.io/kueue/pkg/version.BuildDate={date}",
        ]
    elif comp == "kwok":
        flags += [f"-X sigs.k8s.io/kwok/pkg/consts.Version={version}"]
    elif comp == "etcd":
        flags += [f"-X go.etcd.io/etcd/api/v3/version.GitSHA={commit or version}"]
    return " ".join(flags)


@contextmanager
def build_lock() -> Iterator[None]:
    """Two builds into one cache would race on the same binaries."""
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".build.lock", "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"another build holds {root / '.build.lock'}; waiting")
            fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def build_binary(binary: str, resolved: dict[str, Resolved]) -> float:
    """Build one binary into the cache; returns seconds taken."""
    comp = BINARIES[binary]
    version = resolved[comp].version
    out = binary_path(binary, version)
    src = cache_dir() / "src" / f"{binary}-{version}"
    src.mkdir(parents=True, exist_ok=True)
    (src / "go.mod").write_text(wrapper_gomod(binary, resolved, src))
    logs = cache_dir() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    logfile = logs / f"build-{binary}-{version}.log"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    commit = module_commit(resolved[comp].module, version, src)
    cmd = [
        "go",
        "build",
        "-trimpath",
        "-ldflags",
        ldflags(binary, version, commit),
        "-o",
        str(tmp),
        PACKAGES[binary],
    ]
    log(f"building {binary} {version} (log: {logfile})")
    start = time.monotonic()
    with open(logfile, "w") as fh:
        fh.write("$ " + " ".join(cmd) + "\n")
        fh.flush()
        proc = subprocess.run(cmd, cwd=src, env=go_env(), stdout=fh, stderr=subprocess.STDOUT)
    took = time.monotonic() - start
    if proc.returncode != 0:
        tail = "\n".join(logfile.read_text().splitlines()[-30:])
        raise BuildError(f"{binary} {version}: go build failed (exit {proc.returncode}):\n{tail}")
    tmp.replace(out)
    log(f"built {binary} {version} in {took:.0f}s -> {out}")
    return took


#: Files copied from module sources into the cache: component -> [(source, destination)].
ASSETS: dict[str, list[tuple[str, str]]] = {
    "kueue": [
        ("config/components/crd/bases", "crds"),
        ("config/components/crd/kustomization.yaml", "crd-kustomization.yaml"),
        ("config/components/webhook/manifests.yaml", "webhooks.yaml"),
    ],
}


def copy_assets(resolved: dict[str, Resolved]) -> None:
    """Copy Kueue's CRDs and webhook manifests next to the binaries.

    The harness reads them from the cache, so cleaning the Go module cache does
    not break a warm start.
    """
    for comp, items in ASSETS.items():
        r = resolved[comp]
        dest = asset_dir(comp, r.version)
        if dest.exists():
            continue
        with tempfile.TemporaryDirectory() as td:
            proc = _go(["mod", "download", "-json", f"{r.module}@{r.version}"], Path(td), 1800)
        if proc.returncode != 0:
            raise BuildError(f"{comp}: cannot download {r.module}@{r.version}:\n{proc.stderr}")
        root = Path(json.loads(proc.stdout)["Dir"])
        tmp = dest.with_name(dest.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for src, name in items:
            if (root / src).is_dir():
                shutil.copytree(root / src, tmp / name)
            else:
                shutil.copyfile(root / src, tmp / name)
        for p in tmp.rglob("*"):
            p.chmod(0o755 if p.is_dir() else 0o644)
        tmp.replace(dest)
        log(f"copied {comp} assets -> {dest}")


def resolve_all(pins: dict[str, str]) -> dict[str, Resolved]:
    """Resolve every pin, reusing resolved.json while the pin is unchanged."""
    previous = load_resolved()
    out: dict[str, Resolved] = {}
    with tempfile.TemporaryDirectory() as td:
        for comp, (_, key) in MODULES.items():
            prev = previous.get(comp)
            if prev and prev.pinned == pins[key]:
                out[comp] = prev
                if prev.fell_back:
                    log(f"WARNING: {prev.note}")
                continue
            out[comp] = resolve(comp, pins[key], Path(td))
    save_resolved(out)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m e2e.build", description=__doc__.split("\n")[0])
    ap.add_argument("--force", action="store_true", help="rebuild even if cached")
    ap.add_argument("--only", nargs="*", choices=ORDER, help="build only these binaries")
    ap.add_argument("--resolve-only", action="store_true", help="resolve versions and stop")
    args = ap.parse_args(argv)
    try:
        pins = read_pins()
        wanted = [b for b in ORDER if not args.only or b in args.only]
        with build_lock():
            missing = [b for b in wanted if args.force or not _cached(b, pins)]
            if not missing and not args.resolve_only:
                log(f"all binaries cached in {cache_dir() / 'bin'}")
                return 0
            require_go()
            resolved = resolve_all(pins)
            for comp, r in sorted(resolved.items()):
                log(f"{comp}: {r.module}@{r.version}" + (f" (pinned {r.pinned})" if r.fell_back else ""))
            if args.resolve_only:
                return 0
            times = _load_times()
            for binary in wanted:
                version = resolved[BINARIES[binary]].version
                if binary_path(binary, version).exists() and not args.force:
                    continue
                times[f"{binary}-{version}"] = round(build_binary(binary, resolved))
                _save_times(times)
            copy_assets(resolved)
    except (BuildError, ValueError, OSError) as exc:
        print(f"[e2e.build] ERROR: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, ValueError) else 1
    return 0


def _cached(binary: str, pins: dict[str, str]) -> bool:
    resolved = load_resolved()

    def version_of(comp: str) -> str:
        pinned = pins[MODULES[comp][1]]
        entry = resolved.get(comp)
        return entry.version if entry and entry.pinned == pinned else pinned

    assets_ok = all(asset_dir(c, version_of(c)).exists() for c in ASSETS)
    return binary_path(binary, version_of(BINARIES[binary])).exists() and assets_ok


def _load_times() -> dict[str, int]:
    path = cache_dir() / "build-times.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _save_times(times: dict[str, int]) -> None:
    (cache_dir() / "build-times.json").write_text(json.dumps(times, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main())
