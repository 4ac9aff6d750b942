"""``GPUHardwareProfile`` files: the hardware a simulated node pretends to have.

A profile names a GPU product, its memory, how many GPUs a node has, their
NUMA nodes and how they are NVLinked. The simulated backend (KWOK nodes,
tests, demos) and the fake NVML library in the tests both read it, so a
simulated node and the NVML code path discover the same devices. Users write
these files too: every mistake is an :class:`~optsched.errors.InputError`
naming the file, the profile and the field, and saying what was expected.

The format (one or more YAML documents per file)::

    apiVersion: optsched.io/v1alpha1
    kind: GPUHardwareProfile
    metadata: {name: dgx-h100}
    spec:
      product: NVIDIA-H100-80GB-HBM3   # as GPU Feature Discovery labels it
      memoryMiB: 81559                 # per GPU
      count: 8
      numa: [0, 0, 0, 0, 1, 1, 1, 1]   # optional, one entry per GPU index
      nvlink:                          # optional (absent: no NVLink); exactly one of
        switch: true                   #   an NVSwitch board: all GPUs fully connected
        # links: [[0, 1, 12]]          #   point-to-point: [gpu a, gpu b, number of links]
      migCapable: true                 # optional, default false
      clique: null                     # optional "<clusterUUID>.<cliqueId>" (GB200 NVL72 and the like)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from optsched.agent.devices import NvLink
from optsched.agent.profile_spec import SpecError, parse_spec
from optsched.errors import InputError
from optsched.snapshot.documents import decode, read_bytes

API_VERSION = "optsched.io/v1alpha1"
KIND = "GPUHardwareProfile"
SHIPPED_DIR = Path(__file__).resolve().parent.parent / "examples" / "hardware"
"""The profiles that ship with optsched; ``resolve_profiles`` finds them by name."""

_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_TOP_KEYS = ("apiVersion", "kind", "metadata", "spec")
_NAME_MAX = 253
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


@dataclass(frozen=True)
class HardwareProfile:
    """One validated ``GPUHardwareProfile``: the GPUs of one node."""

    name: str
    product: str
    """GPU Feature Discovery's form of the product name (``nvidia.com/gpu.product``)."""
    memory_mib: int
    count: int
    numa: tuple[int, ...] | None = None
    switch: bool = False
    """An NVSwitch board: every GPU's NVLinks end at a switch, so all GPUs are fully connected."""
    links: tuple[NvLink, ...] = ()
    """Point-to-point NVLinks, ``a < b``, ordered by ``(a, b)``."""
    mig_capable: bool = False
    clique: str | None = None


def load_profiles(path: Path) -> list[HardwareProfile]:
    """Every profile in the file, in document order (empty documents are skipped)."""
    source = str(path)
    text = decode(read_bytes(path), source=source)
    try:
        documents = list(yaml.load_all(text, Loader=_LOADER))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise InputError(f"not valid YAML{where}", source=source) from None
    profiles: list[HardwareProfile] = []
    seen: dict[str, int] = {}
    for number, document in enumerate(documents, start=1):
        if document is None:
            continue
        profile = parse_profile(document, source=source, number=number)
        if profile.name in seen:
            raise InputError(
                f"duplicate profile name {profile.name!r} (document {seen[profile.name]} has it too); "
                "expected a unique metadata.name per file",
                source=source,
                obj=profile.name,
                field="metadata.name",
            )
        seen[profile.name] = number
        profiles.append(profile)
    if not profiles:
        raise InputError(f"holds no {KIND} documents", source=source)
    return profiles


def shipped_names() -> list[str]:
    """The names of the profiles shipped with optsched (each file's name is its profile's name)."""
    return sorted(path.stem for path in SHIPPED_DIR.glob("*.yaml"))


def resolve_profiles(name_or_path: str) -> list[HardwareProfile]:
    """The profiles in a file, or the shipped profile of that name when no such file exists."""
    path = Path(name_or_path)
    if path.exists():
        return load_profiles(path)
    if name_or_path in shipped_names():
        return load_profiles(SHIPPED_DIR / f"{name_or_path}.yaml")
    raise InputError(
        f"no such file, and no shipped hardware profile of that name; expected a path or one of "
        f"{', '.join(shipped_names())}",
        source=name_or_path,
    )


def parse_profile(document: object, *, source: str, number: int = 1) -> HardwareProfile:
    """One YAML document (``number`` counts from 1) as a profile; anything wrong names its field."""
    where = f"document {number}"
    if not isinstance(document, dict):
        raise InputError(f"expected a {KIND} mapping, got {_kind_of(document)}", source=source, obj=where)
    _only_keys(document, _TOP_KEYS, prefix="", source=source, obj=where)
    if document.get("apiVersion") != API_VERSION:
        raise _error(
            f"expected {API_VERSION}, got {document.get('apiVersion')!r}", source, where, "apiVersion"
        )
    if document.get("kind") != KIND:
        raise _error(f"expected {KIND}, got {document.get('kind')!r}", source, where, "kind")
    name = _name(document.get("metadata"), source=source, obj=where)
    spec = document.get("spec")
    if not isinstance(spec, dict):
        raise _error(f"expected a mapping, got {_kind_of(spec)}", source, name, "spec")
    try:
        fields = parse_spec(spec)
    except SpecError as exc:
        raise _error(exc.detail, source, name, f"spec.{exc.field}") from None
    return HardwareProfile(name=name, **fields)


def _name(metadata: object, *, source: str, obj: str) -> str:
    if not isinstance(metadata, dict):
        raise _error(f"expected a mapping with a name, got {_kind_of(metadata)}", source, obj, "metadata")
    _only_keys(metadata, ("name",), prefix="metadata.", source=source, obj=obj)
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        raise _error(f"expected a non-empty string, got {name!r}", source, obj, "metadata.name")
    if len(name) > _NAME_MAX or not _NAME.match(name):
        raise _error(
            f"expected lower-case letters, digits, '-' and '.', beginning and ending with a letter or digit "
            f"(at most {_NAME_MAX}), got {name!r}",
            source,
            obj,
            "metadata.name",
        )
    return name


def _only_keys(
    mapping: dict[Any, Any], allowed: tuple[str, ...], *, prefix: str, source: str, obj: str
) -> None:
    for key in mapping:
        if key not in allowed:
            raise _error(
                f"unknown field; expected one of {', '.join(allowed)}", source, obj, f"{prefix}{key}"
            )


def _error(detail: str, source: str, obj: str, field: str) -> InputError:
    return InputError(detail, source=source, obj=obj, field=field)


def _kind_of(value: object) -> str:
    return "nothing" if value is None else type(value).__name__
