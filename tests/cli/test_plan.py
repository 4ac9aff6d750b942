"""``optsched plan`` end to end, in-process: views, files, comparison and error paths."""

from __future__ import annotations

import json
from html.parser import HTMLParser

import pytest
import yaml

from optsched.model.plan import PlanStatus
from optsched.settings import Settings
from optsched.snapshot.build import load_snapshot
from tests.cli.conftest import FAST, FIFO_TRAP, SMALL
from tests.kueue import objects as q

PLAN_KEYS = {"status", "solveSeconds", "objective", "bound", "gap", "workloads", "summary"}


def test_default_plans_the_bundled_example(run_cli) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("plan", *FAST)
    assert result.code == 0
    assert "bundled example cluster-small.yaml" in result.err
    assert result.out.startswith("optsched plan")


def test_json_follows_brief_2_5(run_cli) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("plan", "--snapshot", str(SMALL), "--format", "json", *FAST)
    assert result.code == 0
    doc = json.loads(result.out)
    assert doc.keys() >= PLAN_KEYS
    assert doc["status"] in {s.value for s in PlanStatus}
    pending = {w.key for w in load_snapshot(SMALL).workloads}
    assert {w["name"] for w in doc["workloads"]} == pending
    for w in doc["workloads"]:
        assert {"name", "decision", "reasons", "podSets"} <= w.keys()
        assert w["decision"] in ("admit", "defer")
        if w["decision"] == "defer":
            assert w["reasons"], w["name"]
        for ps in w["podSets"]:
            for pod in ps["pods"]:
                assert {"index", "node", "gpus"} <= pod.keys()
    for key in ("gpusFreeBefore", "gpusFreeAfter", "fragmentationBefore", "fragmentationAfter"):
        assert key in doc["summary"]


def test_table_shows_deferred_reasons(run_cli) -> None:  # type: ignore[no-untyped-def]
    json_result = run_cli("plan", "--snapshot", str(SMALL), "--format", "json", *FAST)
    deferred = [w for w in json.loads(json_result.out)["workloads"] if w["decision"] == "defer"]
    assert deferred
    table = run_cli("plan", "--snapshot", str(SMALL), *FAST).out
    assert "ADMITTED" in table and "DEFERRED" in table and "SUMMARY" in table
    for w in deferred:
        first_words = " ".join(w["reasons"][0]["message"].split()[:4])
        assert w["name"] in table and first_words in table


def test_namespace_limits_the_queue(run_cli) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("plan", "--snapshot", str(SMALL), "--namespace", "team-a", "--format", "json", *FAST)
    assert result.code == 0
    names = [w["name"] for w in json.loads(result.out)["workloads"]]
    assert names and all(name.startswith("team-a/") for name in names)


def test_yaml_and_out_file(run_cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import yaml

    target = tmp_path / "plan.yaml"
    result = run_cli("plan", "--snapshot", str(SMALL), "--format", "yaml", "--out", str(target), *FAST)
    assert result.code == 0 and result.out == ""
    assert str(target) in result.err
    assert yaml.safe_load(target.read_text()).keys() >= PLAN_KEYS


def test_html_report_has_one_cell_per_gpu(run_cli) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("plan", "--snapshot", str(SMALL), "--format", "html", *FAST)
    assert result.code == 0

    class Cells(HTMLParser):
        count = 0

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if "gpu" in (dict(attrs).get("class") or "").split():
                self.count += 1

        handle_startendtag = handle_starttag

    parser = Cells()
    parser.feed(result.out)
    assert parser.count == sum(n.gpu_count for n in load_snapshot(SMALL).nodes)


def test_explain_adds_excluded_nodes_and_stages(run_cli) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("plan", "--snapshot", str(SMALL), "--explain", *FAST)
    assert result.code == 0
    assert "nodes eligible" in result.out and "excluded" in result.out
    assert "SOLVER STAGES" in result.out


def test_optimizer_plans_the_fifo_trap(run_cli) -> None:  # type: ignore[no-untyped-def]
    result = run_cli(
        "plan", "--snapshot", str(FIFO_TRAP), "--format", "json", "--time-limit", "5", "--seed", "1"
    )
    assert result.code == 0
    doc = json.loads(result.out)
    assert doc["policy"] == "optimizer"
    assert doc["summary"]["gpusAdmitted"] > 0


def test_compare_prints_every_policy_side_by_side(run_cli) -> None:  # type: ignore[no-untyped-def]
    from optsched.planning.planner import POLICIES

    result = run_cli("plan", "--snapshot", str(FIFO_TRAP), "--compare", "--time-limit", "5")
    assert result.code == 0
    header = result.out.splitlines()[2]
    for policy in POLICIES:
        assert policy in header
    for row in ("GPUs admitted", "pods in one NVLink island", "racks per gang", "stranded GPUs after"):
        assert row in result.out


def test_compare_json(run_cli) -> None:  # type: ignore[no-untyped-def]
    from optsched.planning.planner import POLICIES

    result = run_cli(
        "plan", "--snapshot", str(FIFO_TRAP), "--compare", "--format", "json", "--time-limit", "5"
    )
    doc = json.loads(result.out)
    assert [p["policy"] for p in doc["policies"]] == list(POLICIES)
    assert all(p["valid"] and p["plan"].keys() >= PLAN_KEYS for p in doc["policies"])


def test_a_plan_failing_validation_is_never_printed(run_cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    import optsched.validate.checker

    monkeypatch.setattr(
        optsched.validate.checker, "check_plan", lambda snapshot, plan: ["GPU 3 of h100-01 used twice"]
    )
    result = run_cli("plan", "--snapshot", str(SMALL), "--format", "json", *FAST)
    assert result.code == 1
    assert result.out == ""
    assert "failed validation" in result.err and "GPU 3 of h100-01 used twice" in result.err


def test_internal_error_is_one_line_unless_debug(run_cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    import optsched.planning.planner

    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("solver exploded")

    monkeypatch.setattr(optsched.planning.planner, "_baseline", boom)
    result = run_cli("plan", "--snapshot", str(SMALL), *FAST)
    assert result.code == 1
    assert "RuntimeError: solver exploded" in result.err and "--debug" in result.err
    assert "Traceback" not in result.err
    debug = run_cli("plan", "--snapshot", str(SMALL), "--debug", *FAST)
    assert debug.code == 1 and "Traceback" in debug.err


def test_python_dash_m_entry_point() -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "optsched", "--version"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0 and "optsched" in done.stdout


def test_dry_runs_count_the_budget_in_solver_work_with_one_worker_unless_wall_clock(run_cli) -> None:  # type: ignore[no-untyped-def]
    import argparse

    from optsched.commands.plan import settings_from

    def settings(**flags: bool) -> Settings:
        values = {"deterministic": False, "wall_clock": False, **flags}
        return settings_from(
            argparse.Namespace(time_limit=3.0, seed=None, extended_resource_toleration=True, **values)
        )

    for default in (settings(), settings(deterministic=True)):
        assert default.deterministic_time and default.workers == 1 and default.time_limit_s == 3.0
    wall = settings(wall_clock=True)
    assert not wall.deterministic_time and wall.workers == Settings().workers
    first = run_cli("plan", "--snapshot", str(FIFO_TRAP), "--format", "json")
    again = run_cli("plan", "--snapshot", str(FIFO_TRAP), "--format", "json")
    assert first.code == again.code == 0
    assert json.loads(first.out)["summary"]["gpusAdmitted"] == 32
    assert json.loads(first.out)["workloads"] == json.loads(again.out)["workloads"]
    both = run_cli("plan", "--snapshot", str(FIFO_TRAP), "--deterministic", "--wall-clock")
    assert both.code == 2 and "not allowed with" in both.err


def test_the_same_snapshot_gives_the_same_plan_whatever_the_hash_seed() -> None:
    """Set and dict order of strings changes with PYTHONHASHSEED: no plan may depend on it."""
    import os
    import subprocess
    import sys

    outputs = []
    for seed in ("1", "2"):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "optsched",
                "plan",
                "--snapshot",
                str(SMALL),
                "-o",
                "json",
                "--time-limit",
                "2",
            ],
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "PYTHONHASHSEED": seed},
        )
        assert done.returncode == 0, done.stderr
        plan = json.loads(done.stdout)
        outputs.append((plan["workloads"], plan["summary"]))
    assert outputs[0] == outputs[1]


def test_explain_names_the_missing_queue_objects(run_cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    missing_flavor = q.cluster_queue("h200", flavors=("h200",), selector={})
    objects = [
        *q.cluster(),
        missing_flavor,
        q.local_queue("to-h200", cq="h200"),
        q.workload("fine"),
        q.workload("lost", queue="nope"),
        q.workload("waits", queue="to-h200"),
    ]
    path = tmp_path / "dump.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    result = run_cli("plan", "--snapshot", str(path), "--explain", *FAST)
    assert result.code == 0, result.err
    why = result.out.split("WHY", 1)[1]
    assert "team/lost  defer\n    LocalQueue nope doesn't exist" in why
    assert "references missing ResourceFlavor(s): h200" in " ".join(why.split())
    assert "1 admitted, 2 deferred" in result.out
    doc = json.loads(run_cli("plan", "--snapshot", str(path), "--format", "json", *FAST).out)
    reasons = {w["name"]: w["reasons"] for w in doc["workloads"]}
    assert reasons["team/lost"] == [
        {"code": "QueueNotFound", "message": "LocalQueue nope doesn't exist", "scope": "LocalQueue team/nope"}
    ]
    assert reasons["team/waits"][0]["scope"] == "ResourceFlavor h200"
    assert reasons["team/fine"] == []
