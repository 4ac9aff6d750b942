"""The plan: a value that says what to admit, where, and why the rest waits.

Field names serialise in camelCase: this is the document ``optsched plan
--format json`` prints (see docs/plan-format.md).
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from optsched.model.mig import MigChange
from optsched.model.placement import PodPlacement
from optsched.model.reasons import Reason


class PlanModel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)


class PlanStatus(StrEnum):
    OPTIMAL = "OPTIMAL"
    FEASIBLE = "FEASIBLE"
    FALLBACK = "FALLBACK"
    """The optimizer returned the greedy BestFit plan (no solver solution in time, or the solver is off)."""
    HEURISTIC = "HEURISTIC"
    """A baseline policy produced the plan on purpose."""
    EMPTY = "EMPTY"
    """Nothing was pending."""


class Decision(StrEnum):
    ADMIT = "admit"
    DEFER = "defer"


class FlavorEligibility(PlanModel):
    """How many nodes one PodSet may use in one flavor, and which node filter rules out the others.

    Every node is either eligible or counted under the first filter it fails,
    so ``eligible`` plus the excluded counts is the number of nodes.
    """

    pod_set: str
    flavor: str | None = None
    eligible: int
    excluded: dict[str, int] = Field(default_factory=dict)
    """Node filter (in words, e.g. ``nodeSelector nvidia.com/gpu.product=Tesla-T4``) -> nodes it excludes."""
    admission_tolerated: dict[str, int] = Field(default_factory=dict)
    """Taint key -> eligible nodes whose taint only the toleration ExtendedResourceToleration adds passes."""


class PodSetPlacement(PlanModel):
    name: str
    flavor: str | None = None
    pods: list[PodPlacement] = Field(default_factory=list)


class WorkloadDecision(PlanModel):
    name: str
    """``namespace/name``."""
    decision: Decision
    priority: int = 0
    gpus: float = 0.0
    """GPUs the admitted pods take (shares counted by fraction)."""
    reasons: list[Reason] = Field(default_factory=list)
    """Why it waits, binding constraint first (empty for an admitted workload)."""
    pod_sets: list[PodSetPlacement] = Field(default_factory=list)
    eligibility: list[FlavorEligibility] = Field(default_factory=list)
    """Per PodSet and allowed flavor: the node-filter diagnosis behind the reasons."""
    waits_for_layout: list[str] = Field(default_factory=list)
    """Nodes whose planned MIG layout change this admission needs: its pods start once the node
    advertises the new instances."""


class ProductSummary(PlanModel):
    product: str
    gpus_total: int
    gpus_free_before: float
    gpus_free_after: float
    fragmentation_before: float
    fragmentation_after: float


class PlanSummary(PlanModel):
    gpus_total: int = 0
    gpus_allocated_before: float = 0.0
    gpus_free_before: float = 0.0
    gpus_allocated_after: float = 0.0
    gpus_free_after: float = 0.0
    gpus_admitted: float = 0.0
    fragmentation_before: float = 0.0
    """FGD fragmentation (GPUs) of the free capacity against the pending queue's shapes."""
    fragmentation_after: float = 0.0
    stranded_gpus_before: int = 0
    """Whole free GPUs no pending shape can use."""
    stranded_gpus_after: int = 0
    workloads_admitted: int = 0
    workloads_deferred: int = 0
    pods_admitted: int = 0
    multi_gpu_pods: int = 0
    multi_gpu_pods_in_one_island: int = 0
    racks_per_gang: float = 0.0
    enforcement: dict[str, int] = Field(default_factory=dict)
    """Pods of admitted workloads per enforcement (``dra``, ``predicted``, ``none``)."""
    by_product: list[ProductSummary] = Field(default_factory=list)


class Plan(PlanModel):
    status: PlanStatus
    policy: str = "optimizer"
    solve_seconds: float = 0.0
    objective: dict[str, float] = Field(default_factory=dict)
    """Per lexicographic stage, highest first."""
    bound: float | None = None
    """Best bound on the first (admitted-work) stage."""
    gap: float | None = None
    """Relative gap of the first stage: (bound - value) / bound."""
    workloads: list[WorkloadDecision] = Field(default_factory=list)
    mig_changes: list[MigChange] = Field(default_factory=list)
    """GPUs whose MIG layout the plan changes, by node and GPU index."""
    summary: PlanSummary = Field(default_factory=PlanSummary)
    warnings: list[str] = Field(default_factory=list)
    solver_log: list[str] = Field(default_factory=list)

    def decision(self, name: str) -> WorkloadDecision | None:
        return next((w for w in self.workloads if w.name == name), None)

    @property
    def admitted(self) -> list[WorkloadDecision]:
        return [w for w in self.workloads if w.decision == Decision.ADMIT]

    @property
    def deferred(self) -> list[WorkloadDecision]:
        return [w for w in self.workloads if w.decision == Decision.DEFER]

    def to_json_dict(self) -> dict[str, object]:
        return self.model_dump(mode="json", by_alias=True, exclude={"solver_log"})
