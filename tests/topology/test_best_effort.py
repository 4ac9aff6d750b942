"""NVIDIA's best-effort GPU choice as optsched predicts it: NVLink-aware, look-ahead, deterministic."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optsched.topology import best_effort as allocator
from optsched.topology.best_effort import Board, best_effort, pair_score
from tests.topology.boards import bridged_a100, hybrid_cube_mesh, switch_board

# -- an oracle: every split enumerated plainly, placeholders padding the count, as the policy describes ----


def _splits(positions: list[int], size: int) -> Iterator[list[tuple[int, ...]]]:
    if len(positions) == size:
        yield [tuple(positions)]
        return
    first, rest = positions[0], positions[1:]
    for others in combinations(rest, size - 1):
        group = (first, *others)
        remaining = [p for p in rest if p not in others]
        for tail in _splits(remaining, size):
            yield [group, *tail]


def oracle(free: Sequence[int], size: int, board: Board, required: Sequence[int]) -> tuple[int, ...]:
    gpus = sorted(free)
    pad = -len(gpus) % size
    real = len(gpus)

    def score(group: Sequence[int]) -> int:
        members = [gpus[p] for p in group if p < real]
        return sum(pair_score(board, a, b) for a, b in combinations(members, 2))

    def full_with_required(group: tuple[int, ...]) -> bool:
        return all(p < real for p in group) and set(required) <= {gpus[p] for p in group}

    best: list[tuple[int, ...]] | None = None
    for split in _splits(list(range(real + pad)), size):
        if any(sum(p >= real for p in g) not in (0, pad) for g in split):
            continue
        if not any(full_with_required(g) for g in split):
            continue
        if best is None or sum(map(score, split)) > sum(map(score, best)):
            best = split
    assert best is not None
    chosen = max((g for g in best if full_with_required(g)), key=score)
    return tuple(gpus[p] for p in chosen)


Request = tuple[list[int], int, Board, list[int]]


@st.composite
def requests(draw: st.DrawFn) -> Request:
    count = draw(st.integers(2, 7))
    labels = draw(st.lists(st.integers(0, 3), min_size=count, max_size=count))
    islands = tuple(tuple(g for g in range(count) if labels[g] == label) for label in sorted(set(labels)))
    numa = draw(
        st.one_of(st.just(()), st.lists(st.sampled_from([0, 1, None]), min_size=count, max_size=count))
    )
    board = Board(count, islands, tuple(numa))
    free = draw(st.lists(st.integers(0, count - 1), min_size=1, unique=True))
    size = draw(st.integers(1, len(free)))
    required = draw(st.lists(st.sampled_from(free), max_size=size, unique=True))
    return draw(st.permutations(free)), size, board, required


@given(requests())
@settings(max_examples=300, deadline=None)
def test_the_choice_is_the_best_group_of_the_best_split(
    request: tuple[list[int], int, Board, list[int]],
) -> None:
    free, size, board, required = request
    chosen = best_effort(free, size, board, required)
    assert chosen == oracle(free, size, board, required)
    assert len(chosen) == size and set(required) <= set(chosen) <= set(free)
    assert list(chosen) == sorted(chosen)


# -- the boxes the policy exists for --------------------------------------------------------------------


def test_a_pair_on_a_bridged_a100_box_is_a_bridged_pair() -> None:
    a100 = bridged_a100()
    assert best_effort(range(8), 2, a100) == (0, 1)
    assert best_effort([1, 2, 3, 5], 2, a100) == (2, 3)
    # Four of six free GPUs: two whole pairs on one socket, leaving the other pair whole.
    assert best_effort([2, 3, 4, 5, 6, 7], 4, a100) == (4, 5, 6, 7)


def test_a_hybrid_cube_mesh_keeps_its_quads_whole() -> None:
    mesh = hybrid_cube_mesh()
    assert best_effort(range(8), 4, mesh) in {(0, 1, 2, 3), (4, 5, 6, 7)}
    first = best_effort(range(8), 2, mesh)
    assert set(first) <= {0, 1, 2, 3} or set(first) <= {4, 5, 6, 7}
    left = [g for g in range(8) if g not in first]
    second = best_effort(left, 4, mesh)
    assert second in {(0, 1, 2, 3), (4, 5, 6, 7)}
    assert not set(first) & set(second)


def test_a_switch_board_is_taken_whole_before_pcie_gpus() -> None:
    mixed = Board(8, ((0, 1, 2, 3),), (0, 0, 1, 1, 0, 0, 1, 1))
    assert best_effort([6, 0, 4, 1, 2, 5, 3], 4, mixed) == (0, 1, 2, 3)


def test_on_a_full_switch_board_a_half_stays_on_one_socket() -> None:
    assert best_effort(range(8), 4, switch_board()) == (0, 1, 2, 3)
    assert best_effort([1, 2, 3, 4, 5, 6], 3, switch_board()) in {(1, 2, 3), (4, 5, 6)}


def test_pair_scores_rank_an_island_over_numa() -> None:
    a100 = bridged_a100()
    bridged, same_socket, cross_socket = (pair_score(a100, *p) for p in [(0, 1), (0, 2), (0, 4)])
    assert bridged > same_socket > cross_socket > 0
    assert pair_score(Board(2), 0, 1) == cross_socket  # NUMA not known: as far apart as two sockets


def test_on_a_switch_board_every_pair_has_the_same_link_term() -> None:
    board = switch_board()
    scores = {(a, b): pair_score(board, a, b) for a, b in combinations(range(8), 2)}
    # Only NUMA tells pairs apart: the link term is the same for every pair, so for every split.
    assert len(set(scores.values())) == 2
    a100 = bridged_a100()
    assert scores[(0, 1)] - scores[(0, 7)] == pair_score(a100, 0, 2) - pair_score(a100, 0, 4)


def test_links_between_islands_are_not_counted() -> None:
    mesh = hybrid_cube_mesh()
    assert pair_score(mesh, 0, 4) == pair_score(Board(8, (), mesh.numa), 0, 4)


def test_a_board_that_names_a_gpu_twice_or_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="at most once"):
        Board(4, ((0, 1), (1, 2)))
    with pytest.raises(ValueError, match="at most once"):
        Board(2, ((0, 2),))
    with pytest.raises(ValueError, match="numa lists 1 GPUs"):
        Board(2, (), (0,))


# -- determinism, required GPUs, edges ------------------------------------------------------------------


def test_the_same_request_in_any_order_gets_the_same_answer() -> None:
    mesh = hybrid_cube_mesh()
    answers = {best_effort(order, 3, mesh) for order in ([0, 1, 2, 3, 4, 5, 6, 7], [7, 6, 5, 4, 3, 2, 1, 0])}
    assert len(answers) == 1


def test_required_gpus_are_in_the_answer_with_their_best_partners() -> None:
    a100 = bridged_a100()
    assert best_effort(range(8), 2, a100, required=[5]) == (4, 5)
    assert best_effort(range(8), 4, a100, required=[1, 6]) == (0, 1, 6, 7)
    assert best_effort([0, 1, 2], 3, a100, required=[2]) == (0, 1, 2)


def test_asking_for_every_free_gpu_returns_them_all() -> None:
    assert best_effort([5, 3, 7], 3, bridged_a100()) == (3, 5, 7)


@pytest.mark.parametrize(
    ("free", "size", "required", "says"),
    [
        ([0, 1], 3, [], "only 2 are free"),
        ([0, 1], 0, [], "at least 1"),
        ([0, 1, 2], 2, [3], "not free"),
        ([0, 1, 2], 1, [0, 1], "do not fit"),
        ([0, 0, 1], 1, [], "repeat"),
        ([0, 9], 1, [], "not among the node's GPUs"),
    ],
)
def test_a_request_that_cannot_be_met_is_a_value_error(
    free: list[int], size: int, required: list[int], says: str
) -> None:
    with pytest.raises(ValueError, match=says):
        best_effort(free, size, bridged_a100(), required)


# -- the greedy choice past the bounds -------------------------------------------------------------------


def test_past_the_exact_limit_the_greedy_choice_still_takes_linked_gpus() -> None:
    count = allocator.EXACT_LIMIT + 8
    pairs = Board(count, tuple((i, i + 1) for i in range(0, count, 2)))
    free = [1, *range(4, count)]
    assert best_effort(free, 2, pairs) == (4, 5)
    assert {8, 9} <= set(best_effort(free, 3, pairs, required=[9]))
    board = Board(count, (tuple(range(8, 16)),))
    assert best_effort(range(count), 8, board) == tuple(range(8, 16))


def test_an_exact_search_over_budget_falls_back_to_the_greedy_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    a100 = bridged_a100()
    monkeypatch.setattr(allocator, "EXACT_BUDGET", 3)
    assert best_effort([1, 2, 3, 5, 6, 7], 2, a100) == (2, 3)
    assert best_effort(range(8), 4, a100, required=[0]) == (0, 1, 2, 3)


def test_numa_unknown_everywhere_still_gives_a_deterministic_answer() -> None:
    flat = Board(8)
    assert best_effort(range(8), 3, flat) == (0, 1, 2)
