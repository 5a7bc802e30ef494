"""Two port listings node-health must not read as a verdict (field set four, network-4): every port a RoCE port
switched off with none active (whether they should carry traffic is the operator's to say), and a listing that
names a device but ends before its port block (a device not read). Composed inputs, in the tools' own forms."""

from __future__ import annotations

from pathlib import Path

import pytest

from nightowl.collectors.network import ib_ports
from tests.runbook_helpers import make_host, run_on

HEALTHY_HOST = Path(__file__).resolve().parents[3] / "fixtures" / "hosts" / "ib-healthy-ndr"


def ibstat(*ports: tuple[str, str, str, str]) -> str:
    """An ibstat listing: one CA per (device, state, physical state, link layer)."""
    blocks = []
    for device, state, phys, layer in ports:
        blocks.append(
            f"CA '{device}'\n\tCA type: MT4125\n\tNumber of ports: 1\n\tFirmware version: 22.43.2566\n"
            f"\tPort 1:\n\t\tState: {state}\n\t\tPhysical state: {phys}\n\t\tRate: 40\n\t\tBase lid: 0\n"
            f"\t\tLink layer: {layer}\n"
        )
    return "\n".join(blocks)


DEVINFO_CUT = (
    "hca_id:\tmlx5_1\n\ttransport:\t\t\tInfiniBand (0)\n\tfw_ver:\t\t\t\t16.23.1020\n"
    "\tvendor_part_id:\t\t\t4119\n\tmax_qp:\t\t\t\t262144\n\tatomic_cap:\t\t\tATOMIC_HCA (1)\n"
)


def facts_of(text: str) -> dict:
    return ib_ports.facts(ib_ports.parse(text))


def test_roce_ports_all_disabled_with_none_active_are_switched_off() -> None:
    text = ibstat(("mlx5_0", "Down", "Disabled", "Ethernet"), ("mlx5_1", "Down", "Disabled", "Ethernet"))
    assert facts_of(text)["switched_off_only"] is True


@pytest.mark.parametrize(
    "ports",
    [
        # an InfiniBand port has no use but the fabric: Disabled with none active is a down fabric
        [("mlx5_0", "Down", "Disabled", "InfiniBand"), ("mlx5_1", "Down", "Disabled", "Ethernet")],
        # Polling: no link partner, not switched off
        [("mlx5_0", "Down", "Polling", "Ethernet"), ("mlx5_1", "Down", "Disabled", "Ethernet")],
        # one port up: the others are judged beside it (unused ports), not as a switched-off host
        [("mlx5_0", "Active", "LinkUp", "Ethernet"), ("mlx5_1", "Down", "Disabled", "Ethernet")],
    ],
)
def test_not_switched_off(ports: list[tuple[str, str, str, str]]) -> None:
    assert facts_of(ibstat(*ports))["switched_off_only"] is False


def test_a_device_named_before_the_listing_ends_is_a_device_without_ports() -> None:
    result = ib_ports.parse(DEVINFO_CUT)
    assert result.devices_without_ports == ["mlx5_1"]
    assert not ib_ports.shows_nothing(DEVINFO_CUT)  # something to judge, not an empty tree


def test_a_device_with_its_ports_is_not_without_ports() -> None:
    text = ibstat(("mlx5_0", "Active", "LinkUp", "InfiniBand")) + "\n" + DEVINFO_CUT.replace("mlx5_1", "mlx5_2")
    assert ib_ports.parse(text).devices_without_ports == ["mlx5_2"]


def host_with(tmp_path: Path, text: str) -> Path:
    files = {p.name: p.read_text() for p in HEALTHY_HOST.iterdir() if p.suffix == ".out"}
    files["ib-ports.1.out"] = files["ib-ports.2.out"] = text
    return make_host(tmp_path, "gpu-ib", files)


def test_node_health_cannot_judge_switched_off_roce_ports_unless_told_they_carry_traffic(tmp_path: Path) -> None:
    text = ibstat(("mlx5_0", "Down", "Disabled", "Ethernet"), ("mlx5_1", "Down", "Disabled", "Ethernet"))
    verdict, path = run_on("node-health", host_with(tmp_path, text))
    assert path[-1] == "ib-ports-switched-off" and not verdict, (verdict, path)  # cannot judge: no verdict
    told, told_path = run_on("node-health", host_with(tmp_path / "told", text), {"expect_ib": True})
    assert told["id"] == "ib-port-down" and told["action"] == "hardware-ticket", told_path


def test_node_health_still_tickets_disabled_infiniband_ports(tmp_path: Path) -> None:
    text = ibstat(("mlx5_0", "Down", "Disabled", "InfiniBand"), ("mlx5_1", "Down", "Disabled", "InfiniBand"))
    verdict, path = run_on("node-health", host_with(tmp_path, text))
    assert verdict["id"] == "ib-port-down", path


def test_node_health_cannot_judge_a_listing_cut_before_its_ports(tmp_path: Path) -> None:
    verdict, path = run_on("node-health", host_with(tmp_path, DEVINFO_CUT))
    assert not verdict, (verdict, path)  # cannot judge, not "network clear"
