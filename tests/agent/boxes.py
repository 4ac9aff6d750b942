"""Small GPU boxes as discoveries, the shapes the allocation tests need."""

from __future__ import annotations

from collections.abc import Sequence

from optsched.agent.devices import Discovery, GpuDevice, NvLink


def box(
    count: int,
    links: Sequence[tuple[int, int, int]] = (),
    switch: Sequence[int] = (),
    numa: Sequence[int | None] | None = None,
    node: str = "n1",
) -> Discovery:
    gpus = tuple(
        GpuDevice(
            index=i,
            minor=i,
            uuid=f"GPU-{node}-{i}",
            pci_bus_id=f"00000000:{0x18 + i:02X}:00.0",
            product="NVIDIA-TEST",
            memory_mib=81559,
            numa=numa[i] if numa is not None else None,
        )
        for i in range(count)
    )
    return Discovery(gpus, tuple(NvLink(a, b, n) for a, b, n in links), frozenset(switch))


TWO_SOCKETS = (0, 0, 0, 0, 1, 1, 1, 1)


def bridged_a100() -> Discovery:
    """8x A100 PCIe with NVLink bridges: pairs (0,1), (2,3), (4,5), (6,7), 12 links each."""
    return box(8, [(0, 1, 12), (2, 3, 12), (4, 5, 12), (6, 7, 12)], numa=TWO_SOCKETS)


def hybrid_cube_mesh() -> Discovery:
    """DGX-1 with V100 (six links a GPU): two fully linked quads, 0-3 and 4-7, and cross links 0-4 .. 3-7."""
    quad = [(0, 1, 1), (0, 2, 1), (0, 3, 2), (1, 2, 2), (1, 3, 1), (2, 3, 2)]
    cross = [(0, 4, 2), (1, 5, 2), (2, 6, 1), (3, 7, 1)]
    links = quad + [(a + 4, b + 4, n) for a, b, n in quad] + cross
    return box(8, links, numa=TWO_SOCKETS)


def switch_board(count: int = 8) -> Discovery:
    """An NVSwitch board: every GPU fully linked to every other."""
    return box(count, switch=range(count), numa=TWO_SOCKETS[:count] if count <= 8 else None)
