"""MIG layout changes as the table and the HTML report show them.

A layout reads as its instances grouped by profile, largest first, each with
its starts on the 8-slice memory axis: ``3g.40gb@4 + 4x1g.10gb@0..3``. The
picture draws each changed GPU as that axis twice, before and after: every
instance a block from its start over the memory slices its profile occupies
(from the profile table), labelled with its profile; instances a running pod
holds are outlined, instances the change creates or destroys are shaded.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from html import escape

from optsched.mig.profiles import MigModel, model_for, models
from optsched.model.mig import MigChange, MigGpu, MigSlotView
from optsched.model.plan import Plan
from optsched.model.snapshot import Node, Snapshot

SLOT_W = 50
BAR_H = 20
ROW_GAP = 6
TAG_W = 46
AXIS_H = 12
DEFAULT_SLICES = 8

MIG_CSS = """
.migs { display: flex; flex-wrap: wrap; gap: 10px; }
svg rect.slot { fill: #fff; stroke: #ddd; }
svg rect.mig { fill: #d0ebff; stroke: #1c7ed6; }
svg rect.mig.new { fill: #b2f2bb; stroke: #2b8a3e; }
svg rect.mig.gone { fill: #f1f3f5; stroke: #adb5bd; stroke-dasharray: 3 2; }
svg rect.mig.inuse { stroke: #212529; stroke-width: 2.5; }
svg text.miglabel { fill: #222; font-size: 8px; }
"""

_COMPUTE = re.compile(r"^(\d+)g\.")


def _compute(profile: str) -> int:
    match = _COMPUTE.match(profile)
    return int(match.group(1)) if match else 0


def _runs(starts: Sequence[int]) -> str:
    """``[0, 1, 2, 3, 6]`` -> ``0..3,6``."""
    parts: list[str] = []
    ordered = sorted(starts)
    first = prev = ordered[0]
    for value in [*ordered[1:], None]:
        if value is not None and value == prev + 1:
            prev = value
            continue
        parts.append(str(first) if first == prev else f"{first}..{prev}")
        if value is not None:
            first = prev = value
    return ",".join(parts)


def layout_summary(layout: Iterable[MigSlotView] | Iterable[tuple[str, int]]) -> str:
    """A layout in one short phrase: ``3g.40gb@4 + 4x1g.10gb@0..3``; ``(empty)`` for no instance."""
    starts: dict[str, list[int]] = {}
    for item in layout:
        profile, start = (item.profile, item.start) if isinstance(item, MigSlotView) else item
        starts.setdefault(profile, []).append(start)
    if not starts:
        return "(empty)"
    order = sorted(starts, key=lambda p: (-_compute(p), p, min(starts[p])))
    parts = []
    for profile in order:
        count = len(starts[profile])
        parts.append(f"{'' if count == 1 else f'{count}x'}{profile}@{_runs(starts[profile])}")
    return " + ".join(parts)


def change_text(change: MigChange) -> str:
    """``7x1g.10gb@0..6 -> 3g.40gb@4 + 4x1g.10gb@0..3``."""
    return f"{layout_summary(change.from_)} -> {layout_summary(change.to)}"


def _gpu_of(snapshot: Snapshot, change: MigChange) -> tuple[Node | None, MigGpu | None]:
    node = snapshot.node(change.node)
    return (node, node.mig_gpu(change.gpu)) if node is not None else (None, None)


def _in_use(gpu: MigGpu | None) -> set[tuple[str, int]]:
    return {(i.profile, i.start) for i in gpu.in_use} if gpu is not None else set()


def waiting_on(plan: Plan) -> dict[str, list[str]]:
    """Node -> admitted workloads that start only once the node's new layout is there."""
    out: dict[str, list[str]] = {}
    for decision in plan.admitted:
        for node in decision.waits_for_layout:
            out.setdefault(node, []).append(decision.name)
    return out


MIG_HEADERS = ["NODE", "GPU", "LAYOUT (before -> after)", "KEPT IN USE", "WAITING"]


def change_rows(snapshot: Snapshot, plan: Plan) -> list[list[str]]:
    """One row per changed GPU: node, GPU index, the change, in-use instances it keeps, who waits."""
    waiting = waiting_on(plan)
    first: dict[str, int] = {}
    rows = []
    for change in plan.mig_changes:
        _, gpu = _gpu_of(snapshot, change)
        kept = sorted(_in_use(gpu), key=lambda x: (x[1], x[0]))
        who = "\n".join(waiting.get(change.node, [])) or "-"
        if change.node in first and who != "-":
            # Workloads wait for a node's layout, not one GPU's: named once per node.
            who = f"as GPU {first[change.node]}"
        first.setdefault(change.node, change.gpu)
        rows.append(
            [
                change.node,
                str(change.gpu),
                change_text(change),
                ", ".join(f"{p}@{s}" for p, s in kept) or "-",
                who,
            ]
        )
    return rows


def _model(node: Node | None, gpu: MigGpu | None) -> MigModel | None:
    if gpu is not None and gpu.model:
        found = next((m for m in models() if m.name == gpu.model), None)
        if found is not None:
            return found
    return model_for(node.product, node.gpu_memory_mib) if node is not None and node.product else None


def _block(x0: int, y: int, slot: MigSlotView, slices: int, css: str, title: str) -> str:
    x = x0 + slot.start * SLOT_W + 2
    width = max(1, slices * SLOT_W - 4)
    return (
        f"<g><title>{escape(title)}</title>"
        f'<rect class="{css}" x="{x}" y="{y + 2}" width="{width}" height="{BAR_H - 4}" rx="3"/>'
        f'<text class="miglabel" x="{x + width / 2:g}" y="{y + BAR_H / 2 + 3:g}" text-anchor="middle">'
        f"{escape(slot.profile)}</text></g>"
    )


def _bar(
    y: int,
    tag: str,
    layout: Sequence[MigSlotView],
    other: Sequence[MigSlotView],
    model: MigModel | None,
    in_use: set[tuple[str, int]],
) -> list[str]:
    """One memory axis: its slots, then each instance as a block over the slices it occupies."""
    axis = model.memory_slices if model is not None else DEFAULT_SLICES
    out = [f'<text x="0" y="{y + BAR_H / 2 + 3:g}">{tag}</text>']
    out += [
        f'<rect class="slot" x="{TAG_W + i * SLOT_W}" y="{y}" width="{SLOT_W}" height="{BAR_H}"/>'
        for i in range(axis)
    ]
    changed = "gone" if tag == "before" else "new"
    for slot in layout:
        profile = model.profile(slot.profile) if model is not None else None
        slices = profile.memory_slices if profile is not None else 1
        css = ["mig"]
        notes = [
            f"{slot.profile} at memory slice {slot.start} (slices {slot.start}..{slot.start + slices - 1})"
        ]
        if slot not in other:
            css.append(changed)
            notes.append("destroyed by the change" if changed == "gone" else "created by the change")
        if (slot.profile, slot.start) in in_use:
            css.append("inuse")
            notes.append("in use by a running pod")
        out.append(_block(TAG_W, y, slot, slices, " ".join(css), "\n".join(notes)))
    return out


def _change_svg(snapshot: Snapshot, change: MigChange) -> tuple[str, str]:
    node, gpu = _gpu_of(snapshot, change)
    model = _model(node, gpu)
    in_use = _in_use(gpu)
    axis = model.memory_slices if model is not None else DEFAULT_SLICES
    body = _bar(0, "before", change.from_, change.to, model, in_use)
    body += _bar(BAR_H + ROW_GAP, "after", change.to, change.from_, model, in_use)
    bottom = 2 * BAR_H + ROW_GAP + AXIS_H - 2
    body += [
        f'<text x="{TAG_W + i * SLOT_W + SLOT_W / 2:g}" y="{bottom}" text-anchor="middle">{i}</text>'
        for i in range(axis)
    ]
    width = TAG_W + axis * SLOT_W + 2
    height = 2 * BAR_H + ROW_GAP + AXIS_H
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}">' + "".join(body) + "</svg>"
    )
    return (model.name if model is not None else "unknown MIG model"), svg


def mig_changes_html(snapshot: Snapshot, plan: Plan) -> str:
    """The report's section on layout changes: one card per changed GPU; "" when the plan changes none."""
    if not plan.mig_changes:
        return ""
    waiting = waiting_on(plan)
    cards = []
    for change in plan.mig_changes:
        model_name, svg = _change_svg(snapshot, change)
        waits = waiting.get(change.node, [])
        note = f'<div class="meta">waiting: {escape(", ".join(waits))}</div>' if waits else ""
        cards.append(
            f'<div class="node"><div class="name">{escape(change.node)} GPU {change.gpu}</div>'
            f'<div class="meta">{escape(model_name)} · {escape(change_text(change))}</div>{note}{svg}</div>'
        )
    legend = (
        '<div class="legend">memory slices 0..7 of each GPU, before and after: '
        '<span class="sw" style="background:#d0ebff;border:1px solid #1c7ed6"></span>kept '
        '<span class="sw" style="background:#b2f2bb;border:1px solid #2b8a3e"></span>created '
        '<span class="sw" style="background:#f1f3f5;border:1px dashed #adb5bd"></span>destroyed '
        '<span class="sw" style="border:2.5px solid #212529"></span>in use by a running pod</div>'
    )
    return (
        f"<h2>MIG layout changes ({len(plan.mig_changes)})</h2>{legend}"
        f'<div class="migs">{"".join(cards)}</div>'
    )
