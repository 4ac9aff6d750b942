"""The registry: which modules the settings switch on, in which order, with which weight."""

from __future__ import annotations

from optsched.model.plan import Plan, PlanStatus
from optsched.settings import ModuleSettings, Settings
from optsched.solver.modules import applied, default_modules, quality_wanted
from optsched.solver.modules.nvlink import NvlinkRequired
from optsched.solver.objective import Phase
from tests.solver.helpers import FAST

ADMISSION = [
    "gang",
    "capacity",
    "mig-layouts",
    "nvlink-required",
    "product",
    "flavor",
    "quota",
    "topology-required",
    "admission",
]
QUALITY = ["nvlink-islands", "nvlink", "mig-fragmentation", "topology", "packing", "stability"]


def _switched(**entries: ModuleSettings) -> Settings:
    return FAST.model_copy(update={"modules": FAST.modules.model_copy(update=entries)})


def _names(settings: Settings, phase: Phase) -> list[str]:
    return [module.name for module, _ in applied(default_modules(), settings, phase)]


def test_every_module_applies_by_default_in_order() -> None:
    assert _names(FAST, Phase.ADMISSION) == ADMISSION
    assert _names(FAST, Phase.QUALITY) == QUALITY
    assert {w for _, w in applied(default_modules(), FAST, Phase.QUALITY)} == {1}


def test_gangs_switched_off_become_partial_gangs() -> None:
    names = _names(_switched(gang=ModuleSettings(enabled=False)), Phase.ADMISSION)
    assert names == ["partial-gang", *ADMISSION[1:]]


def test_quota_switched_off_keeps_one_flavor_per_podset() -> None:
    names = _names(_switched(quota=ModuleSettings(enabled=False)), Phase.ADMISSION)
    assert "flavor" in names and "quota" not in names


def test_nvlink_switched_off_keeps_required_islands_only() -> None:
    settings = _switched(nvlink=ModuleSettings(enabled=False))
    (required,) = [
        m for m, _ in applied(default_modules(), settings, Phase.ADMISSION) if m.name == "nvlink-required"
    ]
    assert isinstance(required, NvlinkRequired) and not required.preference
    assert _names(settings, Phase.QUALITY) == ["mig-fragmentation", "topology", "packing", "stability"]


def test_a_zero_weight_leaves_out_what_only_prices() -> None:
    settings = _switched(nvlink=ModuleSettings(weight=0), topology=ModuleSettings(weight=0))
    assert _names(settings, Phase.QUALITY) == ["nvlink-islands", "mig-fragmentation", "packing", "stability"]
    assert "topology-required" in _names(settings, Phase.ADMISSION)


def test_modules_get_their_entrys_weight() -> None:
    settings = _switched(packing=ModuleSettings(weight=3))
    weights = {m.name: w for m, w in applied(default_modules(), settings, Phase.QUALITY)}
    assert weights["packing"] == 3 and weights["topology"] == 1


def test_quality_stages_are_wanted_while_a_preference_is_switched_on() -> None:
    assert quality_wanted(FAST, None)
    off = ModuleSettings(enabled=False)
    none = _switched(nvlink=off, topology=off, packing=off)
    assert not quality_wanted(none, None)
    assert quality_wanted(none, None, mig_layouts=True)  # the reconfiguration stage
    assert quality_wanted(none, Plan(status=PlanStatus.OPTIMAL))  # stability, against the previous plan
    # Zero weights still want the quality stages' share of the time.
    assert quality_wanted(_switched(packing=ModuleSettings(weight=0)), None)
