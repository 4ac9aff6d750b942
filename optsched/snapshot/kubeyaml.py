"""YAML output that Kubernetes tools read back with the same types.

PyYAML writes YAML 1.1 and leaves strings such as ``3134e8``, ``1e5`` or ``1.5e3``
unquoted, because YAML 1.1 floats need a dot and a signed exponent.  The YAML
readers of kubectl and the API server (go-yaml through sigs.k8s.io/yaml) take
those plain scalars as numbers, so a label value or node name of that shape would
change type on its way into a cluster.  Every YAML document optsched writes goes
through :func:`dump_yaml`, which quotes such strings.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import yaml

_BASE_DUMPER: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

# Plain scalars that go-yaml resolves to a number although YAML 1.1 does not.
_NUMBER_FOR_GO = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")


class KubeSafeDumper(_BASE_DUMPER):  # type: ignore[misc,valid-type]
    """A safe dumper that quotes strings a Go YAML reader would read as numbers."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if _NUMBER_FOR_GO.fullmatch(value):
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="'")
    return dumper.represent_str(value)


KubeSafeDumper.add_representer(str, _represent_str)


def dump_yaml(data: Any, *, width: int = 120) -> str:
    """One YAML document, keys in insertion order, unicode kept."""
    return yaml.dump(data, Dumper=KubeSafeDumper, sort_keys=False, allow_unicode=True, width=width)


def dump_yaml_all(documents: Iterable[Any], *, width: int = 120) -> str:
    """Several YAML documents separated by ``---``."""
    return yaml.dump_all(
        list(documents), Dumper=KubeSafeDumper, sort_keys=False, allow_unicode=True, width=width
    )
