"""Cluster profiles: the fake GPU fleet an e2e cluster is started with.

A profile is YAML (``e2e/profiles/<name>.yaml``) listing node pools.  Pools are
laid out in order onto racks of ``layout.nodesPerRack`` nodes (a pool always
starts a new rack, because real racks hold one kind of machine), and
consecutive racks form blocks of ``layout.racksPerBlock``.  That gives tests a
deterministic topology: node names, racks and blocks are the same on every run.

A pool with ``dra: true`` stands for nodes where NVIDIA's DRA driver hands the
GPUs out: no ``nvidia.com/gpu`` capacity, a ResourceSlice instead (published by
the simulated agent). A profile may be a variant of another: ``extends: large``
takes that profile's layout and pools, and a top-level ``dra: true`` makes every
GPU pool of it a DRA pool (the same fleet, the same queue, the other mode).
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
    #: GPUs handed out by DRA (a ResourceSlice the simulated agent publishes), not a device plugin
    dra: bool = False


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

    def pools_where(self, *, dra: bool) -> list[Pool]:
        """The GPU pools whose GPUs DRA hands out (``dra=True``) or a device plugin does."""
        return [p for p in self.pools if p.gpu is not None and p.dra == dra]


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
    return parse_profile(_load_doc(path, set()), str(path))


def _load_doc(path: Path, seen: set[Path]) -> Any:
    """The profile document, with the document it ``extends`` merged under it."""
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ProfileError(f"{path}: invalid YAML: {exc}") from exc
    if not isinstance(doc, dict) or "extends" not in doc:
        return doc
    base_name = doc["extends"]
    if not isinstance(base_name, str):
        raise ProfileError(f"{path}.extends: expected a profile name, got {base_name!r}")
    base_path = profile_path(base_name)
    if base_path.resolve() in seen | {path.resolve()} or not base_path.exists():
        raise ProfileError(f"{path}.extends: {base_name!r} is not a profile this one can extend")
    base = _load_doc(base_path, seen | {path.resolve()})
    if not isinstance(base, dict):
        raise ProfileError(f"{base_path}: expected a mapping at top level")
    merged = {**base, **{k: v for k, v in doc.items() if k != "extends"}}
    if doc.get("dra") is True:
        merged["pools"] = [
            {**p, "dra": True} if isinstance(p, dict) and p.get("gpu") else p for p in merged["pools"]
        ]
    return merged


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


def _dra(pool: dict[str, Any], where: str) -> bool:
    value = pool.get("dra", False)
    if not isinstance(value, bool):
        raise ProfileError(f"{where}.dra: expected true or false, got {value!r}")
    if value and not pool.get("gpu"):
        raise ProfileError(f"{where}.dra: a pool without GPUs cannot be a DRA pool")
    return value


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
                dra=_dra(p, pw),
            )
        )
    unhealthy = {str(k): [int(x) for x in v] for k, v in (doc.get("unhealthy") or {}).items()}
    return Profile(
        name=str(doc.get("name", Path(where).stem)), layout=layout, pools=pools, unhealthy=unhealthy
    )
