"""Which topology levels a greedy walk tries for a PodSet, one domain at a time.

Kueue TAS starts at the finest level that can hold a gang and widens; the
other greedy policies try only the level a PodSet names. A required level
never falls back to "anywhere"; a preferred one does.
"""

from __future__ import annotations

from optsched.model.names import HOSTNAME_LABEL
from optsched.model.snapshot import PodSet


def levels_to_try(
    ps: PodSet, levels: tuple[str, ...], *, tas: bool, preferred: bool
) -> tuple[list[str], bool]:
    """Levels to try in order, and whether placing anywhere is allowed when no single domain works.

    ``tas`` tries finest first (TAS's search); ``preferred=False`` ignores preferred topology.
    """
    host_levels = [*levels] if HOSTNAME_LABEL in levels else [*levels, HOSTNAME_LABEL]
    if ps.required_topology:
        level = ps.required_topology
        if not tas or level not in host_levels:
            return [level], False
        finer = host_levels[host_levels.index(level) :]
        return list(reversed(finer)), False
    if ps.preferred_topology and (preferred or tas):
        level = ps.preferred_topology
        if level not in host_levels:
            return [level], True
        index = host_levels.index(level)
        coarser = list(reversed(host_levels[:index]))
        start = list(reversed(host_levels[index:])) if tas else [level]
        return start + coarser, True
    if tas and ps.count > 1:
        return list(reversed(host_levels)), True
    return [], True
