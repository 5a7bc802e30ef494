"""Host memory CE storms (issue 23.5), PCIe AER of kernel 6.x (23.6) and NIC link flaps (23.7) in the kernel log."""

from __future__ import annotations

import pytest

from nightowl import knowledge
from nightowl.collectors.gpu.kernel_log import facts, host_thresholds, parse
from nightowl.collectors.network.nic_links import link_change, most_in_window
from tests.helpers import ROOT

HOSTS = ROOT / "fixtures" / "hosts"


def _facts(text: str) -> dict:
    return facts(parse(text))


def test_thresholds_are_data_with_public_sources() -> None:
    rows = knowledge.read_csv("host_thresholds.csv", required=("id", "threshold", "window_seconds", "source"))
    assert {row["id"] for row in rows} == set(host_thresholds())
    assert all(row["source"].startswith("https://") for row in rows)


SKX = (
    "[{t}] EDAC MC0: {n} CE memory read error on CPU_SrcID#0_MC#0_Chan#1_DIMM#0 (channel:1 slot:0 page:0x1 offset:0x0)"
)
SBRIDGE = "[{t}] EDAC MC1: {n} CE memory scrubbing error on CPU_SrcID#1_Ha#0_Chan#0_DIMM#0 (channel:0 slot:0 page:0x0)"
I10NM = "[{t}] EDAC MC2: {n} CE memory read error on CPU_SrcID#1_MC#2_Chan#0_DIMM#1 (channel:0 slot:1 page:0x2)"
LEGACY = (
    '[{t}] EDAC MC0: CE page 0x2a3b0, offset 0x0, grain 8, syndrome 0x8c, row 2, channel 0, label "DIMM_A2": amd64_edac'
)


@pytest.mark.parametrize("line", [SKX, SBRIDGE, I10NM])
def test_hundreds_in_one_report_is_a_storm(line: str) -> None:
    data = _facts(line.format(t="  100.000001", n=300) + "\n")
    assert len(data["host_memory_ce_storm_dimms"]) == 1


@pytest.mark.parametrize("line", [SKX, SBRIDGE, I10NM, LEGACY])
def test_repeats_on_one_dimm_within_seconds_is_a_storm(line: str) -> None:
    text = "".join(line.format(t=f"  100.{n:06d}", n=1) + "\n" for n in range(4))
    assert len(_facts(text)["host_memory_ce_storm_dimms"]) == 1


@pytest.mark.parametrize("line", [SKX, SBRIDGE, LEGACY])
def test_a_single_corrected_error_is_no_storm(line: str) -> None:
    data = _facts(line.format(t="  100.000001", n=1) + "\n")
    assert data["host_memory_ce_storm_dimms"] == [] and data["host_memory_errors"]["corrected"] == 1


def test_errors_spread_over_days_are_no_storm() -> None:
    text = "".join(SKX.format(t=f"{100 + n * 90000:>12}.000001", n=2) + "\n" for n in range(6))
    assert _facts(text)["host_memory_ce_storm_dimms"] == []


def test_legacy_wording_names_the_dimm() -> None:
    data = _facts(LEGACY.format(t="  1.0") + "\n" + LEGACY.replace('"DIMM_A2"', '""').format(t="  2.0") + "\n")
    assert data["host_memory_corrected_dimms"] == ["DIMM_A2", "MC0_row2_channel0"]


AER_6X = (
    """[ 5012.345678] pcieport 0000:16:02.0: AER: Correctable error message received from 0000:17:00.0
[ 5012.345690] nvidia 0000:17:00.0: PCIe Bus Error: severity=Correctable, type=Physical Layer, (Receiver ID)
[ 5012.345695] nvidia 0000:17:00.0:   device [10de:2330] error status/mask=00000001/0000e000
[ 5012.345700] nvidia 0000:17:00.0:    [ 0] RxErr                  (First)
[ 5013.100000] pcieport 0000:16:02.0: AER: Multiple Correctable error message received from 0000:17:00.0
[ 5013.100010] nvidia 0000:17:00.0: PCIe Bus Error: severity=Correctable, type=Data Link Layer, (Transmitter ID)
[ 5013.100015] nvidia 0000:17:00.0:   device [10de:2330] error status/mask=00001100/00002000
[ 5013.100020] nvidia 0000:17:00.0:    [ 8] Rollover
[ 5013.100025] nvidia 0000:17:00.0:    [12] Timeout
[ 5020.000000] pcieport 0000:16:02.0: AER: Uncorrectable (Non-Fatal) error message received from 0000:17:00.0
"""
    "[ 5020.000010] nvidia 0000:17:00.0: PCIe Bus Error: severity=Uncorrectable (Non-Fatal), type=Transaction Layer,"
    """ (Requester ID)
[ 5020.000015] nvidia 0000:17:00.0:   device [10de:2330] error status/mask=00004000/00000000
[ 5020.000020] nvidia 0000:17:00.0:    [14] CmpltTO                (First)
[ 5020.000025] nvidia 0000:17:00.0: AER:   TLP Header: 40000001 0000000f 17000000 00000000
"""
)


def test_aer_of_kernel_6x_attributed_by_address() -> None:
    """Composed in the layout of drivers/pci/pcie/aer.c (6.x): "error message received from", multi-error,
    "error status/mask" and bit lines stay with their report."""
    data = _facts(AER_6X)
    aer = [e for e in data["events"] if e["kind"] == "pcie_aer"]
    assert [e["pci"] for e in aer] == ["0000:17:00"] * 3
    assert data["pcie_aer_by_severity"] == {"correctable": 2, "nonfatal": 1, "fatal": 0}
    assert any("error status/mask=00004000/00000000" in line for line in aer[2]["lines"])
    assert data["warnings"] == []


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("[ 1.0] mlx5_core 0000:3b:00.0 ens1f0np0: Link down", ("ens1f0np0", "down", "0000:3b:00.0", "mlx5_core")),
        ("[ 1.0] mlx5_core 0000:3b:00.0 ens1f0np0: Link up", ("ens1f0np0", "up", "0000:3b:00.0", "mlx5_core")),
        ("[ 1.0] ice 0000:17:00.0 ens2f0: NIC Link is Down", ("ens2f0", "down", "0000:17:00.0", "ice")),
        ("[ 1.0] e1000e: eno1 NIC Link is Up 1000 Mbps Full Duplex", ("eno1", "up", None, "e1000e")),
        ("[ 1.0] igb 0000:05:00.0 eth0: igb: eth0 NIC Link is Down", ("eth0", "down", "0000:05:00.0", "igb")),
        (
            "[ 1.0] bond0: (slave ens1f0np0): link status definitely down, disabling slave",
            ("ens1f0np0", "down", None, "bonding bond0"),
        ),
        (
            "[ 1.0] bond0: link status definitely down for interface eth1, disabling it",
            ("eth1", "down", None, "bonding bond0"),
        ),
    ],
)
def test_link_wordings(line: str, expected: tuple) -> None:
    assert link_change(line) == expected


def test_flapping_port_named_and_a_single_bounce_is_not() -> None:
    flapping = _facts((HOSTS / "nic-link-flapping-mlx5-bond" / "kernel-log.out").read_text())
    assert flapping["nic_flapping_ports"] == ["ens1f0np0"] and flapping["nic_flapping_devices"] == ["0000:3b:00"]
    port = flapping["nic_links"][0]
    assert (port["downs"], port["ups"]) == (4, 4)  # bonding's "definitely down" is the same outage
    once = _facts((HOSTS / "nic-link-one-bounce-mlx5" / "kernel-log.out").read_text())
    assert once["nic_flapping_ports"] == [] and once["nic_links"][0]["downs"] == 1


def test_slow_repeated_downs_within_a_day() -> None:
    text = "".join(
        f"[{1000 + n * 3600:>8}.0] mlx5_core 0000:3b:00.1 ens1f1np1: Link {s}\n"
        for n in range(3)
        for s in ("down", "up")
    )
    assert _facts(text)["nic_flapping_ports"] == ["ens1f1np1"]


def test_window_counting() -> None:
    assert most_in_window([0.0, 1.0, 50.0, 51.0, 52.0], 30) == 3
    assert most_in_window([0.0, None], 30) == 2  # unknown times: counted together
