"""Cluster profiles: the fake GPU fleet an e2e cluster is started with.

A profile is YAML (``e2e/profiles/<name>.yaml``) listing node pools.  Pools are
laid out in order onto racks of ``layout.nodesPerRack`` nodes (a pool always
starts a new rack, because real racks hold one kind of machine), and
consecutive racks form blocks of ``layout.racksPerBlock``.  That gives tests a
deterministic topology: node names, racks and blocks are the same on every run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

PROFILES_DIR = Path(__file__).resolve().parent / "profiles"


class ProfileError(ValueError):
    """A profile file is malformed; the message names the file and the field."""


@dataclass(frozen=True)
class Taint:
    key: str
    effect: str
    value: str = ""


@dataclass(frozen=True)
class GPU:
    product: str
    count: int
    memory_mib: int
    nvlink_islands: list[list[int]] | None = None
    numa: list[int] | None = None
    clique_size: int = 0


@dataclass(frozen=True)
class Pool:
    name: str
    count: int
    gpu: GPU | None
    cpu: str
    memory: str
    pods: int
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[Taint] = field(default_factory=list)


@dataclass(frozen=True)
class Layout:
    nodes_per_rack: int
    racks_per_block: int
    block_label: str = "cloud.provider.com/topology-block"
    rack_label: str = "cloud.provider.com/topology-rack"


@dataclass(frozen=True)
class Profile:
    name: str
    layout: Layout
    pools: list[Pool]
    #: node name -> GPU indices marked unhealthy in the topology annotation
    unhealthy: dict[str, list[int]] = field(default_factory=dict)

    @property
    def node_count(self) -> int:
        return sum(p.count for p in self.pools)

    @property
    def gpu_count(self) -> int:
        return sum(p.count * (p.gpu.count if p.gpu else 0) for p in self.pools)


def profile_path(name_or_path: str) -> Path:
    """Accept a bare profile name (``small``) or a path to a YAML file."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        return p
    return PROFILES_DIR / f"{name_or_path}.yaml"


def load_profile(name_or_path: str) -> Profile:
    path = profile_path(name_or_path)
    if not path.exists():
        known = ", ".join(sorted(q.stem for q in PROFILES_DIR.glob("*.yaml")))
        raise ProfileError(f"profile {name_or_path!r} not found ({path}); known: {known}")
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ProfileError(f"{path}: invalid YAML: {exc}") from exc
    return parse_profile(doc, str(path))


def _req(d: dict[str, Any], key: str, where: str, typ: type | tuple[type, ...]) -> Any:
    if key not in d:
        raise ProfileError(f"{where}: missing field {key!r}")
    value = d[key]
    if not isinstance(value, typ) or (isinstance(value, bool) and typ is int):
        raise ProfileError(f"{where}.{key}: expected {getattr(typ, '__name__', typ)}, got {value!r}")
    return value


def _parse_gpu(d: dict[str, Any], where: str) -> GPU:
    count = _req(d, "count", where, int)
    if count < 1:
        raise ProfileError(f"{where}.count: must be >= 1")
    islands = d.get("nvlinkIslands")
    if islands is not None:
        seen = sorted(i for isl in islands for i in isl)
        if seen != sorted(set(seen)) or any(i < 0 or i >= count for i in seen):
            raise ProfileError(f"{where}.nvlinkIslands: indices must be distinct and in [0, {count})")
    numa = d.get("numa")
    if numa is not None and len(numa) != count:
        raise ProfileError(f"{where}.numa: needs one entry per GPU ({count}), got {len(numa)}")
    return GPU(
        product=_req(d, "product", where, str),
        count=count,
        memory_mib=_req(d, "memoryMiB", where, int),
        nvlink_islands=islands,
        numa=numa,
        clique_size=int(d.get("cliqueSize", 0)),
    )


def parse_profile(doc: Any, where: str = "profile") -> Profile:
    if not isinstance(doc, dict):
        raise ProfileError(f"{where}: expected a mapping at top level")
    lay = _req(doc, "layout", where, dict)
    layout = Layout(
        nodes_per_rack=_req(lay, "nodesPerRack", f"{where}.layout", int),
        racks_per_block=_req(lay, "racksPerBlock", f"{where}.layout", int),
        block_label=lay.get("blockLabel", Layout.block_label),
        rack_label=lay.get("rackLabel", Layout.rack_label),
    )
    if layout.nodes_per_rack < 1 or layout.racks_per_block < 1:
        raise ProfileError(f"{where}.layout: nodesPerRack and racksPerBlock must be >= 1")
    pools: list[Pool] = []
    names: set[str] = set()
    for i, p in enumerate(_req(doc, "pools", where, list)):
        pw = f"{where}.pools[{i}]"
        if not isinstance(p, dict):
            raise ProfileError(f"{pw}: expected a mapping")
        name = _req(p, "name", pw, str)
        if name in names:
            raise ProfileError(f"{pw}.name: duplicate pool {name!r}")
        names.add(name)
        taints = [
            Taint(
                key=_req(t, "key", f"{pw}.taints[{j}]", str),
                effect=_req(t, "effect", f"{pw}.taints[{j}]", str),
                value=str(t.get("value", "")),
            )
            for j, t in enumerate(p.get("taints") or [])
        ]
        pools.append(
            Pool(
                name=name,
                count=_req(p, "count", pw, int),
                gpu=_parse_gpu(p["gpu"], f"{pw}.gpu") if p.get("gpu") else None,
                cpu=str(p.get("cpu", "64")),
                memory=str(p.get("memory", "512Gi")),
                pods=int(p.get("pods", 110)),
                labels={str(k): str(v) for k, v in (p.get("labels") or {}).items()},
                taints=taints,
            )
        )
    unhealthy = {str(k): [int(x) for x in v] for k, v in (doc.get("unhealthy") or {}).items()}
    return Profile(
        name=str(doc.get("name", Path(where).stem)), layout=layout, pools=pools, unhealthy=unhealthy
    )
