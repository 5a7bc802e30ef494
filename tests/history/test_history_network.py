"""Fabric and NIC findings in the history store (issue 29: "fabric and NIC findings as they come")."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from nightowl.cli.main import main
from nightowl.history import extract
from nightowl.paths import data_dir

HOSTS = data_dir("fixtures") / "hosts"
NETWORK = set(extract.NETWORK_KINDS)


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def triage(host: str, out: Path, store: Path) -> Path:
    result = invoke(
        "triage", "node-health", "--replay", str(HOSTS / host), "--param", "expect_ib=true",
        "--out", str(out), "--history", str(store), "--format", "json",
    )  # fmt: skip
    return Path(json.loads(result.stdout)["bundle"])


def timeline(store: Path) -> list[dict]:
    result = invoke("history", "--history", str(store), "--format", "json")
    return json.loads(result.stdout)["timeline"]


def findings(store: Path) -> list[dict]:
    return [e for e in timeline(store) if e["what"] in NETWORK]


def sha256(bundle: Path) -> str:
    return (bundle / "manifest.sha256").read_text().split()[0]


def test_flapping_port_and_degraded_fabric_are_events_citing_their_bundle(tmp_path: Path) -> None:
    store = tmp_path / "h.sqlite3"
    flap = triage("ib-link-flapping-ndr", tmp_path / "b", store)
    fab = triage("fabric-health-unhealthy-clique2", tmp_path / "b", store)
    rows = findings(store)
    by_kind = {e["what"]: e for e in rows}
    assert set(by_kind) == {"nic_link_flapping", "fabric_degraded"}
    flapping = by_kind["nic_link_flapping"]
    assert flapping["host"] == "ib-link-flapping-ndr"
    assert "mlx5_3/1" in flapping["detail"]
    assert (flapping["bundle_id"], flapping["bundle_sha256"]) == (flap.name, sha256(flap))
    degraded = by_kind["fabric_degraded"]
    assert degraded["host"] == "fabric-health-unhealthy-clique2"
    assert "Unhealthy" in degraded["detail"]
    assert (degraded["bundle_id"], degraded["bundle_sha256"]) == (fab.name, sha256(fab))
    table = invoke("history", "--history", str(store)).stdout
    assert "nic_link_flapping: mlx5_3/1" in table and "fabric_degraded" in table


def test_importing_twice_or_seeing_the_state_again_adds_nothing(tmp_path: Path) -> None:
    store = tmp_path / "h.sqlite3"
    bundle = triage("ib-link-flapping-ndr", tmp_path / "b", store)
    before = findings(store)
    assert len(before) == 1
    for _ in range(2):
        result = invoke("history", "import", "--history", str(store), str(bundle))
        assert "0 new event(s)" in result.stdout
    triage("ib-link-flapping-ndr", tmp_path / "b", store)  # a later run of the same boot, the same state
    after = findings(store)
    assert len(after) == 1
    assert after[0]["bundle_id"] == before[0]["bundle_id"]  # the first bundle that saw it stays cited


def test_port_down_symbol_errors_and_gpu_bus_id_keys() -> None:
    down = extract.host_rows("h", HOSTS / "ib-port-linkup-not-active")["events"]
    assert [(e["kind"], e["pci"]) for e in down if e["kind"] in NETWORK] == [("nic_port_down", None)]
    assert "mlx5_7/1" in next(e["text"] for e in down if e["kind"] == "nic_port_down")
    # a port never up beside an active one, on another kind of adapter, is unused, not down: no row
    # (issue "never cry wolf", item 7; kvcache-ai/Mooncake#1999: a ConnectX-6 Dx beside two ConnectX-7)
    unused = extract.host_rows("h", HOSTS / "ib-port-down-disabled-roce")["events"]
    assert not [e for e in unused if e["kind"] in NETWORK]
    symbols = extract.host_rows("h", HOSTS / "ib-symbol-errors-ndr", window=5.0)["events"]
    assert [e["kind"] for e in symbols if e["kind"] in NETWORK] == ["nic_symbol_errors"]
    # without a known window a rate cannot be judged: no row, never a failed import
    assert not [e for e in extract.host_rows("h", HOSTS / "ib-symbol-errors-ndr")["events"] if e["kind"] in NETWORK]


def test_a_degraded_gpu_is_keyed_by_its_bus_id(tmp_path: Path) -> None:
    host = tmp_path / "host"
    host.mkdir()
    text = (HOSTS / "fabric-health-unhealthy-clique2" / "fabric.out").read_text()
    if "GPU 0000" not in text:
        text = "GPU 00000000:1B:00.0\n" + text
    (host / "fabric.out").write_text(text)
    rows = [e for e in extract.host_rows("h", host, "2026-12-01T00:00:00Z")["events"] if e["kind"] in NETWORK]
    assert len(rows) == 1 and rows[0]["pci"] == "0000:1b:00"  # the form kernel events and nvidia-smi rows use
    again = [e for e in extract.host_rows("h", host, "2026-12-02T00:00:00Z")["events"] if e["kind"] in NETWORK]
    assert again[0]["key"] == rows[0]["key"]  # the same state later in the same boot: one event


def test_unreadable_outputs_are_no_row_never_a_failed_import(tmp_path: Path) -> None:
    host = tmp_path / "host"
    host.mkdir()
    (host / "ib-ports.1.out").write_bytes(b"\xff\xfe garbage\n/sys/class/infiniband/x")
    (host / "ib-ports.2.out").write_text("")
    (host / "fabric.out").write_text("<nvidia_smi_log><gpu")
    assert not [e for e in extract.host_rows("h", host)["events"] if e["kind"] in NETWORK]


def test_healthy_hosts_add_no_network_event(tmp_path: Path) -> None:
    store = tmp_path / "h.sqlite3"
    triage("ib-healthy-ndr", tmp_path / "b", store)
    result = invoke(
        "triage", "node-health", "--replay", str(HOSTS / "healthy-l40s"),
        "--out", str(tmp_path / "b"), "--history", str(store), "--format", "json",
    )  # fmt: skip
    assert json.loads(result.stdout)["hosts"][0]["verdict"]["action"] == "none"
    assert findings(store) == []
    assert {e["host"] for e in timeline(store)} == {"ib-healthy-ndr", "healthy-l40s"}  # the runs are recorded
