"""The MIG layout variables: which instance each changeable GPU gets, and whether its layout changes.

The layout module creates them (:mod:`optsched.solver.modules.mig`); the
fragmentation module prices them and the assignment reads the chosen layouts
back. A GPU's layout is one Boolean per ``(profile, start)`` placement the
model could use there: the profiles the queue asks for on that node, and
those the GPU has now.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from optsched.mig.profiles import MigModel
from optsched.model.mig import MigGpu


@dataclass(frozen=True)
class MigPlacementVar:
    """One possible instance: ``profile`` at memory slice ``start``, there when ``var`` is 1."""

    profile: str
    start: int
    memory_slices: int
    var: cp_model.IntVar
    current: bool
    """The GPU has this instance now."""

    def covers(self, memory_slice: int) -> bool:
        return self.start <= memory_slice < self.start + self.memory_slices


@dataclass(frozen=True)
class MigGpuVars:
    """One MIG GPU whose layout the model chooses."""

    node: int
    gpu: MigGpu
    model: MigModel
    placements: tuple[MigPlacementVar, ...]
    changed: cp_model.IntVar
    """1 when the chosen layout differs from the GPU's current one."""

    def chosen(self, value: Callable[[cp_model.IntVar], int]) -> tuple[tuple[str, int], ...]:
        """The ``(profile, start)`` pairs a solution (``value`` reads it) gives the GPU, sorted."""
        return tuple(sorted((p.profile, p.start) for p in self.placements if value(p.var)))


@dataclass
class MigVars:
    """Every layout variable of one model, by node."""

    gpus: list[MigGpuVars] = field(default_factory=list)

    def on_node(self, node: int) -> list[MigGpuVars]:
        return [g for g in self.gpus if g.node == node]
