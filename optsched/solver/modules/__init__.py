"""The model modules, in the order they are applied.

Each module is one small class with ``name``, ``phase`` and
``apply(ctx) -> list[ObjectiveTerm]``. Modules of the ``admission`` phase build
everything that decides *what* is admitted (candidates, gangs, capacity,
quota, products, required topology and NVLink, the priority objectives).
Modules of the ``quality`` phase are added only after the admission stages are
solved and the admitted set is fixed: topology preference, packing and
stability then work on a much smaller model. Node filtering comes first
because it creates the variables every other module constrains.
"""

from __future__ import annotations

from typing import Protocol

from optsched.solver.context import ObjectiveTerm, SolverContext


class Module(Protocol):
    """Adds constraints to the shared model and returns its objective terms."""

    name: str
    phase: str

    def apply(self, ctx: SolverContext) -> list[ObjectiveTerm]: ...


def default_modules() -> list[Module]:
    """The standard model, cpsat-primer style: one concern per module, applied in order."""
    from optsched.solver.modules.admission import Admission
    from optsched.solver.modules.capacity import Capacity
    from optsched.solver.modules.filtering import NodeFiltering
    from optsched.solver.modules.gang import Gang
    from optsched.solver.modules.nvlink import NvlinkIslands
    from optsched.solver.modules.packing import Packing
    from optsched.solver.modules.product import OneProduct
    from optsched.solver.modules.quota import Quota
    from optsched.solver.modules.stability import Stability
    from optsched.solver.modules.topology import RequiredTopology, Topology

    return [
        NodeFiltering(),
        Gang(),
        Capacity(),
        NvlinkIslands("admission"),
        OneProduct(),
        Quota(),
        RequiredTopology(),
        Admission(),
        NvlinkIslands("quality"),
        Topology(),
        Packing(),
        Stability(),
    ]
