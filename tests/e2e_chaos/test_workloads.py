"""The workload stream: seeded arrivals of every kind, and the manifests Kueue receives."""

from __future__ import annotations

from e2e.chaos.workloads import Products, job_manifest, pod_manifest, stream

PRODUCTS = Products({"H100": 8, "A100": 8, "T4": 4}, {"H100": 8, "A100": 4, "T4": 4})


def test_the_stream_is_seeded_and_holds_every_kind() -> None:
    arrivals = stream(1, 600, PRODUCTS)
    assert arrivals == stream(1, 600, PRODUCTS)
    assert {spec.kind for _, spec in arrivals} == {"gang", "whole-node", "small", "partial", "plain-pod"}
    assert all(0 <= t < 600 for t, _ in arrivals)
    assert len({spec.name for _, spec in arrivals}) == len(arrivals)


def test_gangs_and_whole_nodes_ask_only_for_products_with_eight_gpu_nodes() -> None:
    for _, spec in stream(2, 900, PRODUCTS):
        if spec.kind in ("gang", "whole-node", "partial"):
            assert spec.demand.product in ("H100", "A100")
            assert spec.demand.pods <= PRODUCTS.nodes[spec.demand.product]


def test_a_partial_job_carries_its_minimum_and_a_gang_its_required_level() -> None:
    arrivals = [spec for _, spec in stream(4, 1800, PRODUCTS)]
    partial = next(s for s in arrivals if s.kind == "partial")
    job = job_manifest(partial, "lq")
    assert job["metadata"]["annotations"]["kueue.x-k8s.io/job-min-parallelism"] == "2"
    assert job["spec"]["parallelism"] == 4 and job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "lq"
    ranked = next(s for s in arrivals if s.kind == "gang" and s.demand.level)
    template = job_manifest(ranked, "lq")["spec"]["template"]
    assert template["metadata"]["annotations"]["optsched.io/required-topology"] == ranked.demand.level
    assert template["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": ranked.demand.product}
    limits = template["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"nvidia.com/gpu": str(ranked.demand.gpus)}


def test_a_plain_pod_is_queued_by_its_own_label() -> None:
    spec = next(s for _, s in stream(1, 900, PRODUCTS) if s.plain_pod)
    manifest = pod_manifest(spec, "lq")
    assert manifest["kind"] == "Pod" and manifest["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "lq"
    assert manifest["metadata"]["annotations"]["e2e.optsched.io/run-duration"] == f"{spec.run_seconds}s"
