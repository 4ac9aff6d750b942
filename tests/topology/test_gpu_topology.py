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
