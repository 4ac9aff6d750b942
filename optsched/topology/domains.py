"""Topology domains: which block, rack or host a node sits in, at a given level.

A domain is identified by the values of every level from the coarsest down to
the one asked for, so rack "r1" in block "b1" and rack "r1" in block "b2" are
different racks, as in Kueue TAS.
"""

from __future__ import annotations

from optsched.model.names import HOSTNAME_LABEL
from optsched.model.snapshot import Node


def domain_of(node: Node, levels: tuple[str, ...], level: str) -> tuple[str, ...] | None:
    """The domain path of ``node`` down to ``level``; None if the node lacks a label on the way."""
    if level not in levels:
        value = node.labels.get(level) or (node.name if level == HOSTNAME_LABEL else None)
        return (value,) if value else None
    path = []
    for current in levels[: levels.index(level) + 1]:
        value = node.labels.get(current) or (node.name if current == HOSTNAME_LABEL else None)
        if value is None:
            return None
        path.append(value)
    return tuple(path)


def rack_level(levels: tuple[str, ...]) -> str | None:
    """The level just above the host: what people call the rack."""
    non_host = [level for level in levels if level != HOSTNAME_LABEL]
    return non_host[-1] if non_host else None


def block_level(levels: tuple[str, ...]) -> str | None:
    non_host = [level for level in levels if level != HOSTNAME_LABEL]
    return non_host[-2] if len(non_host) >= 2 else None
