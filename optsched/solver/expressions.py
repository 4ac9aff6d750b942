"""Linear expressions read without a solver: their value under an assignment, and their largest value."""

from __future__ import annotations

from ortools.sat.python import cp_model, cp_model_helper


def _flat(expr: cp_model.LinearExprT) -> tuple[list[cp_model.IntVar], list[int], int]:
    if not isinstance(expr, cp_model.LinearExpr):
        return [], [], int(expr)
    flat = cp_model_helper.FlatIntExpr(expr)
    return list(flat.vars), list(flat.coeffs), int(flat.offset)


def evaluate(expr: cp_model.LinearExprT, solution: list[int]) -> int:
    """The value of ``expr`` under a complete assignment (variable index -> value)."""
    variables, coeffs, offset = _flat(expr)
    return offset + sum(c * solution[v.index] for v, c in zip(variables, coeffs, strict=True))


def upper_bound(expr: cp_model.LinearExprT) -> int:
    """The largest value ``expr`` can take over its variables' domains."""
    variables, coeffs, total = _flat(expr)
    for var, coef in zip(variables, coeffs, strict=True):
        # The proto's repeated field does not index from the end: copy it to read the last bound.
        domain = list(var.proto.domain)
        total += coef * (domain[-1] if coef > 0 else domain[0])
    return total
