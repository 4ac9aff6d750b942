"""The devices each container really holds, read from kubelet's PodResources API (``v1``, ``List``).

kubelet serves ``v1.PodResourcesLister`` on a unix socket
(``/var/lib/kubelet/pod-resources/kubelet.sock``). Only ``List`` is needed and
only a few of its fields (pod name and namespace, container name, each
resource's device IDs), so the messages are encoded and decoded here on the
protobuf wire format directly instead of shipping generated code; fields not
needed (CPU IDs, memory, DRA resources, topology) and fields a newer kubelet
adds are skipped. ``serve_pod_resources`` is the same endpoint emulated, for
tests and for simulated nodes that have no kubelet.

Field numbers, from kubelet's ``pkg/apis/podresources/v1/api.proto``::

    ListPodResourcesResponse { repeated PodResources pod_resources = 1; }
    PodResources       { string name = 1; string namespace = 2;
                         repeated ContainerResources containers = 3; }
    ContainerResources { string name = 1; repeated ContainerDevices devices = 2; ... }
    ContainerDevices   { string resource_name = 1; repeated string device_ids = 2;
                         TopologyInfo topology = 3; }
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from optsched.agent.backend import BackendError

DEFAULT_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
SERVICE = "v1.PodResourcesLister"
LIST_METHOD = f"/{SERVICE}/List"
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
"""kubelet's own limit on a PodResources message."""
MAX_UNIX_PATH = 107
"""``sun_path`` holds 108 bytes on Linux, the terminating NUL included."""

_VARINT, _FIXED64, _LEN, _FIXED32 = 0, 1, 2, 5
_FIXED_SIZES = {_FIXED64: 8, _FIXED32: 4}


@dataclass(frozen=True)
class ContainerDevices:
    """One container and the device IDs it was given, per resource (``nvidia.com/gpu`` → GPU UUIDs)."""

    name: str
    devices: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def ids(self, resource: str) -> tuple[str, ...]:
        """Every device ID of ``resource`` this container holds, in the order kubelet listed them."""
        return tuple(i for name, ids in self.devices if name == resource for i in ids)


@dataclass(frozen=True)
class PodDevices:
    """One pod on the node and the devices each of its containers holds."""

    namespace: str
    name: str
    containers: tuple[ContainerDevices, ...] = ()


# -- the protobuf wire format, just what these messages need ------------------------------------------


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _len_field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | _LEN) + _varint(len(payload)) + payload


def _string_field(number: int, value: str) -> bytes:
    """A singular proto3 string: left out when empty, as protobuf does."""
    return _len_field(number, value.encode("utf-8")) if value else b""


def _read_varint(data: bytes, pos: int, where: str) -> tuple[int, int]:
    value = 0
    for shift in range(0, 70, 7):
        if pos >= len(data):
            raise ValueError(f"{where}: truncated varint at byte {pos}")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            if value >= 1 << 64:
                raise ValueError(f"{where}: varint longer than 64 bits ending at byte {pos}")
            return value, pos
    raise ValueError(f"{where}: varint longer than 10 bytes ending at byte {pos}")


def _fields(data: bytes, where: str) -> Iterator[tuple[int, int, bytes]]:
    """Each field of a message as (number, wire type, payload); only wire type 2 carries a payload."""
    pos = 0
    while pos < len(data):
        key, pos = _read_varint(data, pos, where)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ValueError(f"{where}: field number 0 at byte {pos}")
        if wire == _VARINT:
            _, pos = _read_varint(data, pos, where)
            yield number, wire, b""
        elif wire in _FIXED_SIZES:
            pos += _FIXED_SIZES[wire]
            if pos > len(data):
                raise ValueError(f"{where}: field {number} truncated (fixed-size value past the end)")
            yield number, wire, b""
        elif wire == _LEN:
            size, pos = _read_varint(data, pos, where)
            if pos + size > len(data):
                raise ValueError(f"{where}: field {number} says {size} bytes, {len(data) - pos} remain")
            yield number, wire, data[pos : pos + size]
            pos += size
        else:
            raise ValueError(f"{where}: field {number} has wire type {wire}, expected one of 0, 1, 2, 5")


def _known(data: bytes, where: str, numbers: frozenset[int]) -> Iterator[tuple[int, bytes]]:
    """The fields numbered ``numbers`` (all length-delimited here); any other field is skipped."""
    for number, wire, payload in _fields(data, where):
        if number not in numbers:
            continue
        if wire != _LEN:
            raise ValueError(f"{where}: field {number} has wire type {wire}, expected 2 (length-delimited)")
        yield number, payload


def _text(payload: bytes, where: str) -> str:
    try:
        return payload.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"{where}: a string field is not valid UTF-8 ({err.reason})") from None


# -- the messages ------------------------------------------------------------------------------------


def _encode_resource(resource: str, ids: tuple[str, ...]) -> bytes:
    return _string_field(1, resource) + b"".join(_len_field(2, i.encode("utf-8")) for i in ids)


def _encode_container(container: ContainerDevices) -> bytes:
    devices = b"".join(_len_field(2, _encode_resource(r, ids)) for r, ids in container.devices)
    return _string_field(1, container.name) + devices


def _encode_pod(pod: PodDevices) -> bytes:
    containers = b"".join(_len_field(3, _encode_container(c)) for c in pod.containers)
    return _string_field(1, pod.name) + _string_field(2, pod.namespace) + containers


def encode_list_response(pods: list[PodDevices]) -> bytes:
    """``ListPodResourcesResponse`` on the wire, as kubelet sends it."""
    return b"".join(_len_field(1, _encode_pod(p)) for p in pods)


def _decode_resource(data: bytes, where: str) -> tuple[str, tuple[str, ...]]:
    resource, ids = "", list[str]()
    for number, payload in _known(data, where, frozenset({1, 2})):
        if number == 1:
            resource = _text(payload, f"{where}.resource_name")
        else:
            ids.append(_text(payload, f"{where}.device_ids[{len(ids)}]"))
    return resource, tuple(ids)


def _decode_container(data: bytes, where: str) -> ContainerDevices:
    name, devices = "", list[tuple[str, tuple[str, ...]]]()
    for number, payload in _known(data, where, frozenset({1, 2})):
        if number == 1:
            name = _text(payload, f"{where}.name")
        else:
            devices.append(_decode_resource(payload, f"{where}.devices[{len(devices)}]"))
    return ContainerDevices(name, tuple(devices))


def _decode_pod(data: bytes, where: str) -> PodDevices:
    name, namespace, containers = "", "", list[ContainerDevices]()
    for number, payload in _known(data, where, frozenset({1, 2, 3})):
        if number == 1:
            name = _text(payload, f"{where}.name")
        elif number == 2:
            namespace = _text(payload, f"{where}.namespace")
        else:
            containers.append(_decode_container(payload, f"{where}.containers[{len(containers)}]"))
    return PodDevices(namespace, name, tuple(containers))


def decode_list_response(data: bytes) -> list[PodDevices]:
    """Read a ``ListPodResourcesResponse``; malformed bytes raise ValueError saying where and why."""
    where = "ListPodResourcesResponse"
    pods: list[PodDevices] = []
    for _, payload in _known(data, where, frozenset({1})):
        pods.append(_decode_pod(payload, f"{where}.pod_resources[{len(pods)}]"))
    return pods


# -- the client and the emulated endpoint -------------------------------------------------------------


def _target(socket_path: str | Path) -> str:
    path = os.path.abspath(socket_path)
    if len(path.encode()) > MAX_UNIX_PATH:
        raise BackendError(f"unix socket path {path} is longer than {MAX_UNIX_PATH} bytes")
    return f"unix://{path}"


def _identity(data: bytes) -> bytes:
    return data


class PodResourcesClient:
    """kubelet's PodResources ``List`` over its unix socket; every failure is a :class:`BackendError`."""

    def __init__(self, socket_path: str | Path = DEFAULT_SOCKET, timeout_s: float = 5.0) -> None:
        self.socket_path = str(socket_path)
        self.timeout_s = timeout_s
        options = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]
        self._channel = grpc.insecure_channel(_target(socket_path), options=options)
        # Raw bytes both ways: the messages are encoded and decoded above.
        self._list = self._channel.unary_unary(
            LIST_METHOD, request_serializer=_identity, response_deserializer=_identity
        )

    def list(self) -> list[PodDevices]:
        """Every pod kubelet runs on this node and the devices its containers hold."""
        try:
            raw = self._list(b"", timeout=self.timeout_s)
        except grpc.RpcError as err:
            code = err.code() if hasattr(err, "code") else None
            details = err.details() if hasattr(err, "details") else str(err)
            status = code.name if code is not None else "UNKNOWN"
            raise BackendError(
                f"kubelet PodResources List on {self.socket_path} failed: {status}: {details}"
            ) from None
        try:
            return decode_list_response(raw)
        except ValueError as err:
            raise BackendError(
                f"kubelet PodResources List on {self.socket_path}: bad response: {err}"
            ) from None

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> PodResourcesClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def serve_pod_resources(socket_path: str | Path, provider: Callable[[], list[PodDevices]]) -> grpc.Server:
    """Serve ``v1.PodResourcesLister/List`` on ``socket_path`` from ``provider`` (an emulated kubelet).

    Returns the started ``grpc.Server``; stop it with ``server.stop(None)``.
    A provider that raises answers the call with status INTERNAL and its message.
    """

    def list_pods(request: bytes, context: Any) -> bytes:
        try:
            return encode_list_response(provider())
        except Exception as err:  # any provider failure becomes the call's status
            context.abort(grpc.StatusCode.INTERNAL, f"listing pod resources failed: {err}")
            raise  # abort raises; this line is never reached

    target = _target(socket_path)
    Path(socket_path).parent.mkdir(parents=True, exist_ok=True)
    methods = {"List": grpc.unary_unary_rpc_method_handler(list_pods)}
    server = grpc.server(
        ThreadPoolExecutor(max_workers=2, thread_name_prefix="pod-resources"),
        handlers=(grpc.method_handlers_generic_handler(SERVICE, methods),),
        options=[("grpc.max_send_message_length", MAX_MESSAGE_BYTES)],
    )
    try:
        server.add_insecure_port(target)
    except RuntimeError as err:
        raise BackendError(f"cannot serve PodResources on {socket_path}: {err}") from None
    server.start()
    return server
