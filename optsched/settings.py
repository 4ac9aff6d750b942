"""Knobs of the optimizer, with defaults chosen for a planner that runs every few seconds.

Every module of the CP-SAT model (``optsched.solver.modules``) can be switched
off and weighted here, so an operator can say "topology does not matter on this
cluster" or "never move a planned pod" without touching code. The defaults aim
at a 1,000-node cluster planned in a few seconds on a small controller.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ModuleSettings(_Strict):
    """Switch and weight of one model module."""

    enabled: bool = True
    """Off removes the rule's limit or preference (:class:`ModuleSwitches` says what stays)."""
    weight: int = Field(default=1, ge=0)
    """Multiplies the module's objective terms inside its lexicographic stage."""


class TopologyWeights(_Strict):
    """How much each spanned domain costs inside the topology stage.

    A gang's pods talk to each other: crossing a block costs more bandwidth
    than crossing a rack, which costs more than crossing a node. The defaults
    make one extra rack cost as much as four extra nodes and one extra block as
    much as four extra racks, so the solver first keeps a gang in one block,
    then in one rack, then on few nodes.
    """

    node: int = Field(default=1, ge=0)
    rack: int = Field(default=4, ge=0)
    """Applied to every topology level between the coarsest and the node level."""
    block: int = Field(default=16, ge=0)
    """Applied to the coarsest topology level."""
    preferred_factor: int = Field(default=4, ge=1)
    """Extra multiplier on the level a PodSet names as preferred topology."""
    nvlink_pod: int = Field(default=8, ge=0)
    """Cost per GPU of a pod whose GPUs span NVLink islands although one island could hold it."""


class AgeingSettings(_Strict):
    """Ageing bonus inside a priority level, so an old large gang cannot starve.

    Each admitted GPU counts ``1 + min(cap, per_hour * hours waited)``; hours are
    measured against the newest pending workload, so the bonus only reorders
    work that really has waited. Five percent per hour with a 50% cap means a
    gang waiting ten hours outweighs 1.5x its size in fresh small jobs.
    """

    per_hour: float = Field(default=0.05, ge=0.0)
    cap: float = Field(default=0.5, ge=0.0)


class ModuleSwitches(_Strict):
    """One entry per switchable rule of the model; see ``optsched.solver.modules``.

    Candidate nodes, node capacity and one flavor per PodSet have no switch: a
    plan that ignores what a node has, or names two flavors for one PodSet, is
    never valid. Required topology and ``nvlink: required`` are the job's own
    demands and stay hard when the topology or NVLink preference is switched
    off; switching gangs off admits partial gangs instead.
    """

    gang: ModuleSettings = ModuleSettings()
    """Off admits partial gangs (only for experiments: Kueue admits workloads whole)."""
    quota: ModuleSettings = ModuleSettings()
    product: ModuleSettings = ModuleSettings()
    nvlink: ModuleSettings = ModuleSettings()
    topology: ModuleSettings = ModuleSettings()
    packing: ModuleSettings = ModuleSettings()
    stability: ModuleSettings = ModuleSettings()
    mig: ModuleSettings = ModuleSettings()
    """MIG layouts chosen with the plan; off keeps every layout as it is (existing instances are used)."""


class Settings(_Strict):
    """Solver settings; every default is documented on its field."""

    time_limit_s: float = Field(default=10.0, gt=0.0)
    """CP-SAT search budget of one plan, split over the lexicographic stages (most to admission).

    It starts once the model is built: the greedy BestFit hint, model building
    and plan assembly come on top and are timed in the plan's solver log.
    """
    deterministic_time: bool = False
    """Count ``time_limit_s`` in CP-SAT's deterministic time instead of wall-clock seconds.

    With ``workers=1`` the same snapshot then gives the same plan however
    loaded the machine is (benchmarks use it); the wall-clock time of a plan
    varies instead, capped at a few times the budget.
    """
    workers: int = Field(default=0, ge=0)
    """CP-SAT search workers; 0 uses every core. Tests use 1 for determinism."""
    random_seed: int = Field(default=0, ge=0, le=2**31 - 1)
    """CP-SAT random seed; with ``workers=1`` the same snapshot gives the same plan."""
    window_factor: float = Field(default=2.0, gt=0.0)
    """Plan jointly the queue head whose GPU demand reaches this multiple of free GPUs.

    Two times free capacity leaves the optimizer real choice (it can skip a
    gang that does not fit and take later work) while keeping the model small;
    workloads past the window are deferred as "beyond the planning window".
    """
    min_window: int = Field(default=200, ge=1)
    """The window always holds at least this many workloads (small queues are planned whole)."""
    candidates_per_podset: int = Field(default=48, ge=1)
    """At most this many candidate nodes per PodSet (plus the greedy plan's and the previous plan's)."""
    candidate_capacity_factor: float = Field(default=3.0, gt=0.0)
    """Candidate nodes of a PodSet must be able to host its gang this many times over."""
    min_candidates: int = Field(default=8, ge=1)
    """Every PodSet keeps at least this many candidates where that many are eligible."""
    mig_changeable_gpus: int = Field(default=32, ge=0)
    """At most this many MIG GPUs may get a new layout in one plan: those whose new layouts could serve
    the most of the queue's MIG demand. Each change restarts its node's device plugin, and the layout
    model grows with every GPU it may change; the others keep their layouts this cycle."""
    neighbourhood_search: bool = True
    """After each stage's solve of the whole model, spend half its share on solves a few racks at a time.

    On large clusters the whole model barely moves from its start in a short
    budget; small neighbourhoods (the racks a split gang spans, then racks in
    pairs) are solved to optimality quickly. Off: every stage is one solve.
    """
    admission_share: float = Field(default=0.5, gt=0.0, lt=1.0)
    """Fraction of the time limit for the priority/admission stages; the quality stages get the rest.

    Half and half: on large clusters the admission stages usually start from a
    greedy plan that is already close to optimal, while topology and packing
    need search time to improve at all. Time admission does not use passes on.
    """
    stage_tolerance: float = Field(default=0.0, ge=0.0, lt=1.0)
    """Relative slack when fixing a quality stage (topology, packing) before the next one."""
    force_fallback: bool = False
    """Skip CP-SAT and return the greedy BestFit plan with status FALLBACK."""
    extended_resource_toleration: bool = True
    """Plan as if the cluster runs Kubernetes' ExtendedResourceToleration admission plugin.

    The plugin gives a pod that requests an extended resource (``nvidia.com/gpu``,
    ``nvidia.com/mig-1g.10gb``, ...) a toleration of ``NoSchedule`` taints with
    that key. GKE, among others, taints GPU nodes ``nvidia.com/gpu`` and relies on
    it, so the Workload templates Kueue holds never carry the toleration. Off:
    only the tolerations written in the template (and the flavor's) count, for a
    cluster whose API server does not run the plugin.
    """
    topology_levels: tuple[str, ...] | None = None
    """Override the snapshot's default topology levels (coarsest first) where no Topology applies."""
    topology: TopologyWeights = TopologyWeights()
    ageing: AgeingSettings = AgeingSettings()
    modules: ModuleSwitches = ModuleSwitches()
    log_search: bool = False
    """Print CP-SAT's search log (for tuning; the plan keeps a short log either way)."""
