"""Hint rules: how every auxiliary variable follows from a placement, for complete hints.

CP-SAT uses a complete, feasible hint as its first solution at once; a partial
one it may fail to complete in a short time limit. A known placement (the
greedy plan, or an earlier stage's solution) fixes the admission and count
variables; each module registers, next to every auxiliary variable it
creates, a rule that computes its value from those (:meth:`HintRules.derive`),
and the rules fill in the rest. :func:`write_hint` is the one place that
writes a hint into the model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ortools.sat.python import cp_model


class HintView:
    """Values of a known solution (the greedy plan, or an earlier stage) while deriving a full hint."""

    def __init__(self, values: dict[int, int], gpus: dict[tuple[int, int], list[tuple[int, ...]]]) -> None:
        self.values = values
        self.gpus = gpus
        """(PodSet index, node index) -> GPU indices of the known solution's pods there (greedy only)."""

    def __call__(self, var: cp_model.IntVar) -> int:
        return self.values.get(var.index, 0)

    def linear(self, variables: list[cp_model.IntVar], coefs: list[int]) -> int:
        return sum(c * self.values.get(v.index, 0) for v, c in zip(variables, coefs, strict=True))


HintRule = Callable[[HintView], int]


def any_of(variables: list[cp_model.IntVar]) -> HintRule:
    """Rule: 1 when any of ``variables`` is positive (a "used" indicator)."""

    def rule(h: HintView) -> int:
        return int(any(h(v) for v in variables))

    return rule


class HintRules:
    """The rules registered since the last hint, applied in registration order."""

    def __init__(self) -> None:
        self._rules: list[tuple[cp_model.IntVar, HintRule]] = []

    def derive(self, var: cp_model.IntVar, rule: HintRule) -> None:
        """Register how an auxiliary variable follows from the placement."""
        self._rules.append((var, rule))

    def complete(self, view: HintView) -> dict[int, int]:
        """``view``'s values plus every registered rule's (the rules stay registered)."""
        for var, rule in self._rules:
            view.values[var.index] = rule(view)
        return view.values

    def clear(self) -> None:
        """Forget the rules once their variables are hinted: later hints start from solutions."""
        self._rules.clear()


def write_hint(model: cp_model.CpModel, values: Mapping[int, int]) -> None:
    """Make ``values`` (variable index -> value) the model's whole hint, straight into the proto."""
    model.clear_hints()  # type: ignore[no-untyped-call]
    hint = model.proto.solution_hint
    items = sorted(values.items())
    hint.vars.extend(i for i, _ in items)
    hint.values.extend(v for _, v in items)
