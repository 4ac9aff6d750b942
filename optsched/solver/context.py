"""What a model module is, and what it is given.

A module is one concern of the model (gangs, node capacity, quota, ...): it
adds constraints to the CP-SAT model and returns its objective terms, each
naming the stage it belongs to (:mod:`optsched.solver.objective`); a module
with only hard constraints returns none. It is given a :class:`ModelContext`:
the problem facts, the decision variables, the model and the hint rules, and
nothing else, so it can be applied on its own to a tiny problem in a test.

Whether a module is applied, and with which weight, is not the module's
business: it names the ``settings.modules`` entry that switches it
(:class:`Switch`) and the registry (:mod:`optsched.solver.modules`) reads the
settings for every module alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from ortools.sat.python import cp_model

from optsched.capacity.state import NodeState
from optsched.model.snapshot import Node, Snapshot
from optsched.settings import Settings
from optsched.solver.hints import HintRule, HintRules
from optsched.solver.objective import ObjectiveTerm, Phase, Stage
from optsched.solver.problem import Problem
from optsched.solver.variables import Variables

SwitchName = Literal["gang", "quota", "product", "nvlink", "topology", "packing", "stability", "mig"]
"""An entry of :class:`~optsched.settings.ModuleSwitches`."""


@dataclass(frozen=True)
class Switch:
    """The settings entry that turns a module on, and in which of its states the module applies.

    Most modules apply while their entry is enabled. A rule that must still
    hold, in a weaker form, when its entry is switched off is a second module
    that applies only then (``on=False``): partial gangs, or NVLink islands
    modelled only where a PodSet requires them.
    """

    name: SwitchName
    on: bool = True


@dataclass(frozen=True)
class ModelContext:
    """What every module builds on: facts, variables, the model, and the hint rules."""

    problem: Problem
    vars: Variables
    model: cp_model.CpModel
    hints: HintRules

    @property
    def settings(self) -> Settings:
        return self.problem.settings

    @property
    def snapshot(self) -> Snapshot:
        return self.problem.snapshot

    @property
    def nodes(self) -> list[NodeState]:
        return self.problem.nodes

    def node(self, index: int) -> Node:
        return self.problem.node(index)

    def derive(self, var: cp_model.IntVar, rule: HintRule) -> None:
        """Register how an auxiliary variable follows from the placement, for complete hints."""
        self.hints.derive(var, rule)


def new_context(problem: Problem) -> ModelContext:
    """An empty model with the problem's admission and count variables."""
    model = cp_model.CpModel()
    return ModelContext(problem, Variables(problem, model), model, HintRules())


class Module(Protocol):
    """Adds constraints to the model and returns its objective terms."""

    @property
    def name(self) -> str: ...

    @property
    def phase(self) -> Phase:
        """Admission modules are built first; quality modules once the admitted set is fixed."""
        ...

    @property
    def switch(self) -> Switch | None:
        """The settings entry that switches and weighs the module; None: every plan obeys it."""
        ...

    @property
    def stages(self) -> tuple[Stage, ...]:
        """The stages its terms belong to; a module that prices nothing has none."""
        ...

    def apply(self, ctx: ModelContext, weight: int) -> list[ObjectiveTerm]:
        """Add the module to ``ctx.model``; ``weight`` multiplies its stage terms."""
        ...
