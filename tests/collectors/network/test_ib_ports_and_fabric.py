"""ib-ports, ib-ports-window, fabric and fabric-manager: one JSON case per public sample, plus the window arithmetic."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from nightowl.collectors import get_collector
from nightowl.collectors.gpu import fabric, fabric_manager, xid_nvlink5
from nightowl.collectors.network import ib_ports, ib_ports_window
from nightowl.collectors.readonly import allowed_shape
from tests.helpers import ROOT


def _ib_facts(name: str) -> dict:
    return ib_ports.facts(ib_ports.parse((ROOT / "fixtures/corpus/fabric" / name).read_text()))


def test_port_judgements_on_real_samples() -> None:
    read = _ib_facts("ibstat-roce-200-and-down-disabled-mooncake1999.txt")
    # down and Disabled, never up, beside two active ports: unused (issue "never cry wolf" 7), not down
    assert read["ports_down"] == []
    assert read["unused_ports"] == [
        {"port": "mlx5_10/1", "state": "DOWN", "phys_state": "Disabled", "link_layer": None}
    ]
    assert read["active_ports"] == ["mlx5_0/1", "mlx5_1/1"]
    old = _ib_facts("sysfs-counters-loop-mlx5_1-link-downed-255-gpud-pr943.txt")
    assert old["error_counts"]["mlx5_1/1"]["link_downed"] == 255
    assert old["has_counters"] is True
    # 255 of 8 bits, 15 of 4 bits and 65535 of 16 bits: each counts no more
    assert old["saturated_counters"] == {
        "mlx5_1/1": ["excessive_buffer_overrun_errors", "link_downed", "port_xmit_discards"]
    }


def _ports(text: str) -> dict:
    return ib_ports.facts(ib_ports.parse(text))


def test_a_down_port_is_unused_only_without_history_and_beside_an_active_one() -> None:
    active = (
        "/sys/class/infiniband/mlx5_0/ports/1/state:4: ACTIVE\n"
        "/sys/class/infiniband/mlx5_0/ports/1/phys_state:5: LinkUp\n"
    )
    down = (
        "/sys/class/infiniband/mlx5_1/ports/1/state:1: DOWN\n/sys/class/infiniband/mlx5_1/ports/1/phys_state:{phys}\n"
    )
    never = down.format(phys="3: Disabled")
    assert [p["port"] for p in _ports(active + never)["unused_ports"]] == ["mlx5_1/1"]
    assert _ports(active + never)["ports_down"] == []
    # alone on the host: nothing else carries the fabric, so it is down
    assert [p["port"] for p in _ports(never)["ports_down"]] == ["mlx5_1/1"]
    # a link-down counted, or traffic: it was in use once
    for counter in ("link_downed:1", "port_xmit_data:4096"):
        used = active + never + f"/sys/class/infiniband/mlx5_1/ports/1/counters/{counter}\n"
        assert [p["port"] for p in _ports(used)["ports_down"]] == ["mlx5_1/1"], counter
    # a link that trains and errs (LinkErrorRecovery) is no unused port
    recovering = active + down.format(phys="6: LinkErrorRecovery")
    assert [p["port"] for p in _ports(recovering)["ports_down"]] == ["mlx5_1/1"]


@pytest.mark.parametrize(
    ("counter", "value", "saturated"),
    [
        ("symbol_error", 65535, True),
        ("symbol_error", 65534, False),
        ("link_downed", 255, True),
        ("link_downed", 254, False),
        ("local_link_integrity_errors", 15, True),
        ("port_xmit_data", 65535, False),
    ],
)
def test_a_counter_at_its_width_is_saturated(counter: str, value: int, saturated: bool) -> None:
    port = "/sys/class/infiniband/mlx5_0/ports/1"
    text = f"{port}/state:4: ACTIVE\n{port}/counters/{counter}:{value}\n"
    assert bool(_ports(text)["saturated_counters"]) is saturated


def _ibstat(cards: list[tuple[str, str, str, str]]) -> str:
    """ibstat text of (device, CA type, system image GUID, state) single-port cards."""
    blocks = []
    for device, model, guid, state in cards:
        phys = "LinkUp" if state == "Active" else "Disabled"
        blocks.append(
            f"CA '{device}'\n\tCA type: {model}\n\tSystem image GUID: {guid}\n\tPort 1:\n"
            f"\t\tState: {state}\n\t\tPhysical state: {phys}\n\t\tRate: 400\n\t\tLink layer: Ethernet\n"
        )
    return "".join(blocks)


def test_which_never_up_ports_ibstat_names_unused() -> None:
    spare_port = _ibstat([("mlx5_0", "MT4129", "0xa", "Active"), ("mlx5_1", "MT4129", "0xa", "Down")])
    assert [p["port"] for p in _ports(spare_port)["unused_ports"]] == ["mlx5_1/1"]  # the second port of a card
    other_model = _ibstat([("mlx5_0", "MT4129", "0xa", "Active"), ("mlx5_1", "MT4125", "0xb", "Down")])
    assert [p["port"] for p in _ports(other_model)["unused_ports"]] == ["mlx5_1/1"]  # a front-end NIC
    spare_card = _ibstat(
        [
            ("mlx5_0", "MT4125", "0xa", "Active"),
            ("mlx5_1", "MT4125", "0xb", "Down"),
            ("mlx5_2", "MT4125", "0xb", "Down"),
        ]
    )
    assert [p["port"] for p in _ports(spare_card)["unused_ports"]] == ["mlx5_1/1", "mlx5_2/1"]  # no port of it up
    like_nics = _ibstat([("mlx5_0", "MT4129", "0xa", "Active"), ("mlx5_1", "MT4129", "0xb", "Down")])
    assert [p["port"] for p in _ports(like_nics)["ports_down"]] == ["mlx5_1/1"]  # one of a set of compute NICs


def test_rdma_link_both_formats_and_perfquery_counters() -> None:
    text = (
        "link mlx5_0/1 state ACTIVE physical_state LINK_UP netdev ens1f0\n"
        "0/1: mlx5_1/1: subnet_prefix fe80:0000:0000:0000 lid 12 sm_lid 4 lmc 0 state DOWN physical_state POLLING\n"
    )
    read = _ports(text)
    assert read["port_count"] == 2 and read["active_ports"] == ["mlx5_0/1"]
    assert [p["phys_state"] for p in read["unused_ports"]] == ["Polling"]
    perf = (
        "# Port extended counters: Lid 2052 port 1 (CapMask: 0x5300 CapMask2: 0x0000002)\n"
        "PortSelect:......................1\nPortXmitData:....................178791657177235\n"
        "SymbolErrorCounter:..............0\nLinkDownedCounter:...............1\nPortXmitDiscards:................20046\n"
    )
    counted = _ports(perf)
    assert counted["port_count"] == 1 and counted["has_counters"] is True
    assert counted["error_counts"] == {"lid2052/1": {"link_downed": 1, "port_xmit_discards": 20046}}
    assert counted["warnings"] == []


def test_fabric_judgements_on_real_samples() -> None:
    def facts_of(name: str) -> dict:
        return fabric.facts(fabric.parse((ROOT / name).read_text()))

    hgx = facts_of("fixtures/corpus/gpu/nvsmi-q-h100-sxm-565-gpu0-trimmed.txt")
    assert hgx["degraded_gpus"] == [] and hgx["nvl_system"] is False  # CliqueId 0 is normal on HGX
    azure = facts_of("fixtures/corpus/fabric/nvsmi-q-fabric-completed-insufficient-resources-azhpc-images506.txt")
    assert azure["degraded"] == [{"gpu": "GPU block 1", "name": None, "reasons": ["Status Insufficient Resources"]}]
    assert facts_of("fixtures/corpus/gpu/nvsmi-q-l40s-550-healthy.txt")["gpus_with_fabric"] == []


def test_clique_zero_is_degraded_on_an_nvl_system_only() -> None:
    text = (
        "GPU 00000009:01:00.0\n    Product Name                          : NVIDIA GB200\n    Fabric\n"
        "        State                             : Completed\n        Status                            : Success\n"
        "        CliqueId                          : 0\n"
        "        ClusterUUID                       : 00000000-0000-0000-0000-000000000000\n"
    )
    facts = fabric.facts(fabric.parse(text))
    assert facts["nvl_system"] is True
    reasons = ["CliqueId 0 on an NVL system"]
    assert facts["degraded"] == [{"gpu": "0009:01:00", "name": "NVIDIA GB200", "reasons": reasons}]


def test_fabric_xml_form() -> None:
    xml = (
        '<nvidia_smi_log><gpu id="00000000:18:00.0"><product_name>NVIDIA H100 80GB HBM3</product_name>'
        "<fabric><state>Completed</state><status>Insufficient Resources</status><cliqueId>0</cliqueId>"
        "<clusterUuid>00000000-0000-0000-0000-000000000000</clusterUuid><health><bandwidth>N/A</bandwidth></health>"
        "</fabric></gpu></nvidia_smi_log>"
    )
    facts = fabric.facts(fabric.parse(xml))
    assert facts["degraded_gpus"] == ["0000:18:00"]


@pytest.mark.parametrize(
    ("text", "state", "active"),
    [("active\n", "active", True), ("inactive\n", "inactive", False), ("failed\n", "failed", False), ("", None, None)],
)
def test_fabric_manager_states(text: str, state: str | None, active: bool | None) -> None:
    result = fabric_manager.parse(text)
    assert (result.state, result.active) == (state, active)


def _dump(counters: dict[str, dict[str, int]], states: dict[str, str] | None = None) -> dict:
    lines = []
    for device, values in counters.items():
        base = f"/sys/class/infiniband/{device}/ports/1"
        lines += [f"{base}/state:{(states or {}).get(device, '4: ACTIVE')}", f"{base}/phys_state:5: LinkUp"]
        lines += [f"{base}/rate:400 Gb/sec (4X NDR)", f"{base}/link_layer:InfiniBand"]
        lines += [f"{base}/counters/{name}:{value}" for name, value in values.items()]
    return ib_ports.facts(ib_ports.parse("\n".join(lines)))


def test_window_flap_symbol_rate_stale_and_reset() -> None:
    before = _dump(
        {
            "mlx5_0": {"link_downed": 1, "symbol_error": 0},
            "mlx5_1": {"symbol_error": 10},
            "mlx5_2": {"link_downed": 7, "symbol_error": 3},
            "mlx5_3": {"port_rcv_errors": 50},
        }
    )
    after = _dump(
        {
            "mlx5_0": {"link_downed": 2, "symbol_error": 0},
            "mlx5_1": {"symbol_error": 11},  # 1 in 10 s = 360/hour: above the 120/hour limit
            "mlx5_2": {"link_downed": 7, "symbol_error": 3},
            "mlx5_3": {"port_rcv_errors": 0},
        }
    )
    window = ib_ports_window.derive({"ib_ports": before, "ib_ports_after": after}, {"ib_window_seconds": 10})
    assert window["has_window"] is True
    assert window["flapping_ports"] == ["mlx5_0/1"]
    assert window["degraded_ports"] == ["mlx5_1/1"] and window["degraded"][0]["per_hour"] == 360.0
    assert window["stale_counts"] == [{"port": "mlx5_2/1", "counts": {"link_downed": 7, "symbol_error": 3}}]
    assert window["counters_reset"] == ["mlx5_3/1"]


def test_window_symbol_errors_below_the_limit_are_not_degraded() -> None:
    before, after = _dump({"mlx5_0": {"symbol_error": 5}}), _dump({"mlx5_0": {"symbol_error": 6}})
    window = ib_ports_window.derive({"ib_ports": before, "ib_ports_after": after}, {"ib_window_seconds": 3600})
    assert window["degraded"] == [] and window["deltas"] == {"mlx5_0/1": {"symbol_error": 1}}


def test_window_state_change_is_a_flap_and_no_counters_is_no_window() -> None:
    before = _dump({"mlx5_0": {}}, {"mlx5_0": "1: DOWN"})
    after = _dump({"mlx5_0": {}})
    window = ib_ports_window.derive({"ib_ports": before, "ib_ports_after": after}, {"ib_window_seconds": 5})
    assert window["flapping_ports"] == ["mlx5_0/1"] and window["has_window"] is False
    empty = ib_ports_window.derive({"ib_ports": before, "ib_ports_after": {}}, {"ib_window_seconds": 5})
    assert empty["has_window"] is False and empty["only_in_one_read"] == ["mlx5_0/1"]


def test_thresholds_name_their_source() -> None:
    rows = ib_ports_window.thresholds()
    assert {"link_downed", "symbol_error"} <= set(rows)
    assert all(row["source"].startswith(("NVIDIA", "IBTA")) and "https://" in row["source"] for row in rows.values())


def test_the_sysfs_command_is_allow_listed_and_reads_a_tree(tmp_path: Path) -> None:
    """The collector's own script, run on a copied tree (only the root differs), prints what parse reads."""
    assert allowed_shape(ib_ports.SYSFS_COMMAND) is not None
    assert get_collector("ib-ports").commands[0] == ib_ports.SYSFS_COMMAND
    port = tmp_path / "class/infiniband/mlx5_0/ports/1"
    (port / "counters").mkdir(parents=True)
    for name, value in {"state": "4: ACTIVE", "phys_state": "5: LinkUp", "rate": "400 Gb/sec (4X NDR)"}.items():
        (port / name).write_text(value + "\n")
    (port / "link_layer").write_text("InfiniBand\n")
    (port / "counters/link_downed").write_text("3\n")
    script = ib_ports.SYSFS_SCRIPT.replace("/sys/class/", f"{tmp_path}/class/")
    out = subprocess.run(["sh", "-c", script, "ib-ports"], capture_output=True, text=True, check=True).stdout
    read = ib_ports.parse(out)
    assert [(p.label, p.state, p.rate_gbps, p.counters) for p in read.ports] == [
        ("mlx5_0/1", "ACTIVE", 400.0, {"link_downed": 3})
    ]
    assert ib_ports.shows_nothing("") and ib_ports.shows_nothing("grep: no such file\n")


def test_nvlink5_decode_sheet_rows_are_well_formed_and_cover_every_code() -> None:
    from nightowl.collectors.gpu import xid_catalog

    rows = xid_nvlink5.decode_rows()
    assert {row.xid for row in rows} == set(range(144, 151)) == set(xid_catalog.NVLINK5_CODES)
    for row in rows:
        assert len(row.intrinfo_v1) == 32 and len(row.intrinfo_v2) == 32, row
        assert row.resolution in xid_nvlink5.RESOLUTION_ACTIONS, row
        assert "analyzing-xid-catalog" in row.source
        # every row's own patterns decode back to it (the table and the matcher agree)
        for layout, pattern in (("v1", row.intrinfo_v1), ("v2", row.intrinfo_v2)):
            value = int(pattern.replace("-", "0"), 2)
            assert xid_nvlink5.pattern_matches(pattern, value), (layout, row)


@pytest.mark.parametrize(
    ("line", "subcode", "resolution", "layout"),
    [  # gpud's own decodes of these public lines: 149.38, 149.37, 144.0, 145.0 (leptonai/gpud#1160, #1174)
        ("149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x026001c6 0x00000000 0x0 0x0 0x0 0x0)", 38, "IGNORE", "v1"),
        ("149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x025001c6 0x00000000 0x0 0x0 0x0 0x0)", 37, "RESET_GPU", "v1"),
        ("144, SAW_MVB Nonfatal XC0 i0 Link 0 (0x00000001 0x00000008 0x0 0x0 0x0 0x0)", 0, "IGNORE", "v2"),
        ("145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008 0x1 0x0 0x00100000 0x4)", 0, "IGNORE", "v1"),
    ],
)
def test_nvlink5_lines_decode_as_published(line: str, subcode: int, resolution: str, layout: str) -> None:
    code, text = line.split(", ", 1)
    decoded = xid_nvlink5.decode_line(int(code), text)
    assert (decoded["decoded"], decoded["subcode"], decoded["resolution"], decoded["layout"]) == (
        True,
        subcode,
        resolution,
        layout,
    )


def test_nvlink5_layout_follows_the_driver_branch() -> None:
    text = "NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x025001c6 0x00000000 0x0 0x0 0x0 0x0)"
    assert xid_nvlink5.decode_line(149, text, branch=570)["layout"] == "v1"
    newer = xid_nvlink5.decode_line(149, text, branch=580)  # an R575+ driver prints the V2 layout: no V2 row fits
    assert newer["decoded"] is False and "no row" in newer["reason"]
    elided = xid_nvlink5.decode_line(145, "RLW_RXPIPE Nonfatal XC0 i0 Link 11 (...)")
    assert elided["decoded"] is False and elided["unit"] == "RLW_RXPIPE"
    assert xid_nvlink5.driver_branch("570.158.01") == 570 and xid_nvlink5.driver_branch(None) is None


def test_nvlink_error_window_rising_and_old_counts() -> None:
    from nightowl.collectors.gpu import nvlink, nvlink_errors_window

    def read(replay: int, crc: int) -> dict:
        text = f"GPU 0: NVIDIA H100 80GB HBM3\n Link 0: Replay Errors: {replay}\n Link 0: CRC Errors: {crc}\n"
        return nvlink.facts(nvlink.parse_errors(text))

    rising = nvlink_errors_window.derive({"nvlink_errors": read(2, 5), "nvlink_errors_after": read(3, 5)}, {})
    assert rising["failing_gpus"] == [0] and rising["rising"][0]["counter"] == "replay"
    old = nvlink_errors_window.derive({"nvlink_errors": read(2, 5), "nvlink_errors_after": read(2, 5)}, {})
    assert old["rising"] == [] and old["stale_counts"] == [{"gpu": 0, "link": 0, "counts": {"replay": 2, "crc": 5}}]
    assert (
        nvlink_errors_window.derive({"nvlink_errors": read(2, 5), "nvlink_errors_after": {}}, {})["has_window"] is False
    )
