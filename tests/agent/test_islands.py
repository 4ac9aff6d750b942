"""NVLink islands: switch boards, bridge pairs, the hybrid cube mesh, partial meshes, ties."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optsched.agent.devices import NvLink
from optsched.agent.islands import MAX_EXACT_GPUS, board_of, islands
from optsched.agent.profile import resolve_profiles
from tests.agent.boxes import box, bridged_a100, hybrid_cube_mesh


def links(*pairs: tuple[int, int]) -> list[NvLink]:
    return [NvLink(min(a, b), max(a, b), 1) for a, b in pairs]


def test_an_nvswitch_board_is_one_island() -> None:
    assert islands(8, [], frozenset(range(8))) == ((0, 1, 2, 3, 4, 5, 6, 7),)


def test_bridged_pairs_are_islands_of_two() -> None:
    [profile] = resolve_profiles("a100-pcie-bridged")
    assert islands(8, profile.links, frozenset()) == ((0, 1), (2, 3), (4, 5), (6, 7))


def test_the_dgx1_hybrid_cube_mesh_is_two_islands_of_four() -> None:
    [profile] = resolve_profiles("dgx1-v100")
    assert islands(8, profile.links, frozenset()) == ((0, 1, 2, 3), (4, 5, 6, 7))


def test_gpus_without_links_are_islands_of_their_own() -> None:
    assert islands(3, [], frozenset()) == ((0,), (1,), (2,))
    assert islands(0, [], frozenset()) == ()


def test_a_partial_mesh_takes_the_full_quad_then_the_best_triangle_then_the_rest() -> None:
    quad = list(itertools.combinations(range(4), 2))
    missing_4_7 = [(4, 5), (4, 6), (5, 6), (5, 7), (6, 7)]
    assert islands(8, links(*quad, *missing_4_7), frozenset()) == ((0, 1, 2, 3), (4, 5, 6), (7,))


def test_a_triangle_plus_a_pendant() -> None:
    assert islands(4, links((0, 1), (1, 2), (0, 2), (2, 3)), frozenset()) == ((0, 1, 2), (3,))


def test_equal_cliques_go_to_the_lowest_indices_first() -> None:
    assert islands(4, links((0, 1), (1, 2), (2, 3)), frozenset()) == ((0, 1), (2, 3))
    assert islands(4, links((1, 2), (0, 3), (2, 3)), frozenset()) == ((0, 3), (1, 2))
    assert islands(3, links((0, 1), (1, 2)), frozenset()) == ((0, 1), (2,))


def test_the_rest_is_recomputed_after_a_clique_is_taken() -> None:
    k4 = list(itertools.combinations(range(4), 2))
    assert islands(6, links(*k4, (2, 4), (3, 4), (4, 5)), frozenset()) == ((0, 1, 2, 3), (4, 5))


def test_switch_members_and_point_to_point_links_combine() -> None:
    assert islands(4, links((2, 3)), frozenset({0, 1, 2})) == ((0, 1, 2), (3,))
    assert islands(4, links((0, 3), (1, 3), (2, 3)), frozenset({0, 1, 2})) == ((0, 1, 2, 3),)


def test_a_link_of_zero_count_is_no_link() -> None:
    assert islands(2, [NvLink(0, 1, 0)], frozenset()) == ((0,), (1,))


def test_out_of_range_gpus_are_refused() -> None:
    with pytest.raises(ValueError, match="names GPU 5; the node has 4 GPUs"):
        islands(4, [NvLink(0, 5, 1)], frozenset())
    with pytest.raises(ValueError, match="NVSwitch GPU 4 is out of range"):
        islands(4, [], frozenset({4}))


def test_a_huge_switch_board_is_one_island_but_a_huge_partial_mesh_is_refused() -> None:
    assert islands(1024, [], frozenset(range(1024))) == (tuple(range(1024)),)
    chain = [NvLink(i, i + 1, 1) for i in range(MAX_EXACT_GPUS)]
    with pytest.raises(ValueError, match=f"{MAX_EXACT_GPUS + 1} GPUs are NVLinked into one group"):
        islands(MAX_EXACT_GPUS + 1, chain, frozenset())


def test_a_dense_partial_mesh_of_the_largest_searched_size_is_solved_exactly() -> None:
    n = MAX_EXACT_GPUS
    pairs = [(a, b) for a, b in itertools.combinations(range(n), 2) if (a * 7 + b * 13) % 10]
    found = islands(n, links(*pairs), frozenset())
    assert sorted(g for island in found for g in island) == list(range(n))
    adjacent = set(pairs)
    for island in found:
        assert all(pair in adjacent for pair in itertools.combinations(island, 2))


def reference(n: int, edges: set[tuple[int, int]]) -> tuple[tuple[int, ...], ...]:
    """The rule written plainly: repeatedly take the largest clique, lexicographically first among equals."""
    remaining = list(range(n))
    out = []
    while remaining:
        for size in range(len(remaining), 0, -1):
            clique = next(
                (
                    c
                    for c in itertools.combinations(remaining, size)
                    if all(p in edges for p in itertools.combinations(c, 2))
                ),
                None,
            )
            if clique is not None:
                break
        assert clique is not None
        out.append(clique)
        remaining = [g for g in remaining if g not in clique]
    return tuple(sorted(out))


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 9).flatmap(
        lambda n: st.tuples(st.just(n), st.sets(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1))))
    )
)
def test_islands_follow_the_rule_on_any_small_graph(graph: tuple[int, set[tuple[int, int]]]) -> None:
    n, raw = graph
    edges = {(min(a, b), max(a, b)) for a, b in raw if a != b}
    assert islands(n, [NvLink(a, b, 1) for a, b in edges], frozenset()) == reference(n, edges)


def test_the_board_the_best_effort_choice_scores_is_the_published_islands_and_numa() -> None:
    a100 = board_of(bridged_a100())
    assert a100.islands == ((0, 1), (2, 3), (4, 5), (6, 7))
    assert a100.numa == (0, 0, 0, 0, 1, 1, 1, 1)
    assert board_of(hybrid_cube_mesh()).islands == ((0, 1, 2, 3), (4, 5, 6, 7))
    # NUMA is published for every GPU or for none; a board with one unknown knows none.
    partial = board_of(box(2, numa=(0, None)))
    assert partial.numa == () and partial.islands == ((0,), (1,))
