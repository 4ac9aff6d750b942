"""Reading and writing snapshot documents: a kubectl ``List`` or a multi-document YAML/JSON stream.

The same document shapes serve a file on disk and the objects read from a
live cluster, so any live decision can be replayed offline from the file
``optsched snapshot`` writes. Every problem is an :class:`InputError` naming
the file and, where there is one, the object.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from optsched.errors import InputError
from optsched.snapshot.fields import describe
from optsched.snapshot.kubeyaml import dump_yaml

_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_documents(path: str | Path) -> list[dict[str, Any]]:
    """All objects in a YAML/JSON file, with ``List`` items flattened."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("no such file", source=source) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read: {exc}", source=source) from None
    try:
        documents = list(yaml.load_all(text, Loader=_LOADER))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise InputError(f"not valid YAML or JSON{where}", source=source) from None
    objects: list[dict[str, Any]] = []
    for number, document in enumerate(documents):
        if document is None:
            continue
        if not isinstance(document, dict):
            raise InputError(
                f"document {number + 1} is not a Kubernetes object (expected a mapping with "
                "apiVersion and kind)",
                source=source,
            )
        objects.extend(flatten(document, source=source))
    if not objects:
        raise InputError("holds no Kubernetes objects", source=source)
    return objects


def flatten(document: dict[str, Any], *, source: str = "") -> list[dict[str, Any]]:
    kind = document.get("kind")
    if not isinstance(kind, str) or "apiVersion" not in document:
        raise InputError("object without apiVersion/kind", source=source, obj=describe(document))
    if kind == "List" or kind.endswith("List"):
        items = document.get("items") or []
        if not isinstance(items, list):
            raise InputError("items must be a list", source=source, obj=kind, field="items")
        out = []
        for item in items:
            if not isinstance(item, dict):
                raise InputError("every item must be an object", source=source, obj=kind, field="items")
            item = dict(item)
            if "kind" not in item and kind.endswith("List") and kind != "List":
                item["kind"] = kind[: -len("List")]
            item.setdefault("apiVersion", document.get("apiVersion", "v1"))
            out.extend(flatten(item, source=source))
        return out
    return [document]


def dump_objects(objects: list[dict[str, Any]], path: str | Path) -> None:
    """Write objects as one ``v1 List`` (YAML, or JSON for a ``.json`` path)."""
    document = {"apiVersion": "v1", "kind": "List", "items": objects}
    target = Path(path)
    if target.suffix == ".json":
        target.write_text(json.dumps(document, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    else:
        target.write_text(dump_yaml(document), encoding="utf-8")
