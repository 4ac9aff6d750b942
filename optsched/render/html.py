"""The HTML report: the cluster as a picture, in one self-contained file.

Every node is drawn (grouped by its topology domain) with one cell per GPU:
grey fill is what already ran before the plan, coloured fill is what the plan
adds (a share fills part of the cell), NVLink islands are outlined and
unhealthy GPUs crossed out; each GPU whose MIG layout the plan changes is
drawn as its memory axis before and after. Hover titles name the pod and
workload. No
scripts or external assets, so the file can be mailed or attached to a ticket.
"""

from __future__ import annotations

from collections import defaultdict
from html import escape

from optsched.model.plan import Plan, WorkloadDecision
from optsched.model.snapshot import FULL_GPU_MILLI, Snapshot
from optsched.render.facts import (
    GpuCell,
    NodeCells,
    eligibility_lines,
    group_key,
    node_groups,
    occupancy,
    pods_by_gpus,
    workloads_by_key,
)
from optsched.render.mig import MIG_CSS, mig_changes_html
from optsched.render.text import compact_nodes, fmt_gpus, fmt_seconds, fmt_share

CELL_W = 22
CELL_H = 30
CELL_GAP = 3
ISLAND_GAP = 9
PAD = 4
LABEL_H = 12

PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#bcbd22",
    "#3b5bdb",
    "#e8590c",
    "#087f5b",
)

CSS = """
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px; color: #222; }
h1 { font-size: 20px; margin: 0 0 12px; } h2 { font-size: 16px; margin: 28px 0 8px; }
h3 { font-size: 13px; margin: 14px 0 6px; color: #555; font-weight: 600; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; }
.card { border: 1px solid #ddd; border-radius: 6px; padding: 8px 12px; min-width: 120px; }
.card b { display: block; font-size: 18px; } .card span { color: #666; font-size: 12px; }
.domain { display: flex; flex-wrap: wrap; gap: 10px; }
.node { border: 1px solid #ddd; border-radius: 6px; padding: 6px 8px; }
.node .name { font: 12px ui-monospace, Menlo, monospace; }
.node .meta { color: #777; font-size: 11px; }
.node.cpu { opacity: .7; }
svg rect.gpu { fill: #fff; stroke: #aaa; }
svg rect.existing { fill: #9e9e9e; }
svg rect.island { fill: none; stroke: #4c6ef5; stroke-width: 1.5; }
svg line.bad { stroke: #c92a2a; stroke-width: 2; }
svg text { font: 9px ui-monospace, monospace; fill: #666; }
table { border-collapse: collapse; }
td, th { padding: 3px 10px; border-bottom: 1px solid #eee; text-align: left; vertical-align: top; }
th { color: #555; font-weight: 600; } td.num { text-align: right; }
.sw { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 6px; }
.legend { color: #555; font-size: 12px; margin-bottom: 8px; } .legend .sw { vertical-align: -1px; }
.mono { font-family: ui-monospace, Menlo, monospace; font-size: 12px; }
.warn { color: #a61e4d; }
"""


def _colours(plan: Plan) -> dict[str, str]:
    return {d.name: PALETTE[i % len(PALETTE)] for i, d in enumerate(plan.admitted)}


def _cell_title(node: str, cell: GpuCell) -> str:
    parts = [f"{node} GPU {cell.index}"]
    if not cell.healthy:
        parts.append("unhealthy: never used")
    if cell.existing_milli:
        parts.append(f"in use before: {cell.existing_milli / 10:.0f}%")
    parts += [f"planned: {who}" for who in cell.planned_by]
    if cell.healthy and not cell.existing_milli and not cell.planned_by:
        parts.append("free")
    return "\n".join(parts)


def _gpu_cell(x: int, y: int, node: str, cell: GpuCell, colours: dict[str, str]) -> str:
    out = [f"<g><title>{escape(_cell_title(node, cell))}</title>"]
    out.append(f'<rect class="gpu" x="{x}" y="{y}" width="{CELL_W}" height="{CELL_H}" rx="2"/>')
    bottom = y + CELL_H
    existing = round(CELL_H * min(cell.existing_milli, FULL_GPU_MILLI) / FULL_GPU_MILLI)
    if existing:
        bottom -= existing
        out.append(f'<rect class="existing" x="{x}" y="{bottom}" width="{CELL_W}" height="{existing}"/>')
    if cell.planned_by:
        share = min(cell.planned_milli, FULL_GPU_MILLI - min(cell.existing_milli, FULL_GPU_MILLI))
        height = max(1, round(CELL_H * share / FULL_GPU_MILLI))
        owner = cell.planned_by[0].split(" ", 1)[0]
        colour = colours.get(owner, "#1f77b4")
        out.append(
            f'<rect class="planned" x="{x}" y="{bottom - height}" width="{CELL_W}" height="{height}" '
            f'fill="{colour}"/>'
        )
    if not cell.healthy:
        out.append(
            f'<line class="bad" x1="{x + 3}" y1="{y + 3}" x2="{x + CELL_W - 3}" y2="{y + CELL_H - 3}"/>'
        )
        out.append(
            f'<line class="bad" x1="{x + CELL_W - 3}" y1="{y + 3}" x2="{x + 3}" y2="{y + CELL_H - 3}"/>'
        )
    out.append(
        f'<text x="{x + CELL_W / 2:g}" y="{y + CELL_H + LABEL_H - 2}" '
        f'text-anchor="middle">{cell.index}</text>'
    )
    out.append("</g>")
    return "".join(out)


def _islands(cells: NodeCells) -> list[list[int]]:
    """Islands in drawing order; GPUs in no declared island are drawn alone."""
    count = len(cells.gpus)
    islands = [[i for i in island if 0 <= i < count] for island in cells.node.nvlink_islands]
    islands = [i for i in islands if i]
    seen = {i for island in islands for i in island}
    islands += [[i] for i in range(count) if i not in seen]
    return islands


def _node_svg(cells: NodeCells, colours: dict[str, str]) -> str:
    islands = _islands(cells)
    body: list[str] = []
    x = PAD
    y = PAD
    for island in islands:
        width = len(island) * CELL_W + (len(island) - 1) * CELL_GAP
        if cells.node.nvlink_islands:
            body.append(
                f'<rect class="island" x="{x - 2}" y="{y - 2}" width="{width + 4}" '
                f'height="{CELL_H + 4}" rx="4">'
                f"<title>NVLink island: GPUs {escape(','.join(map(str, island)))}</title></rect>"
            )
        for gpu in island:
            body.append(_gpu_cell(x, y, cells.node.name, cells.gpus[gpu], colours))
            x += CELL_W + CELL_GAP
        x += ISLAND_GAP - CELL_GAP
    total_w = x - ISLAND_GAP + CELL_GAP + PAD
    total_h = CELL_H + LABEL_H + 2 * PAD
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{total_w}" height="{total_h}" '
        f'viewBox="0 0 {total_w} {total_h}">' + "".join(body) + "</svg>"
    )


def _node_card(cells: NodeCells, colours: dict[str, str]) -> str:
    node = cells.node
    meta = []
    if node.gpu_count:
        product = node.gpu_product or "GPU"
        meta.append(f"{escape(product)} · {node.gpu_count} GPUs")
    else:
        meta.append("no GPUs")
    if cells.unknown_before:
        meta.append(f"{cells.unknown_before} in use, index unknown")
    if cells.unknown_planned:
        meta.append(f"+{cells.unknown_planned} planned, index left to the node")
    if not node.ready:
        meta.append("not Ready")
    if node.unschedulable:
        meta.append("cordoned")
    title = "\n".join(cells.planned_pods) if cells.planned_pods else "nothing planned here"
    picture = _node_svg(cells, colours) if node.gpu_count else ""
    css = "node" if node.gpu_count else "node cpu"
    return (
        f'<div class="{css}" title="{escape(title)}"><div class="name">{escape(node.name)}</div>'
        f'<div class="meta">{" · ".join(meta)}</div>{picture}</div>'
    )


def _cards(plan: Plan) -> str:
    s = plan.summary
    gap = f"{100 * plan.gap:.2f}%" if plan.gap is not None else "n/a"
    items = [
        (plan.status.value, f"policy {plan.policy}"),
        (fmt_seconds(plan.solve_seconds), f"solve time, gap {gap}"),
        (f"{fmt_gpus(s.gpus_admitted)}", f"GPUs admitted ({s.workloads_admitted} workloads)"),
        (f"{fmt_gpus(s.gpus_free_before)} → {fmt_gpus(s.gpus_free_after)}", f"GPUs free of {s.gpus_total}"),
        (f"{s.fragmentation_before:.2f} → {s.fragmentation_after:.2f}", "fragmentation (GPUs, FGD)"),
        (f"{s.stranded_gpus_before} → {s.stranded_gpus_after}", "stranded GPUs"),
        (fmt_share(s.multi_gpu_pods_in_one_island, s.multi_gpu_pods), "multi-GPU pods in one NVLink island"),
        (f"{s.racks_per_gang:.2f}", "racks per gang"),
    ]
    cards = "".join(
        f'<div class="card"><b>{escape(v)}</b><span>{escape(label)}</span></div>' for v, label in items
    )
    extra = []
    if plan.objective:
        stages = ", ".join(f"{name} {value:g}" for name, value in plan.objective.items())
        extra.append(f'<p class="legend">objective per stage, highest first: {escape(stages)}</p>')
    if s.by_product:
        extra.append(
            "<table><tr><th>product</th><th>GPUs</th><th>free before → after</th>"
            "<th>fragmentation before → after</th></tr>"
        )
        extra += [
            f'<tr><td>{escape(p.product)}</td><td class="num">{p.gpus_total}</td>'
            f"<td>{fmt_gpus(p.gpus_free_before)} → {fmt_gpus(p.gpus_free_after)}</td>"
            f"<td>{p.fragmentation_before:.2f} → {p.fragmentation_after:.2f}</td></tr>"
            for p in s.by_product
        ]
        extra.append("</table>")
    return f'<div class="cards">{cards}</div>' + "".join(extra)


def _waits(decision: WorkloadDecision) -> str:
    if not decision.waits_for_layout:
        return ""
    nodes = ", ".join(decision.waits_for_layout)
    return f'<div class="legend">waits for the MIG layout on {escape(nodes)}</div>'


def _tables(snapshot: Snapshot, plan: Plan, colours: dict[str, str]) -> str:
    by_key = workloads_by_key(snapshot)
    out = [f"<h2>Admitted ({len(plan.admitted)})</h2>"]
    if plan.admitted:
        out.append(
            "<table><tr><th>workload</th><th>priority</th><th>pods x GPUs</th>"
            "<th>nodes[GPU indices]</th><th>flavor</th></tr>"
        )
        for d in plan.admitted:
            flavors = ",".join(sorted({ps.flavor for ps in d.pod_sets if ps.flavor})) or "-"
            out.append(
                f'<tr><td><span class="sw" style="background:{colours[d.name]}"></span>{escape(d.name)}</td>'
                f'<td class="num">{d.priority}</td><td>{escape(pods_by_gpus(d, by_key.get(d.name)))}</td>'
                f'<td class="mono">{escape(" ".join(compact_nodes(node_groups(d, by_key.get(d.name)))))}'
                f"{_waits(d)}</td>"
                f"<td>{escape(flavors)}</td></tr>"
            )
        out.append("</table>")
    out.append(f"<h2>Deferred ({len(plan.deferred)})</h2>")
    if plan.deferred:
        out.append("<table><tr><th>workload</th><th>priority</th><th>pods x GPUs</th><th>reason</th></tr>")
        for d in plan.deferred:
            reasons = "<br>".join(escape(r.message) for r in d.reasons) or "no reason recorded"
            filters = "<br>".join(escape(line) for line in eligibility_lines(d))
            if filters:
                reasons += f'<div class="legend mono">{filters}</div>'
            out.append(
                f'<tr><td>{escape(d.name)}</td><td class="num">{d.priority}</td>'
                f"<td>{escape(pods_by_gpus(d, by_key.get(d.name)))}</td><td>{reasons}</td></tr>"
            )
        out.append("</table>")
    return "".join(out)


def render_html(snapshot: Snapshot, plan: Plan) -> str:
    """A standalone HTML page: summary cards, the cluster picture, and the decision tables."""
    colours = _colours(plan)
    domains: dict[tuple[str, ...], list[NodeCells]] = defaultdict(list)
    for cells in occupancy(snapshot, plan):
        domains[group_key(snapshot, cells.node)].append(cells)
    picture = []
    for key in sorted(domains):
        heading = " / ".join(key) or "nodes"
        picture.append(f'<h3>{escape(heading)}</h3><div class="domain">')
        picture.extend(_node_card(cells, colours) for cells in domains[key])
        picture.append("</div>")
    legend = (
        '<div class="legend"><span class="sw" style="background:#fff;border:1px solid #aaa"></span>free '
        '<span class="sw" style="background:#9e9e9e"></span>in use before the plan '
        '<span class="sw" style="background:#1f77b4"></span>planned (one colour per workload; a share fills '
        'part of the cell) <span class="sw" style="border:1.5px solid #4c6ef5"></span>NVLink island '
        '<span style="color:#c92a2a">✕</span> unhealthy</div>'
    )
    warnings = [*snapshot.warnings, *(w for w in plan.warnings if w not in snapshot.warnings)]
    warn_html = ""
    if warnings:
        warn_html = (
            "<h2>Warnings</h2><ul>"
            + "".join(f'<li class="warn">{escape(w)}</li>' for w in warnings)
            + "</ul>"
        )
    source = f" — {escape(snapshot.source)}" if snapshot.source else ""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>optsched plan{source}</title><style>{CSS}{MIG_CSS}</style></head><body>"
        f"<h1>optsched plan{source}</h1>{_cards(plan)}"
        f"<h2>Cluster</h2>{legend}{''.join(picture)}{mig_changes_html(snapshot, plan)}"
        f"{_tables(snapshot, plan, colours)}{warn_html}</body></html>\n"
    )
