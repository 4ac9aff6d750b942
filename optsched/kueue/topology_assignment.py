"""Decoding Kueue TAS's ``podSetAssignments[].topologyAssignment`` into domains with pod counts.

Kueue writes it at quota reservation: which topology domains (a value per
level, coarsest first) get how many pods of the PodSet. Three encodings are read:

* v1beta1: ``domains: [{values: [...], count: N}]``;
* v1beta2: ``slices: [{domainCount, valuesPerLevel: [...], podCounts | universalPodCount}]``,
  each level either ``universalValue`` or ``roots`` with an optional common ``prefix`` and
  ``suffix``;
* the same slices with the later nesting: a level as ``universal`` or
  ``individual: {prefix, suffix, roots}``, pod counts as ``podCounts: {universal | individual}``.

A malformed assignment is a :class:`ValueError` whose message names the field, so
the caller can warn and go on (the reservation still counts against quota).
"""

from __future__ import annotations

from typing import Any

from optsched.model.admitted import TopologyAssignment, TopologyDomain

MAX_DOMAINS = 100_000
"""Kueue's own bound on one slice's domains; more than this in total is not a real assignment."""


def _positive(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{field}: expected a non-negative integer, got {value!r}")
    return value


def _strings(value: Any, field: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str | int) for v in value):
        raise ValueError(f"{field}: expected a list of strings")
    return [str(v) for v in value]


def read_topology_assignment(raw: Any) -> TopologyAssignment:
    """The assignment's domains; :class:`ValueError` naming the field where it is malformed."""
    if not isinstance(raw, dict):
        raise ValueError("topologyAssignment: expected a mapping")
    levels = tuple(_strings(raw.get("levels"), "topologyAssignment.levels"))
    if not levels:
        raise ValueError("topologyAssignment.levels: must name at least one level")
    if "slices" in raw:
        domains = _from_slices(raw["slices"], len(levels))
    else:
        domains = _from_domains(raw.get("domains"), len(levels))
    return TopologyAssignment(levels=levels, domains=tuple(domains))


def _from_domains(raw: Any, depth: int) -> list[TopologyDomain]:
    if not isinstance(raw, list):
        raise ValueError("topologyAssignment.domains: expected a list")
    if len(raw) > MAX_DOMAINS:
        raise ValueError(f"topologyAssignment.domains: more than {MAX_DOMAINS} domains")
    out = []
    for number, domain in enumerate(raw):
        field = f"topologyAssignment.domains[{number}]"
        if not isinstance(domain, dict):
            raise ValueError(f"{field}: expected a mapping")
        values = _strings(domain.get("values"), f"{field}.values")
        if len(values) != depth:
            raise ValueError(f"{field}.values: expected one value per level ({depth})")
        out.append(
            TopologyDomain(values=tuple(values), count=_positive(domain.get("count"), f"{field}.count"))
        )
    return out


def _from_slices(raw: Any, depth: int) -> list[TopologyDomain]:
    if not isinstance(raw, list):
        raise ValueError("topologyAssignment.slices: expected a list")
    out: list[TopologyDomain] = []
    for number, piece in enumerate(raw):
        field = f"topologyAssignment.slices[{number}]"
        if not isinstance(piece, dict):
            raise ValueError(f"{field}: expected a mapping")
        size = _positive(piece.get("domainCount"), f"{field}.domainCount")
        if len(out) + size > MAX_DOMAINS:
            raise ValueError(f"{field}.domainCount: more than {MAX_DOMAINS} domains in all")
        levels = piece.get("valuesPerLevel")
        if not isinstance(levels, list) or len(levels) != depth:
            raise ValueError(f"{field}.valuesPerLevel: expected one entry per level ({depth})")
        columns = [
            _level_values(level, size, f"{field}.valuesPerLevel[{i}]") for i, level in enumerate(levels)
        ]
        counts = _pod_counts(piece, size, field)
        out += [
            TopologyDomain(values=tuple(column[i] for column in columns), count=counts[i])
            for i in range(size)
        ]
    return out


def _level_values(raw: Any, size: int, field: str) -> list[str]:
    """The ``size`` values of one level: a universal value, or roots with a common prefix/suffix."""
    if not isinstance(raw, dict):
        raise ValueError(f"{field}: expected a mapping")
    universal = raw.get("universalValue", raw.get("universal"))
    if universal is not None:
        return [str(universal)] * size
    nested = raw.get("individual")
    individual: dict[str, Any] = nested if isinstance(nested, dict) else raw
    roots = _strings(individual.get("roots"), f"{field}.roots")
    if len(roots) != size:
        raise ValueError(f"{field}.roots: expected {size} values (domainCount), got {len(roots)}")
    prefix, suffix = str(individual.get("prefix") or ""), str(individual.get("suffix") or "")
    return [f"{prefix}{root}{suffix}" for root in roots]


def _pod_counts(piece: dict[str, Any], size: int, field: str) -> list[int]:
    """Pods per domain: ``universalPodCount``, a ``podCounts`` list, or ``{universal|individual}``."""
    raw = piece.get("podCounts")
    universal = piece.get("universalPodCount")
    if isinstance(raw, dict):
        universal = raw.get("universal", universal)
        raw = raw.get("individual", raw.get("podCounts"))
    if universal is not None:
        return [_positive(universal, f"{field}.universalPodCount")] * size
    if not isinstance(raw, list) or len(raw) != size:
        raise ValueError(f"{field}.podCounts: expected {size} counts (domainCount)")
    return [_positive(value, f"{field}.podCounts[{i}]") for i, value in enumerate(raw)]
