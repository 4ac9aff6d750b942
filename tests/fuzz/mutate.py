"""Mutations of real-world snapshot dumps: what messy clusters, hand edits and concatenated files produce.

A mutation changes one spot of the object tree (a key deleted, a value of the
wrong type, a number out of range, an object or list item duplicated, another
API version) or the file's bytes (truncated, UTF-16, a byte-order mark,
binary junk). Each case applies one to three of them, drawn from a seeded
``random.Random``, so a failing case is reproduced from its seed and number.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

EVIL_VALUES: tuple[Any, ...] = (
    -1,
    0,
    -(10**6),
    10**12,
    2**70,
    1.5,
    "",
    "abc",
    "1e400",
    "-5",
    "NaN",
    " 4 ",
    "1Ki",
    "5000000000000000000000Ei",
    "∞",
    True,
    None,
    [],
    {},
    [1, 2],
    {"a": "b"},
)
API_VERSIONS = (
    "v1",
    "kueue.x-k8s.io/v1alpha1",
    "kueue.x-k8s.io/v1alpha2",
    "kueue.x-k8s.io/v1beta1",
    "kueue.x-k8s.io/v1beta2",
    "kueue.x-k8s.io/v2",
    "optsched.io/v1alpha1",
    "",
)
KINDS = (
    "Node",
    "Pod",
    "Workload",
    "ClusterQueue",
    "LocalQueue",
    "ResourceFlavor",
    "Topology",
    "NodeGPUs",
    "List",
    "Thing",
)

_DUMPER: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

Slot = tuple[Any, Any]
"""A container (dict or list) and a key or index in it."""


def slots(tree: Any) -> list[Slot]:
    """Every (container, key) pair of the tree, depth first."""
    out: list[Slot] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                out.append((node, key))
                stack.append(value)
        elif isinstance(node, list):
            for index, value in enumerate(node):
                out.append((node, index))
                stack.append(value)
    return out


def _delete(rng: random.Random, tree: Any) -> str:
    dict_slots = [s for s in slots(tree) if isinstance(s[0], dict)]
    if not dict_slots:
        return "nothing to delete"
    container, key = rng.choice(dict_slots)
    del container[key]
    return f"delete {key}"


def _evil_value(rng: random.Random, tree: Any) -> str:
    all_slots = slots(tree)
    if not all_slots:
        return "no slot"
    container, key = rng.choice(all_slots)
    value = copy.deepcopy(rng.choice(EVIL_VALUES))
    container[key] = value
    return f"set {key} = {value!r}"


def _wrong_shape(rng: random.Random, tree: Any) -> str:
    """A mapping becomes a list (or the reverse), or a container becomes a scalar."""
    candidates = [s for s in slots(tree) if isinstance(s[0][s[1]], dict | list)]
    if not candidates:
        return "no container"
    container, key = rng.choice(candidates)
    value = container[key]
    if isinstance(value, dict):
        container[key] = rng.choice([list(value.values()), list(value.items()), "x", 3])
    else:
        container[key] = rng.choice([{str(i): v for i, v in enumerate(value)}, "x", 3])
    return f"reshape {key}"


def _duplicate_object(rng: random.Random, tree: Any) -> str:
    items = tree.get("items") if isinstance(tree, dict) else None
    if not isinstance(items, list) or not items:
        return "no items"
    index = rng.randrange(len(items))
    twin = copy.deepcopy(items[index])
    if isinstance(twin, dict) and rng.random() < 0.5:
        meta = twin.setdefault("metadata", {})
        if isinstance(meta, dict):
            meta["resourceVersion"] = str(rng.randrange(1, 10**6))
    items.insert(rng.randrange(len(items) + 1), twin)
    return f"duplicate item {index}"


def _duplicate_list_item(rng: random.Random, tree: Any) -> str:
    lists = [s for s in slots(tree) if isinstance(s[0][s[1]], list) and s[0][s[1]]]
    if not lists:
        return "no list"
    container, key = rng.choice(lists)
    value = container[key]
    value.append(copy.deepcopy(rng.choice(value)))
    return f"duplicate an entry of {key}"


def _retype_object(rng: random.Random, tree: Any) -> str:
    objects = [s for s in slots(tree) if isinstance(s[0][s[1]], dict) and "kind" in s[0][s[1]]]
    if not objects:
        return "no object"
    container, key = rng.choice(objects)
    obj = container[key]
    if rng.random() < 0.6:
        obj["apiVersion"] = rng.choice(API_VERSIONS)
        return f"apiVersion {obj['apiVersion']!r}"
    obj["kind"] = rng.choice(KINDS)
    return f"kind {obj['kind']!r}"


def _huge_number(rng: random.Random, tree: Any) -> str:
    numbers = [s for s in slots(tree) if isinstance(s[0][s[1]], int | str) and str(s[0][s[1]]).isdigit()]
    if not numbers:
        return "no number"
    container, key = rng.choice(numbers)
    container[key] = rng.choice([10**12, 10**30, 2**63, -(2**63), 0])
    return f"number {key} = {container[key]}"


TREE_MUTATIONS: tuple[Callable[[random.Random, Any], str], ...] = (
    _delete,
    _evil_value,
    _evil_value,
    _wrong_shape,
    _duplicate_object,
    _duplicate_list_item,
    _retype_object,
    _huge_number,
    _huge_number,
)


def _text_mutation(rng: random.Random, text: str) -> tuple[bytes, str]:
    choice = rng.randrange(6)
    if choice == 0:
        cut = rng.randrange(len(text) + 1)
        return text[:cut].encode(), f"truncated at {cut}"
    if choice == 1:
        return text.encode("utf-16"), "UTF-16"
    if choice == 2:
        return b"\xef\xbb\xbf" + text.encode(), "UTF-8 byte-order mark"
    if choice == 3:
        junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
        at = rng.randrange(len(text) + 1)
        return text[:at].encode() + junk + text[at:].encode(), "binary junk"
    if choice == 4:
        at = rng.randrange(len(text) + 1)
        return (text[:at] + "\t" + text[at:]).encode(), "a tab"
    return b"", "empty file"


@dataclass(frozen=True)
class Case:
    """One mutated file: its bytes and what was done to the original."""

    number: int
    source: str
    data: bytes
    mutations: tuple[str, ...]
    tree: Any = None
    """The mutated objects (None where the bytes were mutated instead)."""


def mutate(rng: random.Random, number: int, source: str, document: Any) -> Case:
    """One to three tree mutations, and now and then a mutation of the bytes instead."""
    if rng.random() < 0.08:
        text = yaml.dump(document, Dumper=_DUMPER, sort_keys=False)
        data, what = _text_mutation(rng, text)
        return Case(number, source, data, (what,))
    tree = copy.deepcopy(document)
    done = tuple(rng.choice(TREE_MUTATIONS)(rng, tree) for _ in range(rng.randint(1, 3)))
    text = yaml.dump(tree, Dumper=_DUMPER, sort_keys=False, allow_unicode=True)
    return Case(number, source, text.encode(), done, tree)
