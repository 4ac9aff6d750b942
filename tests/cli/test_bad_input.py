"""Bad input: exit 2 and one line naming file, object and field; never a traceback."""

from __future__ import annotations

import pytest

from tests.cli.conftest import BAD, FAST


@pytest.mark.parametrize(
    ("name", "needles"),
    [
        ("not-yaml.txt", ["not-yaml.txt", "not valid YAML", "line"]),
    ],
)
def test_bad_file_exits_2_naming_file_object_field(run_cli, name: str, needles: list[str]) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("plan", "--snapshot", str(BAD / name), *FAST)
    assert result.code == 2
    assert result.out == ""
    assert result.err.startswith("optsched: error: ")
    for needle in needles:
        assert needle in result.err
    assert "Traceback" not in result.err


@pytest.mark.parametrize(
    ("name", "needles"),
    [
        ("missing-field.yaml", ["missing-field.yaml", "Workload ml/", "spec.podSets", "left out"]),
        ("bad-quantity.yaml", ["bad-quantity.yaml", "Node h100-02", "status.allocatable.cpu", "12 cores"]),
    ],
)
def test_an_object_that_cannot_be_read_is_left_out_and_the_rest_is_planned(  # type: ignore[no-untyped-def]
    run_cli, name: str, needles: list[str]
) -> None:
    result = run_cli("plan", "--snapshot", str(BAD / name), *FAST)
    assert result.code == 0
    assert "optsched: warning: " in result.err
    for needle in needles:
        assert needle in result.err
    assert "ADMITTED (" in result.out and "Traceback" not in result.err


def test_missing_file_exits_2(run_cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    missing = tmp_path / "nope.yaml"
    result = run_cli("plan", "--snapshot", str(missing))
    assert result.code == 2
    assert str(missing) in result.err and "no such file" in result.err


def test_bad_annotation_plans_with_a_warning_naming_the_node(run_cli) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("plan", "--snapshot", str(BAD / "bad-annotation.yaml"), *FAST)
    assert result.code == 0
    assert "warning" in result.err and "h100-03" in result.err and "optsched.io/gpu-topology" in result.err
    assert "ml/job-train-2x8-0a1b2" in result.out
    assert "h100-03" in result.out  # the warning is repeated under WARNINGS in the table


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "--format", "pdf"],
        ["plan", "--time-limit", "0"],
        ["plan", "--time-limit", "soon"],
        ["plan", "--seed", str(2**64)],
        ["plan", "--seed", "-1"],
        ["plan", "--snapshot", "a.yaml", "--kubeconfig", "kc"],
        ["frobnicate"],
        [],
        ["snapshot"],
    ],
)
def test_usage_errors_exit_2(run_cli, argv: list[str]) -> None:  # type: ignore[no-untyped-def]
    result = run_cli(*argv)
    assert result.code == 2
    assert "Traceback" not in result.err
    assert "usage:" in result.err


def test_unknown_policy_exits_2(run_cli) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("plan", "--policy", "magic")
    assert result.code == 2
    assert "unknown policy 'magic'" in result.err and "bestfit" in result.err


def test_unreachable_cluster_exits_2(run_cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}}]\n"
        "users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
    )
    result = run_cli("snapshot", "--kubeconfig", str(kubeconfig), "--out", str(tmp_path / "snap.yaml"))
    assert result.code == 2
    assert str(kubeconfig) in result.err and "cannot reach the API server" in result.err
    assert not (tmp_path / "snap.yaml").exists()


def test_missing_kubeconfig_exits_2(run_cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("plan", "--kubeconfig", str(tmp_path / "absent"))
    assert result.code == 2
    assert "absent: no such file" in result.err
