"""The simulated backend: a profile's devices with stable identities, MIG from its MigControl, XID files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optsched.agent.backend import BackendError
from optsched.agent.devices import MigInstance, NvLink, XidEvent
from optsched.agent.profile import HardwareProfile, resolve_profiles
from optsched.agent.simulated import (
    SIMULATED_DRIVER_VERSION,
    XID_FILE,
    SimulatedBackend,
    inject_xid,
    simulated_bus_id,
    simulated_uuid,
)

BRIDGED = resolve_profiles("a100-pcie-bridged")[0]
TRAY = resolve_profiles("gb200-tray")[0]


class StubMig:
    """A MigControl holding fixed instances per GPU."""

    def __init__(self, instances: dict[int, tuple[MigInstance, ...]]) -> None:
        self.held = instances
        self.asked: list[int] = []

    def instances(self, gpu: int) -> tuple[MigInstance, ...]:
        self.asked.append(gpu)
        return self.held.get(gpu, ())

    def create(self, gpu: int, profile: str, start: int) -> MigInstance:
        raise AssertionError("not used")

    def destroy(self, gpu: int, start: int) -> None:
        raise AssertionError("not used")


def test_discovery_is_the_profile_with_a_nodes_identities() -> None:
    found = SimulatedBackend(BRIDGED, "node-a").discover()
    assert [gpu.index for gpu in found.gpus] == [gpu.minor for gpu in found.gpus] == list(range(8))
    assert {gpu.product for gpu in found.gpus} == {"NVIDIA-A100-PCIE-40GB"}
    assert [gpu.numa for gpu in found.gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert found.nvlinks == BRIDGED.links and found.nvswitch == frozenset()
    assert found.driver_version == SIMULATED_DRIVER_VERSION
    assert all(gpu.mig_capable and not gpu.mig_enabled for gpu in found.gpus)


def test_a_switch_board_puts_every_gpu_on_the_switch_and_keeps_its_clique() -> None:
    found = SimulatedBackend(TRAY, "tray-1").discover()
    assert found.nvswitch == frozenset(range(4)) and found.nvlinks == ()
    assert {gpu.clique for gpu in found.gpus} == {TRAY.clique}
    assert {gpu.numa for gpu in found.gpus} == {None}


def test_uuids_are_stable_per_node_and_index_and_differ_otherwise() -> None:
    first = [gpu.uuid for gpu in SimulatedBackend(BRIDGED, "node-a").discover().gpus]
    again = [gpu.uuid for gpu in SimulatedBackend(BRIDGED, "node-a").discover().gpus]
    other = [gpu.uuid for gpu in SimulatedBackend(BRIDGED, "node-b").discover().gpus]
    assert first == again
    assert len(set(first) | set(other)) == 16
    assert all(u.startswith("GPU-") and len(u) == 40 for u in first)
    assert simulated_uuid("node-a", 3) == first[3]


def test_bus_ids_are_distinct_and_in_nvmls_form_for_the_largest_node() -> None:
    bus_ids = [simulated_bus_id(i) for i in range(1024)]
    assert len(set(bus_ids)) == 1024
    for bus_id in bus_ids:
        domain, bus, rest = bus_id.split(":")
        assert len(domain) == 8 and len(bus) == 2 and rest == "00.0" and int(bus, 16) <= 0xFF


def test_without_a_mig_simulator_there_are_no_instances_and_changes_are_refused() -> None:
    backend = SimulatedBackend(BRIDGED, "node-a")
    assert backend.mig.instances(0) == ()
    with pytest.raises(BackendError, match="MIG is not simulated on this node"):
        backend.mig.create(0, "1g.5gb", 0)
    with pytest.raises(BackendError, match="MIG is not simulated on this node"):
        backend.mig.destroy(0, 0)


def test_mig_instances_come_from_the_mig_control_and_enable_mig_where_present() -> None:
    held = (MigInstance("3g.20gb", 0, 4, "MIG-a"), MigInstance("3g.20gb", 4, 4, "MIG-b"))
    stub = StubMig({2: held})
    found = SimulatedBackend(BRIDGED, "node-a", mig=stub).discover()
    assert found.gpus[2].mig_instances == held and found.gpus[2].mig_enabled
    assert not any(gpu.mig_enabled for gpu in found.gpus if gpu.index != 2)


def test_a_gpu_that_is_not_mig_capable_is_never_asked_for_instances() -> None:
    stub = StubMig({0: (MigInstance("1g.5gb", 0, 1),)})
    no_mig = HardwareProfile(name="l4", product="NVIDIA-L4", memory_mib=23034, count=2)
    found = SimulatedBackend(no_mig, "n", mig=stub).discover()
    assert stub.asked == [] and found.gpus[0].mig_instances == ()


def test_injected_xids_are_returned_once(tmp_path: Path) -> None:
    backend = SimulatedBackend(BRIDGED, "node-a", state_dir=tmp_path)
    assert backend.xid_events() == []
    inject_xid(tmp_path, 3, 79, "fell off")
    inject_xid(tmp_path, 1, 13)
    assert backend.xid_events() == [XidEvent(3, 79, "fell off"), XidEvent(1, 13)]
    assert backend.xid_events() == []
    inject_xid(tmp_path, 0, 48)
    assert backend.xid_events() == [XidEvent(0, 48)]


def test_a_torn_last_line_waits_until_it_is_complete(tmp_path: Path) -> None:
    backend = SimulatedBackend(BRIDGED, "node-a", state_dir=tmp_path)
    line = json.dumps({"gpu": 2, "xid": 94}).encode()
    with (tmp_path / XID_FILE).open("ab") as stream:
        stream.write(line[:7])
    assert backend.xid_events() == []
    with (tmp_path / XID_FILE).open("ab") as stream:
        stream.write(line[7:] + b"\n")
    assert backend.xid_events() == [XidEvent(2, 94)]


def test_bad_lines_are_skipped(tmp_path: Path) -> None:
    bad = [
        b"not json",
        b"[1, 2]",
        json.dumps({"gpu": "1", "xid": 79}).encode(),
        json.dumps({"gpu": 1, "xid": True}).encode(),
        json.dumps({"gpu": -1, "xid": 79}).encode(),
        json.dumps({"gpu": 8, "xid": 79}).encode(),
        json.dumps({"gpu": 1, "xid": 79, "message": 5}).encode(),
        b"\xff\xfe",
    ]
    (tmp_path / XID_FILE).write_bytes(b"\n".join([*bad, json.dumps({"gpu": 5, "xid": 74}).encode()]) + b"\n")
    assert SimulatedBackend(BRIDGED, "node-a", state_dir=tmp_path).xid_events() == [XidEvent(5, 74)]


def test_a_restarted_backend_sees_the_gpus_that_failed_before(tmp_path: Path) -> None:
    inject_xid(tmp_path, 6, 79)
    SimulatedBackend(BRIDGED, "node-a", state_dir=tmp_path).xid_events()
    assert SimulatedBackend(BRIDGED, "node-a", state_dir=tmp_path).xid_events() == [XidEvent(6, 79)]


def test_a_rewritten_shorter_file_is_read_from_its_start(tmp_path: Path) -> None:
    backend = SimulatedBackend(BRIDGED, "node-a", state_dir=tmp_path)
    for gpu in range(4):
        inject_xid(tmp_path, gpu, 79)
    assert len(backend.xid_events()) == 4
    (tmp_path / XID_FILE).write_text(json.dumps({"gpu": 7, "xid": 48}) + "\n")
    assert backend.xid_events() == [XidEvent(7, 48)]


def test_no_state_dir_or_no_file_means_no_events(tmp_path: Path) -> None:
    assert SimulatedBackend(BRIDGED, "n").xid_events() == []
    assert SimulatedBackend(BRIDGED, "n", state_dir=tmp_path / "absent").xid_events() == []


def test_inject_xid_creates_the_state_dir_and_refuses_negative_numbers(tmp_path: Path) -> None:
    inject_xid(tmp_path / "a" / "b", 0, 79)
    assert (tmp_path / "a" / "b" / XID_FILE).exists()
    with pytest.raises(ValueError, match="must not be negative"):
        inject_xid(tmp_path, -1, 79)


def test_the_profile_links_reach_discovery_unchanged() -> None:
    profile = HardwareProfile(name="p", product="X", memory_mib=1, count=3, links=(NvLink(0, 2, 3),))
    assert SimulatedBackend(profile, "n").discover().nvlinks == (NvLink(0, 2, 3),)
