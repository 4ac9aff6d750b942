"""Reading raw objects one at a time, so that one unreadable object never sinks the snapshot.

An object that cannot be read (a field of the wrong type, a quantity that is
not one, a value the model refuses, an API version optsched does not read) is
left out with a warning naming the file, the object and the field; the rest of
the snapshot is built without it. What leaving it out means depends on the
kind, and the builder decides that (a bound Pod that cannot be read takes its
node out of planning, because its usage is unknown).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import ValidationError

from optsched.errors import InputError
from optsched.model.names import KUEUE_GROUP, NODE_GPUS_KIND, NODE_GPUS_VERSION, OPTSCHED_GROUP
from optsched.model.snapshot import LeftOut
from optsched.snapshot.fields import describe

_T = TypeVar("_T")

KUEUE_KINDS = (
    "Workload",
    "ClusterQueue",
    "LocalQueue",
    "ResourceFlavor",
    "Topology",
    "AdmissionCheck",
)
KUEUE_VERSIONS = ("v1beta1", "v1beta2")
"""The Kueue API versions whose ClusterQueue, LocalQueue, ResourceFlavor and Workload optsched reads."""
TOPOLOGY_VERSIONS = ("v1alpha1", "v1beta1", "v1beta2")
"""Topology was served as v1alpha1 before it reached v1beta1 and v1beta2."""


def api_group(obj: dict[str, Any]) -> str:
    api_version = str(obj.get("apiVersion", ""))
    return api_version.split("/")[0] if "/" in api_version else ""


def unsupported_version(obj: dict[str, Any]) -> str | None:
    """Why a Kueue (or NodeGPUs) object's API version is not read (an old one has another schema), or None."""
    version = str(obj.get("apiVersion", "")).rpartition("/")[2]
    group = KUEUE_GROUP
    supported: tuple[str, ...] = TOPOLOGY_VERSIONS if obj.get("kind") == "Topology" else KUEUE_VERSIONS
    if obj.get("kind") == NODE_GPUS_KIND:
        group, supported = OPTSCHED_GROUP, (NODE_GPUS_VERSION,)
    if version in supported:
        return None
    return f"apiVersion {obj.get('apiVersion')!r} is not read (expected {group}/{' or '.join(supported)})"


def _model_error(exc: ValidationError, obj: dict[str, Any]) -> InputError:
    """The first problem pydantic found, as an input error on the object."""
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first.get("loc", ()))
    return InputError(first.get("msg", "invalid value"), obj=describe(obj), field=where)


@dataclass
class Reader:
    """Parses objects of one kind, keeping the ones that read and recording the ones that do not."""

    source: str
    left_out: list[LeftOut] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """What leaving an object out meant for the rest (a node taken out of planning with its pod)."""

    @property
    def warnings(self) -> list[str]:
        return [f"{item.message} (left out)" for item in self.left_out] + self.notes

    def read(self, obj: dict[str, Any], parse: Callable[[dict[str, Any]], _T]) -> _T | None:
        try:
            return parse(obj)
        except InputError as exc:
            error = exc.located(source=self.source, obj=describe(obj))
        except ValidationError as exc:
            error = _model_error(exc, obj).located(source=self.source)
        self.leave_out(obj, str(error))
        return None

    def leave_out(self, obj: dict[str, Any], message: str) -> None:
        raw = obj.get("metadata")
        meta: dict[str, Any] = raw if isinstance(raw, dict) else {}
        self.left_out.append(
            LeftOut(
                kind=str(obj.get("kind", "")),
                namespace=str(meta.get("namespace") or ""),
                name=str(meta.get("name") or ""),
                message=message,
            )
        )
