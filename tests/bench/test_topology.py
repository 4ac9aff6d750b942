"""The topology benchmark's cluster, job stream and metrics on a tiny instance."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optsched.bench.cli import main
from optsched.bench.topology import simulate
from optsched.bench.topology_cluster import RACK, generate_jobs, synthetic_cluster


def test_cluster_has_racks_blocks_and_islands() -> None:
    nodes = synthetic_cluster(120, seed=3)
    assert len(nodes) == 120
    assert {n.labels[RACK] for n in nodes}  # racks exist
    for node in nodes:
        covered = sorted(g for island in node.nvlink_islands for g in island)
        assert covered == list(range(node.gpu_count))
    assert synthetic_cluster(120, seed=3) == nodes


def test_jobs_fit_the_cluster_and_arrive_in_order() -> None:
    jobs = generate_jobs(capacity_gpus=512, count=200, load=1.0, seed=1)
    assert [j.arrival for j in jobs] == sorted(j.arrival for j in jobs)
    assert all(j.total_gpus <= 512 // 4 or j.pods == 2 for j in jobs)
    assert any(j.is_gang for j in jobs) and any(not j.is_gang for j in jobs)


@pytest.mark.parametrize("policy", ["bestfit", "tas"])
def test_simulation_metrics_are_consistent(policy: str) -> None:
    nodes = synthetic_cluster(36, seed=2)
    jobs = generate_jobs(sum(n.gpu_count for n in nodes), 24, 1.2, seed=2)
    result = simulate(policy, nodes, jobs, seed=2, time_limit_s=0.5)
    summary = result.summary()
    admitted = len(result.job_wait)
    assert admitted + result.unfinished == len(jobs)
    assert all(0.0 <= v <= 100.0 + 1e-9 for v in result.allocated_pct)
    assert result.nvlink_hits <= result.nvlink_eligible
    assert all(r >= 1 for r in result.gang_racks) and all(b >= 1 for b in result.gang_blocks)
    assert all(w >= 0 for w in result.job_wait)
    assert summary["gpus_allocated_pct_mean"] > 0
    assert result.invalid_plans == 0
    assert 0 <= result.avoidable_splits <= result.nvlink_eligible


def test_topology_command_writes_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "topology",
            "--nodes",
            "36",
            "--jobs",
            "12",
            "--policies",
            "bestfit,fgd",
            "--out",
            str(tmp_path),
            "--no-progress",
            "--no-plots",
        ]
    )
    assert code == 0
    assert "**fgd**" in capsys.readouterr().out
    data = json.loads((tmp_path / "topology-results.json").read_text())
    assert {r["policy"] for r in data["results"]} == {"bestfit", "fgd"}
