"""The side-by-side view of ``optsched plan --compare``: one column per policy.

Rows are the figures that tell policies apart on a GPU cluster: how much
work gets in, whether multi-GPU pods stay inside one NVLink island, how many
racks a gang spans, how usable the leftover capacity is, and (where a plan
changes MIG layouts) how many GPUs each policy reconfigures.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from optsched.model.plan import Plan
from optsched.render.text import fmt_gpus, fmt_seconds, format_table
from optsched.snapshot.kubeyaml import dump_yaml


@dataclass(frozen=True)
class PolicyResult:
    """One policy's plan on the shared snapshot, with wall time and any validation violations."""

    policy: str
    plan: Plan
    seconds: float
    violations: list[str] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return not self.violations


def _island_share(plan: Plan) -> str:
    s = plan.summary
    if not s.multi_gpu_pods:
        return "n/a"
    hit, total = s.multi_gpu_pods_in_one_island, s.multi_gpu_pods
    return f"{100 * hit / total:.0f}% ({hit}/{total})"


ROWS: tuple[str, ...] = (
    "status",
    "GPUs admitted",
    "workloads admitted",
    "pods in one NVLink island",
    "racks per gang",
    "stranded GPUs after",
    "fragmentation after",
    "time",
)


def _column(result: PolicyResult) -> list[str]:
    plan, s = result.plan, result.plan.summary
    status = plan.status.value if result.valid else "INVALID"
    return [
        status,
        fmt_gpus(s.gpus_admitted),
        f"{s.workloads_admitted}/{s.workloads_admitted + s.workloads_deferred}",
        _island_share(plan),
        f"{s.racks_per_gang:.2f}" if s.workloads_admitted else "n/a",
        str(s.stranded_gpus_after),
        f"{s.fragmentation_after:.2f}",
        fmt_seconds(result.seconds),
    ]


MIG_ROW = "MIG GPUs reconfigured"
"""Shown before ``time`` where some policy's plan changes a MIG layout."""


def render_compare_table(results: list[PolicyResult], *, source: str = "") -> str:
    columns = [_column(r) for r in results]
    rows = [[label, *(col[i] for col in columns)] for i, label in enumerate(ROWS)]
    if any(r.plan.mig_changes for r in results):
        rows.insert(len(rows) - 1, [MIG_ROW, *(str(len(r.plan.mig_changes)) for r in results)])
    head = f"optsched plan --compare{f'  {source}' if source else ''}"
    table = format_table(["", *(r.policy for r in results)], rows, right=range(1, len(results) + 1))
    notes = [
        "",
        "GPUs admitted counts shares by fraction; pods in one NVLink island is over multi-GPU pods;",
        "stranded GPUs are whole free GPUs no pending shape can use; fragmentation is FGD, in GPUs;",
        "time is the wall time of the whole policy run (model building and plan summary included).",
    ]
    if any(not r.valid for r in results):
        notes.append("INVALID: the policy's plan failed check_plan (details on stderr).")
    return "\n".join([head, "", table, *notes]) + "\n"


def compare_document(results: list[PolicyResult], *, source: str = "") -> dict[str, object]:
    """Machine-readable comparison: figures per policy plus each valid plan (docs/plan-format.md)."""
    policies = []
    for r in results:
        s = r.plan.summary
        policies.append(
            {
                "policy": r.policy,
                "status": r.plan.status.value,
                "valid": r.valid,
                "violations": r.violations,
                "seconds": round(r.seconds, 4),
                "gpusAdmitted": s.gpus_admitted,
                "workloadsAdmitted": s.workloads_admitted,
                "workloadsDeferred": s.workloads_deferred,
                "multiGpuPods": s.multi_gpu_pods,
                "multiGpuPodsInOneIsland": s.multi_gpu_pods_in_one_island,
                "racksPerGang": s.racks_per_gang,
                "strandedGpusAfter": s.stranded_gpus_after,
                "fragmentationAfter": s.fragmentation_after,
                "migGpusReconfigured": len(r.plan.mig_changes),
                "plan": r.plan.to_json_dict() if r.valid else None,
            }
        )
    return {"source": source, "policies": policies}


def render_compare_json(results: list[PolicyResult], *, source: str = "") -> str:
    return json.dumps(compare_document(results, source=source), indent=2) + "\n"


def render_compare_yaml(results: list[PolicyResult], *, source: str = "") -> str:
    return dump_yaml(compare_document(results, source=source))
