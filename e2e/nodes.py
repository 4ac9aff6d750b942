"""Turn a cluster profile into KWOK-managed fake GPU Node objects.

The nodes look to every consumer (kube-scheduler, Kueue TAS, optsched's
snapshot reader) like GPU nodes labelled by NVIDIA GPU Feature Discovery: GFD
labels, ``nvidia.com/gpu`` capacity, Kueue TAS topology labels, and the
``optsched.io/gpu-topology`` annotation that optsched's node agent would write.
Nodes of a ``dra`` pool keep the GFD labels but have no ``nvidia.com/gpu``
capacity (NVIDIA's DRA driver runs there, not its device plugin) and carry
``optsched.io/simulated-dra=true``: the simulated agent publishes their GPUs as a
ResourceSlice.

``python -m e2e.nodes --profile small [--kubeconfig FILE] [--print]`` creates
them in any cluster that runs KWOK (the local harness, or kind with KWOK
installed), or prints them as a YAML stream.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from e2e.profiles import Pool, Profile, load_profile
from optsched.agent.resource_slices import SIMULATED_DRA_LABEL
from optsched.snapshot.kubeyaml import dump_yaml_all

KWOK_ANNOTATION = "kwok.x-k8s.io/node"
GPU_TOPOLOGY_ANNOTATION = "optsched.io/gpu-topology"
POOL_LABEL = "optsched.io/e2e-pool"


@dataclass(frozen=True)
class Placement:
    name: str
    pool: Pool
    index: int
    rack: str
    block: str


def placements(profile: Profile) -> Iterator[Placement]:
    """Deterministic node -> rack -> block assignment (see e2e.profiles)."""
    rack_no = 0
    per_rack = profile.layout.nodes_per_rack
    for pool in profile.pools:
        for i in range(pool.count):
            r = rack_no + i // per_rack
            yield Placement(
                name=f"{pool.name}-{i:03d}",
                pool=pool,
                index=i,
                rack=f"rack-{r:03d}",
                block=f"block-{r // profile.layout.racks_per_block:02d}",
            )
        rack_no += -(-pool.count // per_rack)


def gpu_topology(pool: Pool, unhealthy: list[int]) -> str | None:
    """The optsched.io/gpu-topology annotation; None means "no NVLink" (no annotation)."""
    gpu = pool.gpu
    if gpu is None or (gpu.nvlink_islands is None and gpu.numa is None and not unhealthy):
        return None
    islands = gpu.nvlink_islands if gpu.nvlink_islands is not None else [[i] for i in range(gpu.count)]
    doc: dict[str, Any] = {"nvlinkIslands": islands}
    if gpu.numa is not None:
        doc["numa"] = gpu.numa
    doc["unhealthy"] = sorted(unhealthy)
    return json.dumps(doc, separators=(",", ":"))


def node_object(p: Placement, profile: Profile) -> dict[str, Any]:
    pool, layout = p.pool, profile.layout
    labels = {
        "type": "kwok",
        "kubernetes.io/hostname": p.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        POOL_LABEL: pool.name,
        layout.block_label: p.block,
        layout.rack_label: p.rack,
        **pool.labels,
    }
    annotations = {KWOK_ANNOTATION: "fake"}
    resources: dict[str, str] = {"cpu": pool.cpu, "memory": pool.memory, "pods": str(pool.pods)}
    gpus: dict[str, int] = {}
    if pool.gpu:
        g = pool.gpu
        labels.update(
            {
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": g.product,
                "nvidia.com/gpu.memory": str(g.memory_mib),
                "nvidia.com/gpu.count": str(g.count),
                # GPU Feature Discovery's own mark: these nodes stand for GFD-labelled ones, so a
                # simulated node agent leaves their GPU labels alone, as it does beside real GFD.
                "nvidia.com/gfd.timestamp": "1764547200",
            }
        )
        if g.clique_size:
            labels["nvidia.com/gpu.clique"] = f"{pool.name}-fabric.{p.index // g.clique_size}"
        unhealthy = profile.unhealthy.get(p.name, [])
        if pool.dra:
            labels[SIMULATED_DRA_LABEL] = "true"
        else:
            # NVIDIA's device plugin reports an unhealthy GPU as such, and kubelet leaves it out of
            # allocatable while capacity keeps it: a pod placed by the count alone never lands on it.
            gpus = {"capacity": g.count, "allocatable": g.count - len(set(unhealthy))}
        topo = gpu_topology(pool, unhealthy)
        if topo:
            annotations[GPU_TOPOLOGY_ANNOTATION] = topo
    spec: dict[str, Any] = {}
    if pool.taints:
        spec["taints"] = [
            {"key": t.key, "effect": t.effect, **({"value": t.value} if t.value else {})} for t in pool.taints
        ]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": p.name, "labels": labels, "annotations": annotations},
        "spec": spec,
        "status": {
            part: {**resources, **({"nvidia.com/gpu": str(gpus[part])} if gpus else {})}
            for part in ("capacity", "allocatable")
        },
    }


def node_objects(profile: Profile) -> list[dict[str, Any]]:
    return [node_object(p, profile) for p in placements(profile)]


def create_nodes(kube: Any, profile: Profile, workers: int = 8) -> list[str]:
    """Create (or replace) every profile node; returns their names.

    Nodes are created with their status in the POST body: the apiserver keeps
    a Node's status on create, which is how capacity gets there without a kubelet.
    """
    objs = node_objects(profile)

    def one(obj: dict[str, Any]) -> str:
        kube.create_or_replace(obj)
        return str(obj["metadata"]["name"])

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, objs))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m e2e.nodes", description=__doc__.split("\n")[0])
    ap.add_argument("--profile", default="small")
    ap.add_argument("--kubeconfig", help="create the nodes in this cluster")
    ap.add_argument("--print", action="store_true", help="print a YAML stream instead")
    args = ap.parse_args(argv)
    profile = load_profile(args.profile)
    if args.print or not args.kubeconfig:
        try:
            sys.stdout.write(dump_yaml_all(node_objects(profile)))
        except BrokenPipeError:  # `... --print | head`
            sys.stderr.close()
        return 0
    from e2e.kube import Kube

    with Kube.from_kubeconfig(args.kubeconfig) as kube:
        names = create_nodes(kube, profile)
    print(f"created {len(names)} nodes from profile {profile.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
