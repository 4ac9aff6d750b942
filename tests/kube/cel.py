"""Evaluate the shipped admission policies' CEL the way the API server does, without an API server.

A ValidatingAdmissionPolicy is read as the API server applies it: its
``matchConstraints`` operations, then every ``matchConditions`` expression
(all must hold for the policy to apply), then ``variables`` in order, then
each validation; the first that is false denies with its ``messageExpression``
(or ``message`` if that fails). Expressions run on cel-python, which speaks
standard CEL; the policies keep to it (no Kubernetes-only library functions),
and the e2e suite checks the same policies on a real API server.
"""

from __future__ import annotations

from typing import Any

import celpy
from celpy import celtypes

OPTSCHED_USER = "system:serviceaccount:optsched-system:optsched"

_ENV = celpy.Environment()


def evaluate(expression: str, activation: dict[str, Any]) -> Any:
    """One CEL expression on an activation of CEL values."""
    return _ENV.program(_ENV.compile(expression)).evaluate(activation)


def activation(
    operation: str,
    obj: dict[str, Any] | None,
    old: dict[str, Any] | None = None,
    *,
    user: str = "system:serviceaccount:team:tenant",
    namespace: str = "team",
) -> dict[str, Any]:
    name = str(((obj or old or {}).get("metadata") or {}).get("name", ""))
    request = {
        "operation": operation,
        "namespace": namespace,
        "name": name,
        "userInfo": {"username": user},
    }
    return {
        "object": celpy.json_to_cel(obj),
        "oldObject": celpy.json_to_cel(old),
        "request": celpy.json_to_cel(request),
    }


def matches(spec: dict[str, Any], operation: str, facts: dict[str, Any]) -> bool:
    """Whether the policy (or webhook) applies: its operations and every match condition."""
    rules = (spec.get("matchConstraints") or {}).get("resourceRules") or spec.get("rules") or []
    if rules and not any(operation in rule["operations"] for rule in rules):
        return False
    return all(bool(evaluate(c["expression"], facts)) for c in spec.get("matchConditions") or [])


def denial(policy: dict[str, Any], operation: str, obj: Any, old: Any = None, **who: str) -> str | None:
    """None when the policy allows the request, else the message it denies it with."""
    spec = policy["spec"]
    facts = activation(operation, obj, old, **who)
    if not matches(spec, operation, facts):
        return None
    variables: dict[Any, Any] = {}
    for variable in spec.get("variables") or []:
        facts["variables"] = celtypes.MapType(variables)
        variables[celtypes.StringType(variable["name"])] = evaluate(variable["expression"], facts)
    facts["variables"] = celtypes.MapType(variables)
    for validation in spec["validations"]:
        if bool(evaluate(validation["expression"], facts)):
            continue
        try:
            return str(evaluate(validation["messageExpression"], facts))
        except (KeyError, celpy.CELEvalError):
            return str(validation.get("message", "denied"))
    return None
