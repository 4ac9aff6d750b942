"""The NodeGPUs CRD on the real API server: its printer columns, and the layouts its schema refuses."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.kube import ApiError
from e2e.testing import H100, E2ECluster
from e2e.tests.test_agent_security import CRD, NGPU, TABLE, Node, gpus_status, node_gpus


@pytest.fixture
def node(cluster: E2ECluster) -> Iterator[Node]:
    """The CRD installed, an H100 node to describe; its NodeGPUs deleted afterwards."""
    cluster.apply(CRD)
    cluster.wait_condition(
        "apiextensions.k8s.io/v1", "CustomResourceDefinition", "nodegpus.optsched.io", "Established"
    )
    first = sorted(cluster.gpu_nodes(H100), key=lambda n: n["metadata"]["name"])[0]
    yield Node(first["metadata"]["name"], first["metadata"]["uid"])
    with contextlib.suppress(ApiError):
        cluster.kube.delete(NGPU, "NodeGPUs", first["metadata"]["name"])


def test_the_crd_accepts_the_contract_and_refuses_bad_layouts(cluster: E2ECluster, node: Node) -> None:
    a = node
    cluster.kube.create(node_gpus(a))
    cluster.kube.apply(gpus_status(a), subresource="status")
    table = cluster.kube.request(
        "GET", cluster.kube.path(NGPU, "NodeGPUs", a.name), headers={"Accept": TABLE}
    )
    row = dict(zip([c["name"] for c in table["columnDefinitions"]], table["rows"][0]["cells"], strict=True))
    assert row["Product"] == H100 and row["Unhealthy"] == 1 and row["MIG"] == "Success"
    assert row["Islands"] == "[[0,1,2,3,4,5,6,7]]"

    def refused(layout: list[dict[str, Any]], *words: str) -> None:
        bad = {**node_gpus(a), "metadata": {"name": "crd-probe"}, "spec": {"migLayout": layout}}
        with pytest.raises(ApiError) as info:
            cluster.kube.create(bad, dry_run=True)
        assert info.value.status == 422 and all(w in str(info.value) for w in words), str(info.value)

    refused([{"gpu": 0, "instances": []}, {"gpu": 0, "instances": []}], "each GPU index may appear only once")
    refused([{"gpu": 0, "instances": [{"profile": "1g.10gb", "start": 8}]}], "less than or equal to 7")
    refused(
        [{"gpu": 0, "instances": [{"profile": "1g.10gb", "start": 2}, {"profile": "2g.20gb", "start": 2}]}],
        "cannot start at the same memory slice",
    )
    refused([{"gpu": 0, "instances": [{"profile": "all-of-it", "start": 0}]}], "profile")
