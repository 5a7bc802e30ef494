"""Failure domains: grouping a sweep's hosts by rack/switch, domain findings and peer outliers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nightowl.cli.exit import ExitStatus
from nightowl.fleet.domains import domain_keys, domains_table, fleet_domains
from nightowl.fleet.inventory import InventoryError, load_inventory
from nightowl.paths import data_dir
from tests.fleet.replay_sweep import node_health_sweep

HOSTS = data_dir("fixtures") / "hosts"
NVLINK_FAULT = HOSTS / "xid145-nvlink-b200"  # recorded B200 with NVLink Xid 145
HEALTHY = HOSTS / "healthy-l40s"
FELL_OFF = HOSTS / "xid79-fallen-off-bus"


def _host(name: str, verdict_id: str | None, action: str = "reset-gpu") -> dict:
    verdict = {"id": verdict_id, "severity": "critical", "action": action} if verdict_id else None
    return {"host": name, "status": "ok" if verdict else "unreachable", "verdict": verdict}


def test_domain_keys_reads_rack_switch_and_listed_keys() -> None:
    variables = {"rack": "r07", "switch": 12, "tray": "t3", "pdu": "", "other": "x"}
    assert domain_keys(variables, ["tray", "pdu"]) == {"rack": "r07", "switch": "12", "tray": "t3"}


def test_k_of_n_members_sharing_a_verdict_make_one_domain_finding() -> None:
    hosts = [_host(f"n{i}", "nvlink-xid") for i in range(3)] + [_host(f"n{i}", "healthy", "none") for i in (3, 4)]
    hosts.append(_host("n5", None))
    (domain,) = fleet_domains(hosts, {h["host"]: {"rack": "r1"} for h in hosts})
    assert domain["members"] == ["n0", "n1", "n2", "n3", "n4", "n5"]
    assert domain["verdicts"] == {"nvlink-xid": 3, "healthy": 2, "(unreachable)": 1}
    (finding,) = domain["findings"]
    assert finding["members"] == ["n0", "n1", "n2"] and (finding["shared_by"], finding["of"]) == (3, 6)
    assert finding["action"].startswith("inspect rack r1 (rack power")
    assert finding["action"].endswith("n0, n1, n2")


def test_no_finding_below_the_thresholds_or_for_healthy_verdicts() -> None:
    two = [_host("a", "nvlink-xid"), _host("b", "nvlink-xid"), _host("c", "healthy", "none")]
    assert fleet_domains(two, {h["host"]: {"switch": "s1"} for h in two})[0]["findings"] == []
    # 3 of 7 is under half
    seven = [_host(f"n{i}", "nvlink-xid" if i < 3 else f"other-{i}") for i in range(7)]
    assert fleet_domains(seven, {h["host"]: {"rack": "r"} for h in seven})[0]["findings"] == []
    healthy = [_host(f"n{i}", "healthy", "none") for i in range(5)]
    assert fleet_domains(healthy, {h["host"]: {"rack": "r"} for h in healthy})[0]["findings"] == []
    assert fleet_domains(seven, {h["host"]: {"rack": "r"} for h in seven}, min_fraction=0.4)[0]["findings"]


def test_a_host_is_in_each_of_its_domains_and_hosts_without_domains_in_none() -> None:
    hosts = [_host("a", "healthy", "none"), _host("b", "healthy", "none"), _host("c", "healthy", "none")]
    memberships = {"a": {"rack": "r1", "switch": "s1"}, "b": {"rack": "r1", "switch": "s2"}}
    domains = fleet_domains(hosts, memberships)
    assert [(d["kind"], d["name"], d["members"]) for d in domains] == [
        ("rack", "r1", ["a", "b"]),
        ("switch", "s1", ["a"]),
        ("switch", "s2", ["b"]),
    ]


def test_outliers_by_verdict_and_by_xid_count_against_the_domain_median() -> None:
    hosts = [_host(f"n{i}", "healthy", "none") for i in range(4)] + [_host("odd", "gpu-fell-off-bus")]
    xids = {f"n{i}": {} for i in range(4)} | {"odd": {"79": 2}}
    (domain,) = fleet_domains(hosts, {h["host"]: {"rack": "r1"} for h in hosts}, xids)
    assert domain["outliers"] == [
        {"host": "odd", "by": "verdict", "value": "gpu-fell-off-bus", "peers": "healthy"},
        {"host": "odd", "by": "xid_events", "value": 2, "peers": 0},
    ]
    # every member with the same few Xids: nobody stands out
    same = {f"n{i}": {"13": 1} for i in range(4)} | {"odd": {"13": 1}}
    assert [o["by"] for o in fleet_domains(hosts, {h["host"]: {"rack": "r1"} for h in hosts}, same)[0]["outliers"]] == [
        "verdict"
    ]


def test_domains_table_shows_only_domains_with_something_to_say() -> None:
    hosts = [_host(f"n{i}", "nvlink-xid") for i in range(3)]
    quiet = [_host("q", "healthy", "none")]
    memberships = {h["host"]: {"rack": "r1"} for h in hosts} | {"q": {"rack": "r2"}}
    lines = domains_table(fleet_domains(hosts + quiet, memberships))
    assert lines[0] == "rack r1 (3 hosts: nvlink-xid 3)"
    assert lines[1].startswith("  finding: inspect rack r1") and len(lines) == 2


def test_inventories_give_domains(tmp_path: Path) -> None:
    yaml_inv = tmp_path / "inv.yaml"
    yaml_inv.write_text("domains: [tray]\nhosts:\n  - {name: gpu-01, labels: {rack: r1, tray: t1}}\n  - gpu-02\n")
    one, two = load_inventory(yaml_inv)
    assert one.domains == {"rack": "r1", "tray": "t1"} and two.domains == {}
    ansible = tmp_path / "hosts.yaml"
    ansible.write_text(
        "all:\n"
        "  vars: {domains: [nvlink_domain]}\n"
        "  children:\n"
        "    rack07:\n"
        "      vars: {rack: r07, nvlink_domain: nvl-a}\n"
        "      hosts:\n"
        "        gpu-[01:02]: {switch: leaf-3}\n"
    )
    hosts = load_inventory(ansible)
    assert [h.domains for h in hosts] == [{"rack": "r07", "switch": "leaf-3", "nvlink_domain": "nvl-a"}] * 2
    ini = tmp_path / "hosts.ini"
    ini.write_text("[rack09]\ngpu-09 switch=leaf-1\n[rack09:vars]\nrack=r09\n")
    assert load_inventory(ini)[0].domains == {"rack": "r09", "switch": "leaf-1"}
    bad = tmp_path / "bad.yaml"
    bad.write_text("domains: {a: 1}\nhosts: [gpu-01]\n")
    with pytest.raises(InventoryError, match="bad.yaml:1: `domains:` must list"):
        load_inventory(bad)


def _sweep(tmp_path: Path, recorded: dict[str, Path], rack: str = "nvl72-a") -> dict:
    status = node_health_sweep(tmp_path, recorded, "json", {name: {"rack": rack} for name in recorded})
    assert status == ExitStatus.ACTION_NEEDED
    return status


def test_one_rack_of_18_recorded_nodes_with_the_same_fabric_fault_is_one_finding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    names = [f"gpu-{i:02d}" for i in range(1, 19)]
    _sweep(tmp_path, dict.fromkeys(names, NVLINK_FAULT))
    report = json.loads(capsys.readouterr().out)
    assert [h["host"] for h in report["hosts"]] == names  # the contract's keys are kept
    (domain,) = report["domains"]
    assert (domain["kind"], domain["name"], domain["verdicts"]) == ("rack", "nvl72-a", {"nvlink-xid": 18})
    (finding,) = domain["findings"]
    assert finding["verdict"] == "nvlink-xid" and finding["members"] == names
    assert finding["action"].startswith("inspect rack nvl72-a") and ", ".join(names) in finding["action"]
    assert domain["outliers"] == []  # all alike: nobody stands out


def test_one_odd_recorded_node_among_healthy_peers_is_the_outlier(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recorded = {f"gpu-{i:02d}": HEALTHY for i in range(1, 6)} | {"gpu-06": FELL_OFF}
    _sweep(tmp_path, recorded)
    (domain,) = json.loads(capsys.readouterr().out)["domains"]
    assert domain["findings"] == []
    assert {o["host"] for o in domain["outliers"]} == {"gpu-06"}
    assert {o["by"] for o in domain["outliers"]} == {"verdict", "xid_events"}
