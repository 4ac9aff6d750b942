"""pytest fixtures for e2e tests against a real control plane.

Which cluster:
  * ``OPTSCHED_E2E_EXTERNAL=1`` and ``KUBECONFIG`` set: that cluster (kind, or
    anything prepared with ``e2e/kind/setup.sh``); nothing is started or stopped.
  * otherwise the local harness (``e2e.cluster``): a running healthy cluster is
    reused; if none runs, one is started with ``OPTSCHED_E2E_PROFILE``
    (default ``small``) and stopped at the end of the session, unless
    ``OPTSCHED_E2E_KEEP=1`` keeps it for the next run.

Fixtures:
  * ``cluster`` (session): :class:`e2e.testing.E2ECluster` with ``.kubeconfig``,
    ``.logs_dir``, ``.kube`` and helpers (apply, wait_condition, workload_for...).
  * ``ns`` (function): a fresh :class:`e2e.testing.Namespace`, deleted afterwards
    together with the cluster-scoped objects applied through it.

On a test failure the tail of every component log is attached to the report.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.testing import E2ECluster, Namespace

_active: list[E2ECluster] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Warnings stay warnings here (the unit suite turns them into errors).

    Against a live control plane a library's warning, such as an unclosed
    socket after a watch ends or a note about the server's version, is not a
    failure of the behaviour under test.
    """
    for item in items:
        item.add_marker(pytest.mark.filterwarnings("default"))


@pytest.fixture(scope="session")
def cluster() -> Iterator[E2ECluster]:
    if os.environ.get("OPTSCHED_E2E_EXTERNAL") == "1":
        kubeconfig = os.environ.get("KUBECONFIG")
        if not kubeconfig:
            pytest.fail("OPTSCHED_E2E_EXTERNAL=1 needs KUBECONFIG to name the cluster")
        logs = os.environ.get("OPTSCHED_E2E_LOGS")
        c = E2ECluster(Path(kubeconfig), Path(logs) if logs else None, external=True)
        _active.append(c)
        yield c
        c.close()
        return

    from e2e import cluster as harness
    from e2e.components import ComponentError

    profile = os.environ.get("OPTSCHED_E2E_PROFILE", "small")
    already = harness.running() is not None
    try:
        info = harness.up(profile)
    except (ComponentError, FileNotFoundError, TimeoutError) as exc:
        pytest.exit(f"e2e cluster did not start: {exc}", returncode=1)
    c = E2ECluster(Path(info.kubeconfig), Path(info.logs_dir), external=False)
    _active.append(c)
    try:
        yield c
    finally:
        c.close()
        if not already and os.environ.get("OPTSCHED_E2E_KEEP") != "1":
            harness.down()


@pytest.fixture
def ns(cluster: E2ECluster, request: pytest.FixtureRequest) -> Iterator[Namespace]:
    prefix = "e2e-" + re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower().removeprefix("test_"))
    namespace = Namespace(cluster, prefix)
    try:
        yield namespace
    finally:
        namespace.cleanup()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[Any]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed and _active and _active[0].logs_dir:
        buf = io.StringIO()
        _active[0].dump_logs(lines=30, out=buf)
        report.sections.append(("component logs (tail)", buf.getvalue()))
    return report
