from __future__ import annotations

from prometheus_client import generate_latest

from optsched.controller.metrics import Metrics
from optsched.model.plan import Plan, PlanStatus, PlanSummary, ProductSummary


def test_plan_figures_are_exported():
    metrics = Metrics()
    plan = Plan(
        status=PlanStatus.FEASIBLE,
        gap=0.02,
        solve_seconds=1.5,
        summary=PlanSummary(
            gpus_total=64,
            gpus_allocated_after=40,
            multi_gpu_pods=4,
            multi_gpu_pods_in_one_island=3,
            by_product=[
                ProductSummary(
                    product="H100",
                    gpus_total=64,
                    gpus_free_before=64,
                    gpus_free_after=24,
                    fragmentation_before=0,
                    fragmentation_after=2.5,
                )
            ],
        ),
    )
    metrics.observe_plan(plan)
    metrics.observe_deferrals(["QuotaExhausted", "QuotaExhausted", "TopologyUnsatisfiable"])
    metrics.observe_deferrals(["TopologyUnsatisfiable"])
    text = generate_latest(metrics.registry).decode()
    assert 'optsched_plan_status{status="FEASIBLE"} 1.0' in text
    assert 'optsched_plan_status{status="OPTIMAL"} 0.0' in text
    assert "optsched_solve_gap 0.02" in text
    assert "optsched_gpus_allocated 40.0" in text
    assert "optsched_nvlink_island_hit_ratio 0.75" in text
    assert 'optsched_fragmentation_gpus{product="H100"} 2.5' in text
    assert 'optsched_workloads_deferred{reason="QuotaExhausted"} 0.0' in text
    assert 'optsched_workloads_deferred{reason="TopologyUnsatisfiable"} 1.0' in text
