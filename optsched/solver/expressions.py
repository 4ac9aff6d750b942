"""Linear expressions read without a solver: their value under an assignment, and their largest value."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ortools.sat.python import cp_model, cp_model_helper


def _flat(expr: cp_model.LinearExprT) -> tuple[list[cp_model.IntVar], list[int], int]:
    if not isinstance(expr, cp_model.LinearExpr):
        return [], [], int(expr)
    flat = cp_model_helper.FlatIntExpr(expr)
    return list(flat.vars), list(flat.coeffs), int(flat.offset)


def evaluate(expr: cp_model.LinearExprT, solution: Sequence[int] | Mapping[int, int]) -> int:
    """The value of ``expr`` under an assignment: a complete list by variable index, or a mapping
    from variable index to value in which a variable left out is 0."""
    variables, coeffs, offset = _flat(expr)
    if isinstance(solution, Mapping):
        return offset + sum(c * solution.get(v.index, 0) for v, c in zip(variables, coeffs, strict=True))
    return offset + sum(c * solution[v.index] for v, c in zip(variables, coeffs, strict=True))


def domain_ends(model: cp_model.CpModel) -> list[tuple[int, int]]:
    """Each variable's least and largest value, by index (read once: one proto per variable is slow)."""
    ends = []
    for var in model.proto.variables:
        domain = list(var.domain)
        ends.append((domain[0], domain[-1]))
    return ends


def upper_bound(expr: cp_model.LinearExprT, ends: list[tuple[int, int]] | None = None) -> int:
    """The largest value ``expr`` can take over its variables' domains (``ends``: :func:`domain_ends`)."""
    variables, coeffs, total = _flat(expr)
    for var, coef in zip(variables, coeffs, strict=True):
        if ends is not None:
            low, high = ends[var.index]
        else:
            # The proto's repeated field does not index from the end: copy it to read the last bound.
            domain = list(var.proto.domain)
            low, high = domain[0], domain[-1]
        total += coef * (high if coef > 0 else low)
    return total
