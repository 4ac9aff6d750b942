"""Reading and writing snapshot documents: a kubectl ``List`` or a multi-document YAML/JSON stream.

The same document shapes serve a file on disk and the objects read from a
live cluster, so any live decision can be replayed offline from the file
``optsched snapshot`` writes. Every problem is an :class:`InputError` naming
the file and, where there is one, the object.
"""

from __future__ import annotations

import codecs
import json
import os
import select
import time
from pathlib import Path
from typing import Any

import yaml

from optsched.errors import InputError
from optsched.snapshot.fields import describe
from optsched.snapshot.kubeyaml import dump_yaml

_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


MAX_INPUT_BYTES = 256 * 2**20
"""The largest snapshot file read (256 MiB): several times a dump of a 10,000-node cluster with its pods."""
READ_TIMEOUT_S = 60.0
"""How long reading may take: a pipe or device that never ends is an error, not a hang."""


def read_bytes(path: str | Path, *, limit: int = MAX_INPUT_BYTES, timeout: float = READ_TIMEOUT_S) -> bytes:
    """The file's bytes, refusing more than ``limit`` bytes or more than ``timeout`` seconds of reading."""
    source = str(path)
    deadline = time.monotonic() + timeout
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise InputError("no such file", source=source) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", source=source) from None
    chunks: list[bytes] = []
    size = 0
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise InputError(
                    f"still not read to the end after {timeout:g} s (an endless stream?)", source=source
                )
            if not select.select([fd], [], [], remaining)[0]:
                continue
            try:
                chunk = os.read(fd, 2**20)
            except BlockingIOError:
                continue
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > limit:
                raise InputError(
                    f"is larger than {limit // 2**20} MiB, the most optsched reads", source=source
                )
            chunks.append(chunk)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", source=source) from None
    finally:
        os.close(fd)


_BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


def decode(data: bytes, *, source: str) -> str:
    """UTF-8 text, or UTF-16 with a byte-order mark (PowerShell's ``>`` writes that)."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(encoding)
            except UnicodeDecodeError as exc:
                raise InputError(
                    f"not valid {encoding.upper()} text at byte {exc.start}", source=source
                ) from None
    if len(data) >= 2 and max(data[0::2].count(0), data[1::2].count(0)) > len(data) // 4:
        raise InputError("looks like UTF-16 text without a byte-order mark; save it as UTF-8", source=source)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        detail = f"not UTF-8 text (byte {exc.start} is 0x{data[exc.start]:02x})"
        raise InputError(detail, source=source) from None


def read_documents(
    path: str | Path, *, warnings: list[str] | None = None, timeout: float = READ_TIMEOUT_S
) -> list[dict[str, Any]]:
    """All objects in a YAML/JSON file, with ``List`` items flattened.

    A document or ``List`` item that is not a Kubernetes object is left out,
    with a message appended to ``warnings``; a file that cannot be read, is
    not YAML, or holds no object at all is an :class:`InputError`.
    """
    source = str(path)
    text = decode(read_bytes(path, timeout=timeout), source=source)
    try:
        documents = list(yaml.load_all(text, Loader=_LOADER))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise InputError(f"not valid YAML or JSON{where}", source=source) from None
    notes = warnings if warnings is not None else []
    objects: list[dict[str, Any]] = []
    for number, document in enumerate(documents):
        if document is None:
            continue
        if not isinstance(document, dict):
            notes.append(
                f"{source}: document {number + 1} is not a Kubernetes object (expected a mapping with "
                "apiVersion and kind); left out"
            )
            continue
        objects.extend(flatten(document, source=source, warnings=notes))
    if not objects:
        why = f" ({notes[0].removeprefix(f'{source}: ').removesuffix('; left out')})" if notes else ""
        raise InputError(f"holds no Kubernetes objects{why}", source=source)
    return objects


def flatten(
    document: dict[str, Any], *, source: str = "", warnings: list[str] | None = None
) -> list[dict[str, Any]]:
    """The object, or a ``List``'s items (recursively); what is not an object is left out with a warning."""
    notes = warnings if warnings is not None else []
    kind = document.get("kind")
    if not isinstance(kind, str) or not isinstance(document.get("apiVersion"), str):
        notes.append(
            f"{source}: {describe(document)}: an object needs apiVersion and kind as strings; left out"
        )
        return []
    if kind == "List" or kind.endswith("List"):
        items = document.get("items") or []
        if not isinstance(items, list):
            notes.append(f"{source}: {kind}: field items: expected a list; left out")
            return []
        out = []
        for number, item in enumerate(items):
            if not isinstance(item, dict):
                notes.append(f"{source}: {kind}: field items[{number}]: expected an object; left out")
                continue
            item = dict(item)
            if "kind" not in item and kind.endswith("List") and kind != "List":
                item["kind"] = kind[: -len("List")]
            item.setdefault("apiVersion", document.get("apiVersion", "v1"))
            out.extend(flatten(item, source=source, warnings=notes))
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
