"""The model modules, in the order they are applied, and how the settings switch them.

Each module is one small class (:class:`~optsched.solver.context.Module`):
``apply(ctx, weight)`` adds its constraints and returns its objective terms.
Modules of the admission phase build everything that decides *what* is
admitted (gangs, capacity, required NVLink and topology, products, flavors,
quota, the priority objectives). Modules of the quality phase are added only
after the admission stages are solved and the admitted set is fixed: island
counts, the NVLink and topology preferences, packing and stability then work
on a much smaller model. The decision variables they constrain exist before
any module runs (:mod:`optsched.solver.variables`).

This is the one place that reads ``settings.modules``, the same way for every
module (:func:`applied`): a module applies while its switch is in the state it
names, with the entry's weight; a module that only prices a stage is left out
at weight 0. The modules do not import each other (an import-linter contract
keeps it so): what one creates for another is a typed container of the
variables.
"""

from __future__ import annotations

from collections.abc import Iterable

from optsched.model.plan import Plan
from optsched.settings import ModuleSettings, ModuleSwitches, Settings
from optsched.solver.context import Module
from optsched.solver.modules.admission import Admission
from optsched.solver.modules.capacity import Capacity
from optsched.solver.modules.flavor import OneFlavor
from optsched.solver.modules.gang import Gang, PartialGang
from optsched.solver.modules.mig import MigLayouts
from optsched.solver.modules.mig_fragmentation import MigFragmentation
from optsched.solver.modules.nvlink import NvlinkIslands, NvlinkPreference, NvlinkRequired
from optsched.solver.modules.packing import Packing
from optsched.solver.modules.product import OneProduct
from optsched.solver.modules.quota import Quota
from optsched.solver.modules.stability import Stability
from optsched.solver.modules.topology import RequiredTopology, Topology
from optsched.solver.objective import Phase

ALWAYS = ModuleSettings()
"""The settings of a module without a switch: on, weight 1."""


def default_modules() -> list[Module]:
    """The standard model, cpsat-primer style: one concern per module, applied in order."""
    return [
        Gang(),
        PartialGang(),
        Capacity(),
        MigLayouts(),
        NvlinkRequired(preference=True),
        NvlinkRequired(preference=False),
        OneProduct(),
        OneFlavor(),
        Quota(),
        RequiredTopology(),
        Admission(),
        NvlinkIslands(),
        NvlinkPreference(),
        MigFragmentation(),
        Topology(),
        Packing(),
        Stability(),
    ]


def setting_of(module: Module, switches: ModuleSwitches) -> ModuleSettings:
    """The ``settings.modules`` entry of a module."""
    if module.switch is None:
        return ALWAYS
    value = getattr(switches, module.switch.name)
    assert isinstance(value, ModuleSettings)
    return value


def applied(modules: Iterable[Module], settings: Settings, phase: Phase) -> list[tuple[Module, int]]:
    """The modules of ``phase`` the settings switch on, in order, each with its weight."""
    out = []
    for module in modules:
        if module.phase is not phase:
            continue
        setting = setting_of(module, settings.modules)
        if module.switch is not None and setting.enabled != module.switch.on:
            continue
        if module.stages and setting.weight == 0:
            continue
        out.append((module, setting.weight))
    return out


def quality_wanted(settings: Settings, previous: Plan | None, *, mig_layouts: bool = False) -> bool:
    """Whether a quality stage may run; else the admission stages get the whole search budget.

    A zero weight still counts: it is the switch that says a preference is wanted.
    ``mig_layouts``: the model chooses MIG layouts, whose reconfiguration stage
    keeps changes to those admission needs.
    """
    switches = settings.modules
    return (
        mig_layouts
        or switches.nvlink.enabled
        or switches.topology.enabled
        or switches.packing.enabled
        or (previous is not None and switches.stability.enabled)
    )
