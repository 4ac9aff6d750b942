"""kubelet's PodResources List: the wire codec against protobuf itself, the client against a real socket."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optsched.agent.backend import BackendError
from optsched.agent.podresources import (
    ContainerDevices,
    PodDevices,
    PodResourcesClient,
    decode_list_response,
    encode_list_response,
    serve_pod_resources,
)

# -- an independent encoder for hand-built messages ----------------------------------------------------


def varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def field(number: int, payload: bytes) -> bytes:
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def text(number: int, value: str) -> bytes:
    return field(number, value.encode())


# -- strategies -----------------------------------------------------------------------------------------

names = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=12)
resources = st.tuples(names, st.lists(names, max_size=4).map(tuple))
containers = st.builds(ContainerDevices, names, st.lists(resources, max_size=3).map(tuple))
pods = st.lists(st.builds(PodDevices, names, names, st.lists(containers, max_size=3).map(tuple)), max_size=4)

GPU = "nvidia.com/gpu"
TRAIN = PodDevices(
    "team-a",
    "train-0",
    (
        ContainerDevices("main", ((GPU, ("GPU-aaa", "GPU-bbb")),)),
        ContainerDevices("sidecar", ()),
    ),
)


@given(pods)
@settings(max_examples=200, deadline=None)
def test_decode_reads_back_what_encode_wrote(value: list[PodDevices]) -> None:
    assert decode_list_response(encode_list_response(value)) == value


def test_container_ids_collects_one_resource_in_order() -> None:
    container = ContainerDevices("c", ((GPU, ("b", "a")), ("nvidia.com/mig-1g.10gb", ("m",)), (GPU, ("c",))))
    assert container.ids(GPU) == ("b", "a", "c")
    assert container.ids("example.com/nic") == ()


def test_a_message_with_fields_this_codec_does_not_know_decodes_to_the_known_ones() -> None:
    topology = field(3, field(1, varint(1 << 3 | 0) + varint(1)))  # TopologyInfo{nodes: [{ID: 1}]}
    device = text(1, GPU) + text(2, "GPU-aaa") + topology + text(2, "GPU-bbb")
    cpu_ids = field(3, varint(4) + varint(5))  # packed repeated int64
    memory = field(4, text(1, "memory") + varint(2 << 3 | 0) + varint(1 << 40))
    fixed64 = varint(9 << 3 | 1) + bytes(8)
    fixed32 = varint(10 << 3 | 5) + bytes(4)
    container = text(1, "main") + cpu_ids + field(2, device) + memory + fixed64 + fixed32
    dynamic = field(5, text(2, "claim") + text(3, "team-a"))
    pod = (
        varint(7 << 3 | 0)
        + varint(300)
        + text(2, "team-a")
        + text(1, "train-0")
        + field(3, container + dynamic)
    )
    message = field(1, pod) + varint(15 << 3 | 0) + varint(1)
    expected = PodDevices("team-a", "train-0", (ContainerDevices("main", ((GPU, ("GPU-aaa", "GPU-bbb")),)),))
    assert decode_list_response(message) == [expected]


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (field(1, text(1, "p"))[:-1], "says 3 bytes, 2 remain"),
        (bytes([0x0A, 0x80]), "truncated varint"),
        (bytes([0x0B]), "wire type 3"),
        (bytes([0x02, 0x00]), "field number 0"),
        (varint(1 << 3 | 0) + varint(5), "expected 2"),
        (field(1, field(1, b"\xff\xfe")), "not valid UTF-8"),
        (bytes([0x08]) + bytes([0xFF] * 10) + b"\x01", "varint"),
        (varint(9 << 3 | 1) + bytes(3), "truncated"),
    ],
)
def test_malformed_bytes_are_a_value_error_saying_what_is_wrong(data: bytes, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        decode_list_response(data)


def test_the_error_names_the_message_path() -> None:
    bad = field(
        1, text(1, "p") + field(3, text(1, "c") + field(2, text(1, "r") + varint(2 << 3 | 0) + varint(1)))
    )
    with pytest.raises(ValueError, match=r"pod_resources\[0\]\.containers\[0\]\.devices\[0\]"):
        decode_list_response(bad)


# -- the same messages through protobuf's own codec -------------------------------------------------------


def _protobuf_classes() -> dict[str, Any]:
    descriptor_pb2 = pytest.importorskip("google.protobuf.descriptor_pb2")
    descriptor_pool = pytest.importorskip("google.protobuf.descriptor_pool")
    message_factory = pytest.importorskip("google.protobuf.message_factory")
    f = descriptor_pb2.FieldDescriptorProto
    string, message, repeated = f.TYPE_STRING, f.TYPE_MESSAGE, f.LABEL_REPEATED
    shapes = {
        "ListPodResourcesResponse": [("pod_resources", 1, message, repeated, ".t.PodResources")],
        "PodResources": [
            ("name", 1, string, f.LABEL_OPTIONAL, ""),
            ("namespace", 2, string, f.LABEL_OPTIONAL, ""),
            ("containers", 3, message, repeated, ".t.ContainerResources"),
        ],
        "ContainerResources": [
            ("name", 1, string, f.LABEL_OPTIONAL, ""),
            ("devices", 2, message, repeated, ".t.ContainerDevices"),
            ("cpu_ids", 3, f.TYPE_INT64, repeated, ""),
        ],
        "ContainerDevices": [
            ("resource_name", 1, string, f.LABEL_OPTIONAL, ""),
            ("device_ids", 2, string, repeated, ""),
        ],
    }
    proto = descriptor_pb2.FileDescriptorProto(
        name="optsched_test_podresources.proto", package="t", syntax="proto3"
    )
    for name, fields in shapes.items():
        msg = proto.message_type.add(name=name)
        for fname, number, ftype, label, type_name in fields:
            spec = msg.field.add(name=fname, number=number, type=ftype, label=label)
            if type_name:
                spec.type_name = type_name
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return {n: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"t.{n}")) for n in shapes}


def test_protobuf_reads_what_encode_wrote_and_decode_reads_what_protobuf_wrote() -> None:
    classes = _protobuf_classes()
    parsed = classes["ListPodResourcesResponse"].FromString(encode_list_response([TRAIN]))
    pod = parsed.pod_resources[0]
    assert (pod.namespace, pod.name, [c.name for c in pod.containers]) == (
        "team-a",
        "train-0",
        ["main", "sidecar"],
    )
    assert [(d.resource_name, list(d.device_ids)) for d in pod.containers[0].devices] == [
        (GPU, ["GPU-aaa", "GPU-bbb"])
    ]
    pod.containers[0].cpu_ids.extend([2, 3])  # a field the codec skips
    assert decode_list_response(parsed.SerializeToString()) == [TRAIN]


# -- the client against the emulated kubelet on a real unix socket ---------------------------------------


def test_the_client_lists_what_the_emulated_kubelet_serves(tmp_path: Path) -> None:
    socket = tmp_path / "pr" / "kubelet.sock"
    served = [[TRAIN], []]
    server = serve_pod_resources(socket, lambda: served.pop(0))
    try:
        with PodResourcesClient(socket, timeout_s=10.0) as client:
            assert client.list() == [TRAIN]
            assert client.list() == []
    finally:
        server.stop(None)


def test_a_provider_failure_reaches_the_client_as_a_backend_error(tmp_path: Path) -> None:
    def broken() -> list[PodDevices]:
        raise RuntimeError("devices unreadable")

    socket = tmp_path / "kubelet.sock"
    server = serve_pod_resources(socket, broken)
    try:
        client = PodResourcesClient(socket, timeout_s=10.0)
        with pytest.raises(BackendError, match=r"INTERNAL.*devices unreadable") as caught:
            client.list()
        assert str(socket) in str(caught.value)
        client.close()
    finally:
        server.stop(None)


def test_a_missing_kubelet_is_a_backend_error_naming_the_socket(tmp_path: Path) -> None:
    socket = tmp_path / "absent.sock"
    client = PodResourcesClient(socket, timeout_s=5.0)
    with pytest.raises(BackendError, match=grpc.StatusCode.UNAVAILABLE.name) as caught:
        client.list()
    assert str(socket) in str(caught.value)
    client.close()


def test_a_socket_path_too_long_for_unix_sockets_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BackendError, match="longer than"):
        PodResourcesClient(tmp_path / ("x" * 120) / "kubelet.sock")
