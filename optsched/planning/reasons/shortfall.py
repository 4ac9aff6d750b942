"""The sentence and figures of a capacity shortfall: which resource binds, what is free, what is needed.

One builder serves both the "now" reasons (what the plan leaves free) and the
"can never fit" ones (the same gang on the empty cluster), so a MIG slice,
CPU, memory or pod-slot shortage is named as itself with its figures, and a
whole-GPU shortage says whether GPUs are short in total, per node or inside
NVLink islands.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from optsched.model.reasons import Reason, ReasonCode
from optsched.model.snapshot import PodSet
from optsched.planning.reasons.binding import Kind, Limit
from optsched.planning.reasons.shared import demand_figures


@dataclass(frozen=True)
class Shortfall:
    """What the best node group (or domain) of a gang offers, with the resource that binds there."""

    pods: int
    """Pods of the gang that fit."""
    free: float
    """Free GPUs the gang could use there (compute for shares)."""
    per_node: int
    """Most free whole GPUs on one node."""
    limit: Limit | None
    """The binding resource; None when each alone has room but no node has them all at once."""
    asked: tuple[str, ...] = ()
    """Every resource the pods ask for, as a person names it."""


def shortfall_reason(ps: PodSet, what: str, found: Shortfall, *, permanent: bool = False) -> Reason:
    """The reason value: ``pod set main: needs ...; <what binds, with figures>``."""
    limit = found.limit
    needed, unit = demand_figures(ps)
    figures: dict[str, Any] = {
        "pod_set": ps.name,
        "needed": needed,
        "available": found.free if ps.request.gpus else float(found.pods),
        "unit": unit,
        "scope": "eligible nodes",
        "permanent": permanent,
    }
    if limit is not None:
        figures["resource"] = limit.resource
        if limit.kind not in Kind.GPU_KINDS:
            figures.update(needed=limit.needed, available=limit.available, unit=limit.unit)
    head = f"pod set {ps.name}: needs {what}"
    ending = ", so it can never fit" if permanent else ""
    level = ps.required_topology
    if level is not None:
        figures["scope"] = level
        return Reason(
            code=ReasonCode.TOPOLOGY_UNSATISFIABLE,
            message=_in_domain(head, level, found, permanent),
            **figures,
        )
    code, text = _clause(ps, found, permanent)
    return Reason(code=code, message=f"{head}; {text}{ending}", **figures)


def _in_domain(head: str, level: str, found: Shortfall, permanent: bool) -> str:
    limit = found.limit
    if limit is None or limit.kind in Kind.GPU_KINDS:
        if permanent:
            return (
                f"{head} in one {level}; the largest such domain has {found.free:g} usable GPUs, "
                "so it can never fit"
            )
        return f"{head} in one {level}; the one with the most room has {found.free:g} GPUs free"
    where = "the largest such domain" if permanent else "the one with the most room"
    text = _resource(limit, found.pods, "allocatable" if permanent else "free", "there")
    return f"{head} in one {level}; in {where} {text}" + (", so it can never fit" if permanent else "")


def _clause(ps: PodSet, found: Shortfall, permanent: bool) -> tuple[ReasonCode, str]:
    """The code and the part after the demand, for a gang without a required topology level."""
    limit = found.limit
    need = ps.needed
    fit = f"only {found.pods} of {need} pods fit"
    if limit is None:
        asked = _join(list(found.asked))
        state = "there" if permanent else "free"
        return ReasonCode.INSUFFICIENT_CAPACITY, (
            f"{fit}: enough {asked} are {state} in total, but not together on the same nodes"
        )
    if limit.kind not in Kind.GPU_KINDS:
        where = "allocatable" if permanent else "free"
        return ReasonCode.INSUFFICIENT_CAPACITY, _resource(
            limit, found.pods, where, "on eligible nodes", need
        )
    if permanent:
        return _never_gpus(ps, found)
    if limit.kind == Kind.SHARES:
        return (
            ReasonCode.INSUFFICIENT_CAPACITY,
            f"{fit} ({found.free:g} GPUs of compute free on eligible nodes)",
        )
    if found.free == 0:
        return ReasonCode.INSUFFICIENT_CAPACITY, "no GPU is free on the eligible nodes"
    base = f"{fit} ({found.free:g} GPUs free on eligible nodes, at most {found.per_node} on one node)"
    if limit.kind == Kind.GPUS:
        return ReasonCode.INSUFFICIENT_CAPACITY, base
    if limit.kind == Kind.NVLINK:
        return ReasonCode.NVLINK_REQUIRED, base + _nvlink(limit, ps.request.gpus)
    if found.per_node < ps.request.gpus:
        return ReasonCode.GPUS_FRAGMENTED, base + "; the free GPUs are scattered over nodes"
    return ReasonCode.GPUS_FRAGMENTED, base + (
        f"; too few GPUs per node: {_nodes(limit.nodes_with_room)} {ps.request.gpus} or more free"
    )


def _never_gpus(ps: PodSet, found: Shortfall) -> tuple[ReasonCode, str]:
    """A gang the eligible nodes' GPUs could never hold, even with nothing running."""
    limit = found.limit
    assert limit is not None
    text = f"the eligible nodes have {found.free:g} GPUs in total"
    if limit.kind == Kind.GPUS_PER_NODE:
        text += f", at most {found.per_node} on one node: only {found.pods} of {ps.needed} pods fit"
    elif limit.kind == Kind.NVLINK:
        text += f"; only {found.pods} of {ps.needed} pods fit inside one NVLink island each"
    return ReasonCode.INSUFFICIENT_CAPACITY, text


def _nvlink(limit: Limit, gpus: int) -> str:
    text = f"; each pod must sit inside one NVLink island, and too few islands have {gpus} GPUs free"
    if limit.unknown_index_nodes:
        text += (
            f" (GPU pods of unknown index run on {_count(limit.unknown_index_nodes, 'node')}, "
            "so no island there can be promised)"
        )
    return text


def _resource(limit: Limit, pods: int, state: str, where: str, need: int | None = None) -> str:
    """``CPU is short: only 1 of 4 pods fit in the 100 CPUs free on eligible nodes (...)``."""
    verb = "is" if limit.kind in (Kind.CPU, Kind.MEMORY) else "are"
    detail = f"at most {_amount(limit, limit.most_on_one_node, bare=True)} on one node"
    if need and limit.kind != Kind.PODS:
        detail += f", {_amount(limit, limit.needed / need, bare=True)} per pod"
    count = f"only {pods} of {need} pods fit" if need is not None else f"only {pods} pods fit"
    total = _amount(limit, limit.available)
    return f"{limit.words} {verb} short: {count} in the {total} {state} {where} ({detail})"


def _amount(limit: Limit, value: float, *, bare: bool = False) -> str:
    """A figure in the limit's unit, as a person reads it (``bare``: without the unit, memory aside)."""
    if limit.kind == Kind.MEMORY:
        return memory_text(value)
    if bare:
        return number_text(value)
    if limit.kind == Kind.CPU:
        return f"{number_text(value)} CPUs"
    if limit.kind == Kind.PODS:
        return f"{number_text(value)} pod slots"
    if limit.kind == Kind.MIG:
        return f"{number_text(value)} {limit.resource.rsplit('/', 1)[-1]} slices"
    return f"{number_text(value)} {limit.unit}"


def number_text(value: float) -> str:
    """``12``, ``0.25`` or ``1197152``: whole numbers whole, others to two decimals, never ``1e+06``."""
    rounded = round(value, 2)
    return str(int(rounded)) if rounded == int(rounded) else f"{rounded:.2f}".rstrip("0")


def memory_text(mib: float) -> str:
    """``1536 MiB``, ``2 GiB`` or ``1.5 TiB``: memory in the largest unit that states it exactly."""
    if mib >= 1024 * 1024 and mib % (1024 * 1024 / 4) == 0:
        return f"{number_text(mib / (1024 * 1024))} TiB"
    if mib >= 1024 and mib % 256 == 0:
        return f"{number_text(mib / 1024)} GiB"
    return f"{number_text(mib)} MiB"


def _nodes(count: int) -> str:
    return "1 node has" if count == 1 else f"{count} nodes have"


def _count(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _join(words: list[str]) -> str:
    if len(words) <= 1:
        return "".join(words)
    return ", ".join(words[:-1]) + " and " + words[-1]
