"""Reading fields of raw objects with errors that name the object and field path."""

from __future__ import annotations

from typing import Any

from optsched.errors import InputError


def describe(obj: dict[str, Any]) -> str:
    """``Kind namespace/name`` for messages."""
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    name = meta.get("name", "<unnamed>")
    namespace = meta.get("namespace")
    return f"{obj.get('kind', '<no kind>')} {namespace + '/' if namespace else ''}{name}"


def get_map(obj: dict[str, Any], path: str, *, required: bool = False) -> dict[str, Any]:
    """The mapping at a dotted path; {} if absent (or an error when required)."""
    value: Any = obj
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value or value[part] is None:
            if required:
                raise InputError("is required but missing", obj=describe(obj), field=path)
            return {}
        value = value[part]
    if not isinstance(value, dict):
        raise InputError(f"expected a mapping, got {type(value).__name__}", obj=describe(obj), field=path)
    return value


def get_list(obj: dict[str, Any], path: str, *, required: bool = False) -> list[Any]:
    parent_path, _, leaf = path.rpartition(".")
    parent = get_map(obj, parent_path, required=required) if parent_path else obj
    value = parent.get(leaf)
    if value is None:
        if required:
            raise InputError("is required but missing", obj=describe(obj), field=path)
        return []
    if not isinstance(value, list):
        raise InputError(f"expected a list, got {type(value).__name__}", obj=describe(obj), field=path)
    return value


def get_str(obj: dict[str, Any], path: str, *, required: bool = False, default: str = "") -> str:
    parent_path, _, leaf = path.rpartition(".")
    parent = get_map(obj, parent_path, required=required) if parent_path else obj
    value = parent.get(leaf)
    if value is None:
        if required:
            raise InputError("is required but missing", obj=describe(obj), field=path)
        return default
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise InputError(f"expected a string, got {type(value).__name__}", obj=describe(obj), field=path)
    return str(value)


def get_int(obj: dict[str, Any], path: str, *, default: int | None = None) -> int | None:
    parent_path, _, leaf = path.rpartition(".")
    parent = get_map(obj, parent_path) if parent_path else obj
    value = parent.get(leaf)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"expected an integer, got {value!r}", obj=describe(obj), field=path)
    return value


def string_map(value: Any, *, obj: dict[str, Any], field: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError("expected a mapping of strings", obj=describe(obj), field=field)
    return {str(k): str(v) for k, v in value.items()}
