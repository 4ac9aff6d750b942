"""Check objects against a CRD's structural schema without an API server, for the shipped CRD's tests.

It knows the OpenAPI keywords ``manifests/crd`` uses (type, nullable, enum, minimum, maximum,
maxItems, maxLength, pattern, format date-time, required, properties, items, list-type map
keys) and reports unknown fields, which the API server would drop silently. CEL rules are
left to the API server: ``e2e/tests/test_agent_security.py`` sends bad layouts to a real one.
"""

from __future__ import annotations

import re
from typing import Any

_DATE_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)")
_PYTHON_TYPES: dict[str, type | tuple[type, ...]] = {
    "object": dict,
    "array": list,
    "string": str,
    "boolean": bool,
    "integer": int,
    "number": (int, float),
}


def problems(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Every way ``value`` breaks ``schema``, each as ``<field path>: <what is wrong>``; [] when valid."""
    where = path or "<root>"
    if value is None:
        return [] if schema.get("nullable") else [f"{where}: must not be null"]
    kind = schema["type"]
    wrong_bool = isinstance(value, bool) and kind in ("integer", "number")
    if wrong_bool or not isinstance(value, _PYTHON_TYPES[kind]):
        return [f"{where}: expected {kind}, got {type(value).__name__}"]
    found = _bounds(value, schema, where)
    if kind == "object":
        found += _object(value, schema, path)
    elif kind == "array":
        found += _array(value, schema, path)
    return found


def _bounds(value: Any, schema: dict[str, Any], where: str) -> list[str]:
    found = []
    if "enum" in schema and value not in schema["enum"]:
        found.append(f"{where}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, int | float) and "minimum" in schema and value < schema["minimum"]:
        found.append(f"{where}: {value} is below the minimum {schema['minimum']}")
    if isinstance(value, int | float) and "maximum" in schema and value > schema["maximum"]:
        found.append(f"{where}: {value} is above the maximum {schema['maximum']}")
    if isinstance(value, str) and len(value) > schema.get("maxLength", len(value)):
        found.append(f"{where}: longer than {schema['maxLength']} characters")
    if isinstance(value, list) and len(value) > schema.get("maxItems", len(value)):
        found.append(f"{where}: more than {schema['maxItems']} items")
    if isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
        found.append(f"{where}: {value!r} does not match {schema['pattern']}")
    if isinstance(value, str) and schema.get("format") == "date-time" and not _DATE_TIME.fullmatch(value):
        found.append(f"{where}: {value!r} is not an RFC 3339 date-time")
    return found


def _object(value: dict[str, Any], schema: dict[str, Any], path: str) -> list[str]:
    found = [f"{path}.{key}: required" for key in schema.get("required", []) if key not in value]
    properties = schema.get("properties")
    if properties is None:  # free-form, like metadata
        return found
    for key, item in value.items():
        if key in properties:
            found += problems(item, properties[key], f"{path}.{key}")
        else:
            found.append(f"{path}.{key}: unknown field (the API server would drop it)")
    return found


def _array(value: list[Any], schema: dict[str, Any], path: str) -> list[str]:
    found = []
    for i, item in enumerate(value):
        found += problems(item, schema["items"], f"{path}[{i}]")
    keys = schema.get("x-kubernetes-list-map-keys") or []
    if schema.get("x-kubernetes-list-type") == "map":
        seen = [tuple(item.get(k) for k in keys) for item in value if isinstance(item, dict)]
        for key in sorted({s for s in seen if seen.count(s) > 1}, key=repr):
            found.append(f"{path}: duplicate entries for {dict(zip(keys, key, strict=True))}")
    return found
