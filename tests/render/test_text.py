from __future__ import annotations

from optsched.render.text import NodeGpus, compact_nodes, fmt_gpus, format_table, index_ranges, wrap_tokens


def test_index_ranges_merges_runs() -> None:
    assert index_ranges([3, 0, 1, 2, 6]) == "0-3,6"
    assert index_ranges([5]) == "5"
    assert index_ranges([]) == ""


def test_compact_nodes_merges_numbered_runs_with_equal_gpus() -> None:
    groups = [NodeGpus(f"h100-0{i}", tuple(range(8))) for i in (1, 2, 3)] + [NodeGpus("h100-05", (0, 1))]
    assert compact_nodes(groups) == ["h100-01..03[0-7]", "h100-05[0-1]"]


def test_compact_nodes_keeps_different_gpu_sets_apart() -> None:
    groups = [NodeGpus("n1", (0, 1, 2, 3)), NodeGpus("n2", (4, 5, 6, 7)), NodeGpus("cpu", ())]
    assert compact_nodes(groups) == ["n1[0-3]", "n2[4-7]", "cpu"]


def test_unknown_indices_are_counted_not_invented() -> None:
    assert compact_nodes([NodeGpus("a100-01", (), unknown=2)]) == ["a100-01[any 2]"]


def test_format_table_aligns_columns_and_right_aligns_numbers() -> None:
    text = format_table(["NAME", "N"], [["a", "1"], ["longer", "100"]], right=(1,))
    lines = text.splitlines()
    assert lines[1] == "  a         1"
    assert lines[2] == "  longer  100"
    assert all(not line.endswith(" ") for line in lines)


def test_format_table_multiline_cells() -> None:
    text = format_table(["A", "B"], [["x", "one\ntwo"]])
    assert text.splitlines()[1:] == ["  x  one", "     two"]


def test_wrap_tokens_never_splits_a_token() -> None:
    assert wrap_tokens(["aaaa", "bbbb", "cccc"], 9) == "aaaa bbbb\ncccc"


def test_fmt_gpus() -> None:
    assert fmt_gpus(8.0) == "8"
    assert fmt_gpus(0.25) == "0.25"
    assert fmt_gpus(2.5) == "2.5"
