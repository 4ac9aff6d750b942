"""The table view: what a person reads first after ``optsched plan``.

Header (status, policy, time, gap, objective per stage), then what is
admitted and where, then what waits and why in plain words, then the MIG
layout changes the plan makes (if any), then how the cluster looks before
and after. Plain aligned text; colour only on a TTY.
"""

from __future__ import annotations

from optsched.model.plan import Plan, PlanStatus, WorkloadDecision
from optsched.model.snapshot import Snapshot, Workload
from optsched.render.facts import (
    eligibility_lines,
    enforcement_text,
    needs_text,
    node_groups,
    pods_by_gpus,
    workloads_by_key,
)
from optsched.render.mig import MIG_HEADERS, change_rows
from optsched.render.text import (
    compact_nodes,
    fmt_gpus,
    fmt_seconds,
    fmt_share,
    format_table,
    paint,
    wrap_tokens,
)

PLACEMENT_WIDTH = 56
MIN_TEXT_WIDTH = 40
DEFAULT_WIDTH = 120
"""Line width the free-text columns wrap to when the terminal's width is not known."""

_STATUS_STYLE = {
    PlanStatus.OPTIMAL: "green",
    PlanStatus.FEASIBLE: "green",
    PlanStatus.HEURISTIC: "cyan",
    PlanStatus.FALLBACK: "yellow",
    PlanStatus.EMPTY: "dim",
}


def _wrap_words(text: str, width: int) -> str:
    return wrap_tokens(text.split(), width)


def _header(plan: Plan, color: bool) -> list[str]:
    status = paint(plan.status.value, _STATUS_STYLE.get(plan.status, "bold"), color)
    parts = [f"status {status}", f"policy {plan.policy}", f"solve {fmt_seconds(plan.solve_seconds)}"]
    if plan.gap is not None:
        parts.append(f"gap {100 * plan.gap:.2f}%")
    if plan.bound is not None:
        parts.append(f"bound {plan.bound:g}")
    lines = [paint("optsched plan", "bold", color) + "  " + "  ".join(parts)]
    if plan.objective:
        stages = ", ".join(f"{name} {value:g}" for name, value in plan.objective.items())
        lines.append(f"objective (highest stage first): {stages}")
    return lines


def _placement(decision: WorkloadDecision, workload: Workload | None) -> str:
    """Nodes and GPU indices, then the nodes whose new MIG layout the pods wait for."""
    text = wrap_tokens(compact_nodes(node_groups(decision, workload)), PLACEMENT_WIDTH) or "-"
    if decision.waits_for_layout:
        text += "\n" + wrap_tokens(
            ["waits for the MIG layout on", *decision.waits_for_layout], PLACEMENT_WIDTH
        )
    return text


def _admitted_rows(plan: Plan, by_key: dict[str, Workload]) -> list[list[str]]:
    rows = []
    for decision in plan.admitted:
        workload = by_key.get(decision.name)
        flavors = sorted({ps.flavor for ps in decision.pod_sets if ps.flavor})
        rows.append(
            [
                decision.name,
                str(decision.priority),
                pods_by_gpus(decision, workload),
                _placement(decision, workload),
                ",".join(flavors) or "-",
                enforcement_text(decision),
            ]
        )
    return rows


DEFERRED_HEADERS = ["WORKLOAD", "PRIO", "PODS x GPUS", "NEEDS", "REASON"]


def _deferred_rows(
    plan: Plan, by_key: dict[str, Workload], *, explain: bool, color: bool, width: int
) -> list[list[str]]:
    """Deferred workloads; the reason column wraps to whatever room the other columns leave."""
    fixed: list[list[str]] = []
    for decision in plan.deferred:
        workload = by_key.get(decision.name)
        needs = needs_text(workload) if workload is not None else "?"
        fixed.append([decision.name, str(decision.priority), pods_by_gpus(decision, workload), needs])
    used = 2 + sum(
        max(len(h), *(len(row[i]) for row in fixed)) + 2 for i, h in enumerate(DEFERRED_HEADERS[:4])
    )
    reason_width = max(MIN_TEXT_WIDTH, width - used)
    rows = []
    for decision, row in zip(plan.deferred, fixed, strict=True):
        reasons = [r.message for r in decision.reasons] or ["no reason recorded"]
        shown = reasons if explain else reasons[:1]
        text = "\n".join(_wrap_words(r, reason_width) for r in shown)
        if not explain and len(reasons) > 1:
            text += f"\n(+{len(reasons) - 1} more; --explain shows all)"
        rows.append([paint(row[0], "yellow", color), *row[1:], text])
    return rows


def _summary(plan: Plan) -> list[str]:
    s = plan.summary
    rows = [
        ["GPUs free", f"{fmt_gpus(s.gpus_free_before)} -> {fmt_gpus(s.gpus_free_after)} of {s.gpus_total}"],
        ["GPUs admitted", f"{fmt_gpus(s.gpus_admitted)} in {s.pods_admitted} pods"],
        ["workloads", f"{s.workloads_admitted} admitted, {s.workloads_deferred} deferred"],
        ["fragmentation", f"{s.fragmentation_before:.2f} -> {s.fragmentation_after:.2f} GPUs (FGD)"],
        ["stranded GPUs", f"{s.stranded_gpus_before} -> {s.stranded_gpus_after}"],
        [
            "NVLink one-island",
            fmt_share(s.multi_gpu_pods_in_one_island, s.multi_gpu_pods) + " multi-GPU pods",
        ],
        ["racks per gang", f"{s.racks_per_gang:.2f}" if s.workloads_admitted else "n/a"],
        ["enforced GPUs", _enforcement_summary(s.enforcement)],
    ]
    out = [format_table(["", ""], rows).split("\n", 1)[1]]
    if len(s.by_product) > 1:
        product_rows = [
            [
                p.product,
                str(p.gpus_total),
                f"{fmt_gpus(p.gpus_free_before)} -> {fmt_gpus(p.gpus_free_after)}",
                f"{p.fragmentation_before:.2f} -> {p.fragmentation_after:.2f}",
            ]
            for p in s.by_product
        ]
        out.append("")
        out.append(format_table(["PRODUCT", "GPUS", "FREE", "FRAGMENTATION"], product_rows, right=(1,)))
    return out


def _enforcement_summary(counts: dict[str, int]) -> str:
    """``dra 4, predicted 3, none 1 pods``: how the admitted pods' GPUs are enforced."""
    shown = [f"{value} {n}" for value, n in counts.items() if n]
    return ", ".join(shown) + " pods" if shown else "n/a"


def _why_lines(plan: Plan, width: int) -> list[str]:
    """Per workload: the policy's reasons and which nodes were out of reach and why."""
    lines = ["WHY (per workload: reasons, then nodes excluded before counting free capacity)"]
    for decision in plan.workloads:
        lines.append(f"  {decision.name}  {decision.decision}")
        for reason in decision.reasons:
            first, *rest = _wrap_words(reason.message, max(MIN_TEXT_WIDTH, width - 6)).split("\n")
            lines += [f"    {first}", *(f"      {line}" for line in rest)]
        lines += [f"    {line}" for line in eligibility_lines(decision)]
    return lines


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


def _stage_lines(plan: Plan) -> list[str]:
    lines = ["SOLVER STAGES"]
    if plan.objective:
        width = max(len(k) for k in plan.objective)
        lines += [f"  {name.ljust(width)}  {value:g}" for name, value in plan.objective.items()]
    else:
        lines.append("  (this policy reports no stage objectives)")
    lines += [f"  {line}" for line in plan.solver_log]
    return lines


def render_table(
    snapshot: Snapshot,
    plan: Plan,
    *,
    explain: bool = False,
    color: bool = False,
    width: int = DEFAULT_WIDTH,
) -> str:
    """The human view of a plan; ``explain`` adds reasons, excluded-node counts and stages.

    ``width`` is the line length free text (deferral reasons) wraps to; the CLI
    passes the terminal's width.
    """
    by_key = workloads_by_key(snapshot)
    out = _header(plan, color)
    admitted = plan.admitted
    gpus = sum(w.gpus for w in admitted)
    out += [
        "",
        paint(f"ADMITTED ({_plural(len(admitted), 'workload')}, {fmt_gpus(gpus)} GPUs)", "bold", color),
    ]
    if admitted:
        out.append(
            format_table(
                ["WORKLOAD", "PRIO", "PODS x GPUS", "NODES[GPU INDICES]", "FLAVOR", "ENFORCED"],
                _admitted_rows(plan, by_key),
                right=(1,),
            )
        )
    else:
        out.append("  (none)")
    deferred = plan.deferred
    out += ["", paint(f"DEFERRED ({_plural(len(deferred), 'workload')})", "bold", color)]
    if deferred:
        out.append(
            format_table(
                DEFERRED_HEADERS,
                _deferred_rows(plan, by_key, explain=explain, color=color, width=width),
                right=(1, 3),
            )
        )
    else:
        out.append("  (none)")
    if plan.mig_changes:
        title = f"MIG LAYOUT CHANGES ({_plural(len(plan.mig_changes), 'GPU')})"
        out += ["", paint(title, "bold", color)]
        out.append(format_table(MIG_HEADERS, change_rows(snapshot, plan), right=(1,)))
    out += ["", paint("SUMMARY (before -> after)", "bold", color), *_summary(plan)]
    if explain:
        out += ["", *_why_lines(plan, width), "", *_stage_lines(plan)]
    warnings = [*snapshot.warnings, *(w for w in plan.warnings if w not in snapshot.warnings)]
    if warnings:
        out += ["", paint("WARNINGS", "bold", color)]
        out += [paint(f"  ! {w}", "yellow", color) for w in warnings]
    return "\n".join(out) + "\n"
