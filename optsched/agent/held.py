"""Where the devices pods really hold come from: kubelet on a real node, an emulated plugin on a fake one.

On a real node kubelet's PodResources API is the truth: it says which device
IDs (GPU UUIDs, MIG UUIDs) each container was given. A simulated (KWOK) node
has no kubelet, so the agent plays kubelet and NVIDIA's device plugin: pods
keep what they were given before (read back from the published ``NodeGPUs``),
new pods get what NVIDIA's best-effort policy would choose.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from optsched.agent.backend import BackendError
from optsched.agent.device_plugin import allocate, pod_from_object
from optsched.agent.devices import Discovery
from optsched.agent.podresources import ContainerDevices, PodDevices, PodResourcesClient
from optsched.model.names import GPU_RESOURCE, MIG_PREFIX

log = logging.getLogger("optsched.agent")


class HeldDevices(Protocol):
    def held(
        self,
        pods: Sequence[Mapping[str, Any]],
        previous: Mapping[str, Any],
        discovery: Discovery,
        unhealthy: frozenset[int],
    ) -> list[PodDevices]:
        """The GPU devices each pod on the node holds now (only pods that hold some)."""
        ...


def _gpu_devices_only(pod: PodDevices) -> PodDevices | None:
    containers = []
    for container in pod.containers:
        devices = tuple(
            (resource, ids)
            for resource, ids in container.devices
            if resource == GPU_RESOURCE or resource.startswith(MIG_PREFIX)
        )
        if devices:
            containers.append(ContainerDevices(container.name, devices))
    return PodDevices(pod.namespace, pod.name, tuple(containers)) if containers else None


class KubeletHeld:
    """kubelet's PodResources ``List``: what the device plugin really handed out."""

    def __init__(self, client: PodResourcesClient) -> None:
        self.client = client

    def held(
        self,
        pods: Sequence[Mapping[str, Any]],
        previous: Mapping[str, Any],
        discovery: Discovery,
        unhealthy: frozenset[int],
    ) -> list[PodDevices]:
        try:
            answer = self.client.list()
        except BackendError as exc:
            # Health and topology still get published; the holdings stay as last seen.
            log.warning("kubelet's PodResources cannot be read (%s); keeping the devices last published", exc)
            return previous_holdings(previous)
        listed = (_gpu_devices_only(p) for p in answer)
        return [p for p in listed if p is not None]


def previous_holdings(status: Mapping[str, Any]) -> list[PodDevices]:
    """``NodeGPUs.status.pods`` read back as PodDevices (what the emulated plugin gave before)."""
    out = []
    raw_pods = status.get("pods")
    for pod in raw_pods if isinstance(raw_pods, list) else []:
        if not isinstance(pod, dict):
            continue
        containers = []
        raw_containers = pod.get("containers")
        for c in raw_containers if isinstance(raw_containers, list) else []:
            if not isinstance(c, dict):
                continue
            uuids = c.get("gpuUUIDs")
            ids = tuple(u for u in (uuids if isinstance(uuids, list) else []) if isinstance(u, str))
            if ids:
                containers.append(ContainerDevices(str(c.get("name", "")), ((GPU_RESOURCE, ids),)))
        if containers:
            out.append(PodDevices(str(pod.get("namespace", "")), str(pod.get("name", "")), tuple(containers)))
    return out


class EmulatedHeld:
    """kubelet plus NVIDIA's device plugin on a simulated node (whole GPUs; MIG slices are not handed out)."""

    def held(
        self,
        pods: Sequence[Mapping[str, Any]],
        previous: Mapping[str, Any],
        discovery: Discovery,
        unhealthy: frozenset[int],
    ) -> list[PodDevices]:
        gpu_pods = [p for p in (pod_from_object(pod) for pod in pods) if p is not None]
        return list(allocate(gpu_pods, previous_holdings(previous), discovery, unhealthy).pods)
