"""The ``spec`` of a ``GPUHardwareProfile``, checked field by field.

Kept apart from the file handling in ``optsched.agent.profile``: this module
knows only the shape of one spec and says, for the first thing wrong, which
field (``nvlink.links[2]``) and what was expected.
"""

from __future__ import annotations

import re
from typing import Any

from optsched.agent.devices import NvLink
from optsched.agent.islands import MAX_EXACT_GPUS, islands

MAX_GPUS = 1024
"""The most GPUs one profile may give a node."""
MAX_MEMORY_MIB = 2**24
"""16 TiB per GPU: far above any GPU, low enough to catch a value given in bytes."""
MAX_NUMA = 1023
MAX_CLIQUE_ID = 2**32 - 1

_SPEC_KEYS = ("product", "memoryMiB", "count", "numa", "nvlink", "migCapable", "clique")
_NVLINK_KEYS = ("switch", "links")
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_CLIQUE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.([0-9]{1,10})$")


class SpecError(Exception):
    """The first problem in a spec: ``field`` is relative to ``spec`` (``nvlink.links[2]``)."""

    def __init__(self, detail: str, field: str) -> None:
        super().__init__(f"{field}: {detail}")
        self.detail = detail
        self.field = field


def parse_spec(spec: dict[Any, Any]) -> dict[str, Any]:
    """The profile's fields (keyword arguments of ``HardwareProfile`` but ``name``), or a SpecError."""
    for key in spec:
        if key not in _SPEC_KEYS:
            raise SpecError(f"unknown field; expected one of {', '.join(_SPEC_KEYS)}", str(key))
    product = spec.get("product")
    if not isinstance(product, str) or not _LABEL_VALUE.match(product):
        raise SpecError(
            "expected the product as GPU Feature Discovery labels it (letters, digits, '-', '_' and '.', "
            f"at most 63, spaces written as '-'), e.g. NVIDIA-H100-80GB-HBM3; got {product!r}",
            "product",
        )
    count = _integer(spec.get("count"), "count", low=1, high=MAX_GPUS)
    switch, links = _nvlink(spec.get("nvlink"), count)
    return {
        "product": product,
        "memory_mib": _integer(spec.get("memoryMiB"), "memoryMiB", low=1, high=MAX_MEMORY_MIB),
        "count": count,
        "numa": _numa(spec.get("numa"), count),
        "switch": switch,
        "links": links,
        "mig_capable": _flag(spec.get("migCapable"), "migCapable"),
        "clique": _clique(spec.get("clique")),
    }


def _integer(value: object, field: str, *, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(f"expected an integer from {low} to {high}, got {value!r}", field)
    if not low <= value <= high:
        raise SpecError(f"expected an integer from {low} to {high}, got {value}", field)
    return value


def _index(value: object, field: str, count: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(f"expected a GPU index from 0 to {count - 1}, got {value!r}", field)
    if not 0 <= value < count:
        raise SpecError(
            f"GPU index {value} is out of range; expected 0 to {count - 1} (the profile has {count} GPUs)",
            field,
        )
    return value


def _flag(value: object, field: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise SpecError(f"expected true or false, got {value!r}", field)
    return value


def _numa(value: object, count: int) -> tuple[int, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise SpecError(f"expected a list of {count} NUMA node numbers (one per GPU index)", "numa")
    if len(value) != count:
        raise SpecError(f"expected {count} entries (one per GPU index), got {len(value)}", "numa")
    return tuple(_integer(node, f"numa[{i}]", low=0, high=MAX_NUMA) for i, node in enumerate(value))


def _clique(value: object) -> str | None:
    if value is None:
        return None
    match = _CLIQUE.match(value) if isinstance(value, str) else None
    if match is None or int(match.group(1)) > MAX_CLIQUE_ID:
        raise SpecError(
            "expected <clusterUUID>.<cliqueId> as NVML reports it: a lower-case UUID, a dot and a number "
            f"up to {MAX_CLIQUE_ID} (e.g. a1b2c3d4-0000-4000-8000-000000000001.1); got {value!r}",
            "clique",
        )
    return str(value)


def _nvlink(value: object, count: int) -> tuple[bool, tuple[NvLink, ...]]:
    if value is None:
        return False, ()
    if not isinstance(value, dict):
        raise SpecError("expected a mapping with exactly one of switch: true or links", "nvlink")
    for key in value:
        if key not in _NVLINK_KEYS:
            raise SpecError(f"unknown field; expected one of {', '.join(_NVLINK_KEYS)}", f"nvlink.{key}")
    has_switch, has_links = value.get("switch") is not None, value.get("links") is not None
    if has_switch == has_links:
        which = "both" if has_switch else "neither"
        raise SpecError(f"expected exactly one of switch: true or links, got {which}", "nvlink")
    if has_switch:
        if value["switch"] is not True:
            raise SpecError(
                f"expected true (leave nvlink out for no NVLink), got {value['switch']!r}", "nvlink.switch"
            )
        return True, ()
    links = _links(value["links"], count)
    if count > MAX_EXACT_GPUS:
        try:
            islands(count, links, frozenset())
        except ValueError as exc:
            raise SpecError(str(exc), "nvlink.links") from None
    return False, links


def _links(value: object, count: int) -> tuple[NvLink, ...]:
    if not isinstance(value, list) or not value:
        raise SpecError("expected a non-empty list of [gpu a, gpu b, number of links]", "nvlink.links")
    seen: dict[tuple[int, int], int] = {}
    links = []
    for number, entry in enumerate(value):
        field = f"nvlink.links[{number}]"
        if not isinstance(entry, list) or len(entry) != 3:
            raise SpecError(f"expected [gpu a, gpu b, number of links], got {entry!r}", field)
        a = _index(entry[0], f"{field}[0]", count)
        b = _index(entry[1], f"{field}[1]", count)
        n = _integer(entry[2], f"{field}[2]", low=1, high=MAX_GPUS)
        if a == b:
            raise SpecError(f"links GPU {a} to itself; expected two different GPU indices", field)
        pair = (min(a, b), max(a, b))
        if pair in seen:
            raise SpecError(
                f"GPUs {pair[0]} and {pair[1]} are linked already by nvlink.links[{seen[pair]}]; "
                "expected one entry per pair (its third number counts the links)",
                field,
            )
        seen[pair] = number
        links.append(NvLink(pair[0], pair[1], n))
    return tuple(sorted(links, key=lambda link: (link.a, link.b)))
