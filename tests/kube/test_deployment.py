"""The shipped Deployment: secure metrics, and a liveness probe that reads the control loop's heartbeat."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import yaml

from optsched.commands.run import register_run, replica_from

DEPLOYMENT = Path(__file__).resolve().parents[2] / "manifests" / "base" / "deployment.yaml"


def _container() -> dict[str, Any]:
    deployment = yaml.safe_load(DEPLOYMENT.read_text(encoding="utf-8"))
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    return container


def test_the_shipped_flags_serve_secure_metrics_on_the_metrics_port() -> None:
    container = _container()
    parser = argparse.ArgumentParser()
    register_run(parser.add_subparsers())
    metrics = replica_from(parser.parse_args(container["args"])).metrics
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert metrics.secure and metrics.port == ports["metrics"]


def test_liveness_is_the_heartbeat_endpoint_over_https() -> None:
    probe = _container()["livenessProbe"]
    assert probe["httpGet"] == {"path": "/healthz", "port": "metrics", "scheme": "HTTPS"}
