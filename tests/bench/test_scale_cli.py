"""``optsched bench scale``: the JSON schema, the figure, the classic queue, and bad input as exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optsched.bench.cli import main
from optsched.bench.scale import main as scale_main
from optsched.bench.scale_figures import Figures, Stage, stages
from optsched.bench.scale_report import METRICS, SeedRun
from optsched.model.plan import Plan, PlanStatus

SMALL = ["scale", "--nodes", "30", "--workloads", "24", "--policies", "bestfit,fgd", "--no-plots"]
POLICY_KEYS = {"gpusAdmitted", "racksPerGang", "nvlinkHit", "wallSeconds", "status", "gap"}


def test_json_has_the_documented_schema_per_seed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "scale.json"
    assert main([*SMALL, "--seeds", "1-2", "--json", str(out), "--no-progress"]) == 0
    documents = json.loads(out.read_text())
    assert isinstance(documents, list) and [d["seed"] for d in documents] == [1, 2]
    for doc in documents:
        assert {"nodes", "workloads", "seed", "bounds", "policies"} <= set(doc)
        assert (doc["nodes"], doc["workloads"]) == (30, 24)
        assert {"gpusAdmitted", "racksPerGang", "nvlinkHit"} <= set(doc["bounds"])
        assert set(doc["policies"]) == {"bestfit", "fgd"}
        for figures in doc["policies"].values():
            assert set(figures) >= POLICY_KEYS
            assert figures["gpusAdmitted"] <= doc["bounds"]["gpusAdmitted"]
    printed = capsys.readouterr().out
    assert "bound" in printed and "summary over 2 seeds" in printed


def test_one_seed_writes_one_object_and_the_figure(tmp_path: Path) -> None:
    out = tmp_path / "one.json"
    args = ["scale", "--nodes", "30", "--workloads", "24", "--policies", "bestfit"]
    assert main([*args, "--json", str(out), "--out", str(tmp_path)]) == 0
    assert json.loads(out.read_text())["seed"] == 1
    assert (tmp_path / "scale-contended-30n-24w.png").stat().st_size > 0


def test_deterministic_runs_give_the_same_figures(tmp_path: Path) -> None:
    args = ["scale", "--nodes", "24", "--workloads", "16", "--policies", "optimizer", "--no-plots"]
    figures = []
    for run in ("a", "b"):
        out = tmp_path / f"{run}.json"
        assert main([*args, "--deterministic", "--time-limit", "0.3", "--json", str(out)]) == 0
        doc = json.loads(out.read_text())["policies"]["optimizer"]
        figures.append({k: doc[k] for k in ("gpusAdmitted", "racksPerGang", "nvlinkHit", "status")})
    assert figures[0] == figures[1]


def test_classic_queue_is_still_there(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*SMALL, "--queue", "classic"]) == 0
    assert "(classic)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--seeds", "x"], "--seeds"),
        (["--policies", "nope"], "--policies"),
        (["--time-limit", "0"], "--time-limit"),
        (["--nodes", "0"], "--nodes"),
    ],
)
def test_bad_input_is_exit_2_with_the_option_named(
    extra: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for run in (main, lambda argv: scale_main(argv[1:])):
        assert run([*SMALL, *extra]) == 2
        err = capsys.readouterr().err
        assert named in err and "Traceback" not in err


def _figures(policy: str, gpus: float, racks: float, hit: float, bounds: tuple[float, float]) -> Figures:
    return Figures(
        policy=policy,
        gpus_admitted=gpus,
        workloads_admitted=1,
        racks_per_gang=racks,
        blocks_per_gang=None,
        nvlink_hit=hit,
        wall_seconds=0.0,
        solve_seconds=0.0,
        status="HEURISTIC",
        gap=None,
        invalid=0,
        racks_bound=bounds[0],
        blocks_bound=None,
        nvlink_bound=bounds[1],
    )


def test_closed_share_is_measured_from_the_best_greedy_to_the_bound() -> None:
    run = SeedRun(
        nodes=1,
        workloads=1,
        seed=1,
        queue="contended",
        free_gpus=120,
        demand_ratio=1.3,
        gpus_bound=120,
        policies=(
            _figures("optimizer", 110, 1.5, 0.9, (1.0, 1.0)),
            _figures("bestfit", 100, 2.0, 0.8, (1.5, 0.8)),
            _figures("fgd", 90, 2.5, 0.7, (1.0, 0.9)),
        ),
    )
    closed = {m.key: run.closed(m) for m in METRICS}
    assert closed["gpusAdmitted"] == pytest.approx(0.5)
    assert closed["racksPerGang"] == pytest.approx(0.5)
    assert closed["blocksPerGang"] is None  # nothing to compare
    assert closed["nvlinkHit"] == pytest.approx(0.5)


def test_stages_are_read_from_the_solver_log() -> None:
    plan = Plan(
        status=PlanStatus.FEASIBLE,
        solver_log=[
            "greedy BestFit hint in 0.10s",
            "stage priority:0: FEASIBLE value 90 bound 100 in 1.50s",
            "stage topology: OPTIMAL value -4 bound -4 in 0.20s",
        ],
    )
    read = stages(plan)
    assert read == (Stage("priority:0", "FEASIBLE", 90, 100, 1.5), Stage("topology", "OPTIMAL", -4, -4, 0.2))
    assert read[0].gap == pytest.approx(0.1) and read[1].gap == 0


def test_a_stage_without_a_bound_has_no_gap_and_writes_json_nulls() -> None:
    import json
    import math

    from optsched.bench.scale_figures import Stage

    stage = Stage(name="priority:0", status="FEASIBLE", value=5.0, bound=math.inf, seconds=0.1)
    assert stage.gap is None
    assert Stage(name="packing", status="FEASIBLE", value=4.0, bound=2.0, seconds=0.1).gap == 0.5
    json.dumps({"gap": stage.gap}, allow_nan=False)
