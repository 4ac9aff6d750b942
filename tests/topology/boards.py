"""Small GPU boards, the shapes the best-effort tests need."""

from __future__ import annotations

from optsched.topology.best_effort import Board

TWO_SOCKETS = (0, 0, 0, 0, 1, 1, 1, 1)


def bridged_a100() -> Board:
    """8x A100 PCIe with NVLink bridges: islands (0,1), (2,3), (4,5), (6,7), two sockets."""
    return Board(8, ((0, 1), (2, 3), (4, 5), (6, 7)), TWO_SOCKETS)


def hybrid_cube_mesh() -> Board:
    """DGX-1 with V100: the islands of its hybrid cube mesh, quads 0-3 and 4-7, two sockets."""
    return Board(8, ((0, 1, 2, 3), (4, 5, 6, 7)), TWO_SOCKETS)


def switch_board(count: int = 8) -> Board:
    """An NVSwitch board: one island of every GPU."""
    return Board(count, (tuple(range(count)),), TWO_SOCKETS[:count] if count <= 8 else ())
