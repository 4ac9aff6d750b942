import json

import pytest

from optsched.topology.gpu_topology import no_nvlink, parse_gpu_topology


def test_nvswitch_board_is_one_island() -> None:
    topo = parse_gpu_topology('{"nvlinkIslands": [[0,1,2,3,4,5,6,7]], "numa": [0,0,0,0,1,1,1,1]}', 8)
    assert topo.islands == ((0, 1, 2, 3, 4, 5, 6, 7),)
    assert topo.numa == (0, 0, 0, 0, 1, 1, 1, 1)
    assert topo.unhealthy == frozenset()


def test_gpus_missing_from_islands_stand_alone_and_unhealthy_is_read() -> None:
    topo = parse_gpu_topology('{"nvlinkIslands": [[2,3],[0,1]], "unhealthy": [5]}', 6)
    assert topo.islands == ((0, 1), (2, 3), (4,), (5,))
    assert topo.unhealthy == frozenset({5})


def test_no_annotation_means_no_nvlink() -> None:
    assert no_nvlink(3).islands == ((0,), (1,), (2,))


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "JSON object"),
        ('{"nvlinkIslands": [[0, 9]]}', "GPU 9"),
        ('{"nvlinkIslands": [[0, 1], [1, 2]]}', "two NVLink islands"),
        ('{"nvlinkIslands": [], "numa": [0]}', "numa lists 1"),
        ('{"islands": []}', "unknown keys"),
        ('{"nvlinkIslands": [["a"]]}', "list of GPU indices"),
    ],
)
def test_malformed_annotations_are_explained(raw: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_gpu_topology(raw, 4)


UUIDS = ["GPU-a", "GPU-b", "GPU-c", "GPU-d"]
BUSES = ["00000000:18:00.0", "00000000:2A:00.0", "00000000:3A:00.0", "00000000:5D:00.0"]


def test_uuids_and_pci_bus_ids_are_read_per_index() -> None:
    raw = json.dumps({"nvlinkIslands": [[0, 1, 2, 3]], "uuids": UUIDS, "pciBusIds": BUSES})
    topo = parse_gpu_topology(raw, 4)
    assert topo.uuids == tuple(UUIDS)
    assert topo.pci_bus_ids == tuple(BUSES)


def test_without_uuids_or_pci_bus_ids_there_are_none() -> None:
    topo = parse_gpu_topology('{"nvlinkIslands": [[0, 1]], "uuids": []}', 2)
    assert topo.uuids == () and topo.pci_bus_ids == ()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"uuids": UUIDS[:3]}, "uuids lists 3 GPUs, the node has 4"),
        ({"uuids": [*UUIDS[:3], "GPU-a"]}, "uuids names 'GPU-a' twice"),
        ({"uuids": [*UUIDS[:3], 7]}, "uuids must be a list of strings"),
        ({"uuids": "GPU-a"}, "uuids must be a list of strings"),
        ({"uuids": [*UUIDS[:3], ""]}, r"uuids\[3\] must be 1..128 characters"),
        ({"uuids": [*UUIDS[:3], "G" * 129]}, r"uuids\[3\] must be 1..128 characters"),
        ({"pciBusIds": BUSES[:2]}, "pciBusIds lists 2 GPUs"),
        ({"pciBusIds": [*BUSES[:3], None]}, "pciBusIds must be a list of strings"),
        (
            {"pciBus": BUSES},
            r"unknown keys \['pciBus'\]; expected nvlinkIslands, numa, unhealthy, uuids, pciBusIds",
        ),
    ],
)
def test_malformed_uuids_and_pci_bus_ids_are_explained(extra: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_gpu_topology(json.dumps({"nvlinkIslands": [], **extra}), 4)
