"""Pinned component versions and where their binaries are cached.

The pins live in ``e2e/versions.env`` so that one file decides what every
e2e run talks to.  The Go module proxy sometimes stops serving a version
(retracted or withheld); the build then falls back to the nearest served
version and writes what it really used to ``resolved.json`` in the cache, which
is what the cluster harness reads, so a fallback is visible and reproducible.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

E2E_DIR = Path(__file__).resolve().parent
#: The pins; OPTSCHED_E2E_VERSIONS points elsewhere (to try an upgrade without editing the file).
VERSIONS_FILE = Path(os.environ.get("OPTSCHED_E2E_VERSIONS", E2E_DIR / "versions.env"))

#: Component name -> (Go module, key in versions.env)
MODULES: dict[str, tuple[str, str]] = {
    "kubernetes": ("k8s.io/kubernetes", "KUBERNETES_VERSION"),
    "etcd": ("go.etcd.io/etcd/server/v3", "ETCD_VERSION"),
    "kueue": ("sigs.k8s.io/kueue", "KUEUE_VERSION"),
    "kwok": ("sigs.k8s.io/kwok", "KWOK_VERSION"),
}

#: Binary name -> the version key (in :data:`MODULES`) that stamps it.
BINARIES: dict[str, str] = {
    "etcd": "etcd",
    "kube-apiserver": "kubernetes",
    "kube-controller-manager": "kubernetes",
    "kube-scheduler": "kubernetes",
    "kueue": "kueue",
    "kwok": "kwok",
}


def cache_dir() -> Path:
    """Cache root, outside the repo so a fresh checkout reuses earlier builds."""
    env = os.environ.get("OPTSCHED_E2E_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "optsched-e2e"


def read_pins(path: Path = VERSIONS_FILE) -> dict[str, str]:
    """Parse ``KEY=value`` lines; comments and blank lines are skipped."""
    pins: dict[str, str] = {}
    for lineno, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not value.strip():
            raise ValueError(f"{path}:{lineno}: expected KEY=value, got {raw!r}")
        pins[key.strip()] = value.strip().strip('"')
    missing = [key for _, key in MODULES.values() if key not in pins]
    if missing:
        raise ValueError(f"{path}: missing pins: {', '.join(missing)}")
    return pins


@dataclass(frozen=True)
class Resolved:
    """What one component pin resolved to on the module proxy."""

    component: str
    module: str
    pinned: str
    version: str
    note: str = ""

    @property
    def fell_back(self) -> bool:
        return self.pinned != self.version


def resolved_file() -> Path:
    return cache_dir() / "resolved.json"


def load_resolved() -> dict[str, Resolved]:
    """Versions the last build really used, or {} if nothing was built yet."""
    path = resolved_file()
    if not path.exists():
        return {}
    data = json.loads(path.read_text())
    return {name: Resolved(**entry) for name, entry in data.get("components", {}).items()}


def save_resolved(resolved: dict[str, Resolved]) -> None:
    path = resolved_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "pinsFile": str(VERSIONS_FILE),
        "components": {name: asdict(r) for name, r in sorted(resolved.items())},
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(payload, indent=2) + "\n")
    tmp.replace(path)


def binary_path(binary: str, version: str) -> Path:
    """Cached binary location: one file per component and version."""
    return cache_dir() / "bin" / f"{binary}-{version}"


def current_binaries() -> dict[str, Path]:
    """Binaries matching the current pins (after fallback), for the harness.

    Raises FileNotFoundError naming what is missing, so ``up`` tells the user
    to run the build rather than failing later inside a component.
    """
    pins = read_pins()
    resolved = load_resolved()
    out: dict[str, Path] = {}
    missing: list[str] = []
    for binary, comp in BINARIES.items():
        pinned = pins[MODULES[comp][1]]
        entry = resolved.get(comp)
        version = entry.version if entry and entry.pinned == pinned else pinned
        path = binary_path(binary, version)
        if not path.exists():
            missing.append(f"{binary} {version} ({path})")
        out[binary] = path
    if missing:
        raise FileNotFoundError("e2e binaries not built: " + "; ".join(missing) + " -- run `make e2e-build`")
    return out


def resolved_version(comp: str) -> str:
    """Version a component really uses: the fallback if the pin was refused, else the pin."""
    pinned = read_pins()[MODULES[comp][1]]
    entry = load_resolved().get(comp)
    return entry.version if entry and entry.pinned == pinned else pinned


def asset_dir(comp: str, version: str | None = None) -> Path:
    """Files copied from a component's module source (e.g. Kueue CRDs) at build time."""
    return cache_dir() / "assets" / f"{comp}-{version or resolved_version(comp)}"
