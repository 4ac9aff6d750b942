"""Which backend serves which node: NVML for the node the agent runs on, hardware profiles for simulated ones.

A simulated node's profile is the one its ``optsched.io/hardware-profile``
label names, or the only profile given. Each node keeps its simulated hardware
state (MIG instances, injected XID events) and its MIG journal under
``<state-dir>/<node>/``, so a restarted agent finds the hardware as it left it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from optsched.agent.backend import GpuBackend
from optsched.agent.cycle import NodeAgent
from optsched.agent.held import EmulatedHeld, HeldDevices, KubeletHeld
from optsched.agent.podresources import PodResourcesClient
from optsched.agent.profile import HardwareProfile
from optsched.agent.simulated import SimulatedBackend
from optsched.agent.simulated_mig import SimulatedMig

log = logging.getLogger("optsched.agent")
PROFILE_LABEL = "optsched.io/hardware-profile"
DEFAULT_STATE_DIR = Path("/var/lib/optsched-agent")
DEFAULT_POD_RESOURCES = "/var/lib/kubelet/pod-resources/kubelet.sock"


@dataclass(frozen=True)
class ServeOptions:
    simulate: bool
    profiles: tuple[HardwareProfile, ...] = ()
    state_dir: Path | None = DEFAULT_STATE_DIR
    pod_resources_socket: str = DEFAULT_POD_RESOURCES
    ignored_xids: frozenset[int] = frozenset()
    crash_after_mig_creates: int | None = None
    """A test hook: a simulated node's process exits after this many MIG instance creations."""


def profile_for(node: Mapping[str, Any], profiles: tuple[HardwareProfile, ...]) -> HardwareProfile | None:
    labels = (node.get("metadata") or {}).get("labels") or {}
    wanted = labels.get(PROFILE_LABEL)
    if wanted:
        return next((p for p in profiles if p.name == wanted), None)
    return profiles[0] if len(profiles) == 1 else None


def simulated_backend(profile: HardwareProfile, node: str, options: ServeOptions) -> SimulatedBackend:
    node_dir = options.state_dir / node if options.state_dir is not None else None
    if node_dir is not None:
        node_dir.mkdir(parents=True, exist_ok=True)
    mig = None
    if profile.mig_capable:
        mig = SimulatedMig(
            [profile.product] * profile.count,
            profile.memory_mib,
            node_dir / "mig.json" if node_dir is not None else None,
            node,
            crash_after_creates=options.crash_after_mig_creates,
        )
    return SimulatedBackend(profile, node, node_dir, mig=mig)


def real_backend() -> GpuBackend:
    # NVML is loaded only where the agent serves a real node: a simulated agent needs no driver.
    from optsched.agent.nvml import NvmlBackend

    return NvmlBackend()


class AgentFactory:
    """Builds the :class:`NodeAgent` for a Node object, or None when this process does not serve it."""

    def __init__(self, options: ServeOptions) -> None:
        self.options = options
        self.refused: set[str] = set()

    def __call__(self, node: Mapping[str, Any]) -> NodeAgent | None:
        name = str((node.get("metadata") or {}).get("name", ""))
        return self.for_name(name, node)

    def for_name(self, name: str, node: Mapping[str, Any] | None = None) -> NodeAgent | None:
        o = self.options
        journal_dir = o.state_dir / name if o.state_dir is not None else None
        held: HeldDevices
        if o.simulate:
            profile = profile_for(node or {}, o.profiles)
            if profile is None:
                if name not in self.refused:
                    self.refused.add(name)
                    log.warning(
                        "node %s: no hardware profile names it (label %s); not served", name, PROFILE_LABEL
                    )
                return None
            backend: GpuBackend = simulated_backend(profile, name, o)
            held = EmulatedHeld()
        else:
            backend = real_backend()
            held = KubeletHeld(PodResourcesClient(o.pod_resources_socket))
        if journal_dir is not None:
            journal_dir.mkdir(parents=True, exist_ok=True)
        return NodeAgent(
            node=name,
            backend=backend,
            held_source=held,
            backend_name="simulated" if o.simulate else "nvml",
            journal=journal_dir / "mig-journal.json" if journal_dir is not None else None,
            simulated=o.simulate,
            ignored_xids=o.ignored_xids,
        )
