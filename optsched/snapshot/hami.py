"""HAMi's own records: the GPUs its device plugin registers, and the devices its scheduler gives pods.

HAMi's device plugin advertises ``nvidia.com/gpu`` as physical GPUs times its
split count, so on a HAMi node that count says nothing about the hardware. The
real devices are in the node annotation ``hami.io/node-nvidia-register``, in
one of two formats:

* newer releases: a JSON list of HAMi's ``DeviceInfo``, e.g.
  ``[{"id":"GPU-c68a...","count":10,"devmem":4096,"devcore":100,"type":"NVIDIA-NVIDIA GeForce GTX 1050",
  "mode":"hami-core","health":true},{"id":"GPU-331e...","index":1,...}]``. Go omits zero values,
  so a missing ``index`` is 0 and a missing ``health`` is false, as HAMi itself reads them;
* older releases: colon-separated devices ``uuid,count,devmem,devcore,type,numa,health:``,
  optionally with ``,index,mode`` before the colon.

``count`` is the split count (tasks one GPU holds at once), ``devmem`` the MiB
HAMi schedules against. GPU indices are the ``index`` fields where they number
the devices 0..n-1, else the order of the list.

HAMi records what it gave each pod in ``hami.io/vgpu-devices-allocated`` (and
``hami.io/vgpu-devices-to-allocate``, which its device plugin empties as
containers start): per container ``uuid,NVIDIA,memMiB,cores:`` for each
device, containers separated by ``;``. Every problem is a ValueError or a
warning naming the annotation and the format, because one bad object never
sinks a plan.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from optsched.model.names import (
    HAMI_ALLOCATED_ANNOTATION,
    HAMI_DEVICE_TYPE,
    HAMI_TO_ALLOCATE_ANNOTATION,
    PRODUCT_LABEL,
)
from optsched.model.snapshot import FULL_GPU_MILLI, Node

JSON_FORMAT = "JSON list of devices"
COLON_FORMAT = "colon-separated devices"
_GO_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_GO_FALSE = ("0", "f", "F", "FALSE", "false", "False")


@dataclass(frozen=True)
class HamiDevice:
    """One physical GPU as HAMi registers it."""

    uuid: str
    index: int
    split: int
    memory_mib: int
    cores: int
    type: str
    numa: int
    healthy: bool


@dataclass(frozen=True)
class HamiNode:
    """A node's register annotation, read: its GPUs by index."""

    format: str
    devices: tuple[HamiDevice, ...]

    @property
    def gpu_count(self) -> int:
        return len(self.devices)

    def applied_to(self, node: Node, *, advertised: int) -> Node:
        """``node`` with HAMi's GPU facts; a node advertising no ``nvidia.com/gpu`` has none usable.

        A GPU HAMi reports unhealthy, or with no task slots or no memory, is
        one it never hands out. The GFD product label wins over HAMi's device
        type; HAMi's memory wins over the GFD memory label (it is what HAMi
        schedules against, scaled by its ``deviceMemoryScaling``); the
        smallest usable GPU stands for all of them.
        """
        usable = [d for d in self.devices if d.healthy and d.split and d.memory_mib] if advertised > 0 else []
        unhealthy = {d.index for d in self.devices} - {d.index for d in usable}
        return node.model_copy(
            update={
                "gpu_product": node.labels.get(PRODUCT_LABEL) or _product(self.devices[0].type),
                "gpu_memory_mib": min(d.memory_mib for d in usable or self.devices),
                "gpu_split": min((d.split for d in usable), default=0),
                "gpu_uuids": tuple(d.uuid for d in self.devices),
                "numa": node.numa or tuple(d.numa for d in self.devices),
                "unhealthy_gpus": frozenset(node.unhealthy_gpus | unhealthy),
                "hami": True,
            }
        )


def _product(device_type: str) -> str:
    """GFD's spelling of HAMi's type: HAMi prefixes the NVML name with ``NVIDIA-``, GFD uses dashes."""
    name = device_type.removeprefix(f"{HAMI_DEVICE_TYPE}-")
    return "-".join(name.split())


def read_register(raw: str) -> HamiNode:
    """The register annotation in either format; ValueError naming the format and the field."""
    text = raw.strip()
    fmt = JSON_FORMAT if text.startswith("[") else COLON_FORMAT
    try:
        devices = _from_json(text) if fmt == JSON_FORMAT else _from_colons(text)
        if not devices:
            raise ValueError("it lists no GPU")
        uuids = [d.uuid for d in devices]
        if len(set(uuids)) != len(uuids):
            raise ValueError("a GPU UUID appears twice")
    except ValueError as exc:
        raise ValueError(f"{fmt}: {exc}") from None
    indices = sorted(d.index for d in devices)
    if indices != list(range(len(devices))):
        devices = [_with_index(d, position) for position, d in enumerate(devices)]
    return HamiNode(fmt, tuple(sorted(devices, key=lambda d: d.index)))


def _with_index(device: HamiDevice, index: int) -> HamiDevice:
    return HamiDevice(**{**device.__dict__, "index": index})


def _from_json(text: str) -> list[HamiDevice]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg} at position {exc.pos})") from None
    if not isinstance(data, list):
        raise ValueError("expected a list of device objects")
    devices = []
    for number, entry in enumerate(data):
        if not isinstance(entry, dict):
            raise ValueError(f"device {number} is not an object")
        uuid = entry.get("id")
        if not isinstance(uuid, str) or not uuid:
            raise ValueError(f"device {number}: 'id' must be the GPU's UUID")
        health = entry.get("health", False)
        if not isinstance(health, bool):
            raise ValueError(f"device {number}: 'health' must be true or false, got {health!r}")
        kind = entry.get("type", "")
        if not isinstance(kind, str):
            raise ValueError(f"device {number}: 'type' must be a string, got {kind!r}")
        numbers = {
            key: _json_int(entry, key, number) for key in ("index", "count", "devmem", "devcore", "numa")
        }
        devices.append(
            HamiDevice(
                uuid,
                numbers["index"],
                numbers["count"],
                numbers["devmem"],
                numbers["devcore"],
                kind,
                numbers["numa"],
                health,
            )
        )
    return devices


def _json_int(entry: dict[str, Any], key: str, number: int) -> int:
    value = entry.get(key, 0)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"device {number}: {key!r} must be a whole number >= 0, got {value!r}")
    return value


def _from_colons(text: str) -> list[HamiDevice]:
    devices = []
    for number, segment in enumerate(s for s in text.split(":") if s.strip()):
        fields = segment.split(",")
        if len(fields) not in (7, 9):
            raise ValueError(
                f"device {number} has {len(fields)} fields, expected 7 "
                "(uuid,count,devmem,devcore,type,numa,health) or 9 (then index,mode)"
            )
        if not fields[0].strip():
            raise ValueError(f"device {number}: the UUID is empty")
        count, devmem, devcore, numa = (
            _field_int(fields[i], name, f"device {number}")
            for i, name in ((1, "count"), (2, "devmem"), (3, "devcore"), (5, "numa"))
        )
        if fields[6] not in _GO_TRUE + _GO_FALSE:
            raise ValueError(f"device {number}: health must be true or false, got {fields[6]!r}")
        index = _field_int(fields[7], "index", f"device {number}") if len(fields) == 9 else number
        devices.append(
            HamiDevice(
                fields[0].strip(), index, count, devmem, devcore, fields[4], numa, fields[6] in _GO_TRUE
            )
        )
    return devices


def _field_int(text: str, name: str, where: str) -> int:
    value = text.strip()
    if not (value.isascii() and value.isdigit()):
        raise ValueError(f"{where}: {name} must be a whole number >= 0, got {text!r}")
    return int(value)


@dataclass(frozen=True)
class DeviceUse:
    """What one pod's device takes on one GPU, in the planner's units."""

    index: int
    memory_mib: int
    milli: int


def pod_devices(
    pod: dict[str, Any], node: Node, gpus: int, who: str
) -> tuple[list[DeviceUse] | None, list[str]]:
    """The GPUs HAMi gave a bound pod asking for ``gpus``, by index; None (unknown) without a record.

    A device with no cores reserved is counted by its memory fraction, as a
    bound share without compute is everywhere else. A record that cannot be
    read, or lists fewer devices than the pod asks for, counts as missing,
    with a warning.
    """
    metadata = pod.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    if not isinstance(annotations, dict):
        return None, []
    key = HAMI_ALLOCATED_ANNOTATION
    raw = annotations.get(key)
    if not isinstance(raw, str) or not raw.strip(";: "):
        key = HAMI_TO_ALLOCATE_ANNOTATION
        raw = annotations.get(key)
    if not isinstance(raw, str) or not raw.strip(";: "):
        return None, []
    try:
        devices = _devices(raw, node)
        if len(devices) < gpus:
            raise ValueError(f"it lists {len(devices)} {HAMI_DEVICE_TYPE} devices, the pod asks for {gpus}")
    except ValueError as exc:
        return None, [f"{who}: annotation {key} is malformed ({exc}); its GPUs count as of unknown index"]
    return devices, []


def _devices(raw: str, node: Node) -> list[DeviceUse]:
    index_of = {uuid: i for i, uuid in enumerate(node.gpu_uuids)}
    out = []
    for container, entries in enumerate(raw.split(";")):
        for entry in (e for e in entries.split(":") if e.strip()):
            fields = entry.split(",")
            if len(fields) < 4:
                raise ValueError(f"container {container}: {entry!r} is not uuid,type,memory,cores")
            if fields[1] != HAMI_DEVICE_TYPE:
                continue
            uuid = fields[0].strip()
            if uuid not in index_of:
                raise ValueError(
                    f"container {container}: GPU {uuid} is not in the node's register annotation"
                )
            memory, cores = (
                _field_int(fields[i], name, f"container {container}")
                for i, name in ((2, "memory"), (3, "cores"))
            )
            total = node.gpu_memory_mib
            if cores:
                milli = min(FULL_GPU_MILLI, cores * FULL_GPU_MILLI // 100)
            else:
                milli = min(FULL_GPU_MILLI, math.ceil(memory * FULL_GPU_MILLI / total)) if total else 0
            out.append(DeviceUse(index_of[uuid], memory, milli))
    return out
