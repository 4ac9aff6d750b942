"""Reading fields of raw objects with errors that name the object and field path."""

from __future__ import annotations

from typing import Any

from optsched.errors import InputError


def describe(obj: dict[str, Any]) -> str:
    """``Kind namespace/name`` for messages."""
    raw = obj.get("metadata")
    meta: dict[str, Any] = raw if isinstance(raw, dict) else {}
    name = meta.get("name", "<unnamed>")
    namespace = meta.get("namespace")
    return f"{obj.get('kind', '<no kind>')} {f'{namespace}/' if namespace else ''}{name}"


def object_name(obj: dict[str, Any]) -> str:
    """``metadata.name`` where it is a string, else ""."""
    raw = obj.get("metadata")
    name = raw.get("name") if isinstance(raw, dict) else None
    return name if isinstance(name, str) else ""


def object_namespace(obj: dict[str, Any]) -> str:
    """``metadata.namespace`` where it is a non-empty string, else ``default`` (as the API server has it)."""
    raw = obj.get("metadata")
    namespace = raw.get("namespace") if isinstance(raw, dict) else None
    return namespace if isinstance(namespace, str) and namespace else "default"


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
    if value is None or (required and value == ""):
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
    if not isinstance(value, dict) or any(isinstance(v, dict | list) for v in value.values()):
        raise InputError("expected a mapping of strings", obj=describe(obj), field=field)
    return {str(k): _scalar_text(v) for k, v in value.items()}


def _scalar_text(value: Any) -> str:
    """A label or annotation value as the API server would store it (``true`` for YAML's ``true``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def as_map(value: Any, *, obj: dict[str, Any], field: str) -> dict[str, Any]:
    """``value`` if it is a mapping ({} for an absent one), else an error naming ``field``."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError(f"expected a mapping, got {type(value).__name__}", obj=describe(obj), field=field)
    return value


def as_list(value: Any, *, obj: dict[str, Any], field: str) -> list[Any]:
    """``value`` if it is a list ([] for an absent one), else an error naming ``field``."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise InputError(f"expected a list, got {type(value).__name__}", obj=describe(obj), field=field)
    return value


def mappings(value: Any, *, obj: dict[str, Any], field: str) -> list[tuple[str, dict[str, Any]]]:
    """The entries of a list of mappings with their field paths (``field[i]``); anything else is an error."""
    out = []
    for number, item in enumerate(as_list(value, obj=obj, field=field)):
        where = f"{field}[{number}]"
        out.append((where, as_map(item, obj=obj, field=where) if item is not None else {}))
    return out


def as_str(value: Any, *, obj: dict[str, Any], field: str) -> str:
    """``value`` as text ("" for an absent one); a mapping, list or boolean is an error naming ``field``."""
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise InputError(f"expected a string, got {type(value).__name__}", obj=describe(obj), field=field)
    return str(value)
