"""Failure domains from the hosts' own facts (the fabric's ClusterUUID) and the primary node of a domain.

Every host is a real recording replayed (fixtures/hosts/*/SOURCE.md names each source): the NVL
fabric block of kubernetes-sigs/dra-driver-nvidia-gpu#626 (ClusterUUID dc6e40c4-..., health
Unhealthy), a GPU fallen off the bus (Xid 79), and peers showing only Xid 43, 13 or 31.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nightowl.fleet.domains import fleet_domains, primary_node, with_fact_domains, xid_is_follower
from nightowl.fleet.outliers import nvlink_domain
from nightowl.paths import data_dir
from tests.fleet.replay_sweep import node_health_sweep

HOSTS = data_dir("fixtures") / "hosts"
CLIQUE_UNHEALTHY = HOSTS / "fabric-health-unhealthy-clique2"
CLUSTER = "dc6e40c4-d722-4357-9ba6-5291dd461278"  # the recording's ClusterUUID


def sweep(
    tmp_path: Path, recorded: dict[str, Path], fmt: str, domains: dict[str, dict[str, str]] | None = None
) -> None:
    node_health_sweep(tmp_path, recorded, fmt, domains or {})


def test_18_nodes_of_one_nvlink_domain_with_the_same_fabric_fault_are_one_finding_from_facts_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    names = [f"nvl-{i:02d}" for i in range(1, 19)]
    sweep(tmp_path, dict.fromkeys(names, CLIQUE_UNHEALTHY), "json")  # the inventory names no domain
    report = json.loads(capsys.readouterr().out)
    assert report["fleet"]["nvlink_domains"] == dict.fromkeys(names, CLUSTER)
    (domain,) = report["domains"]
    assert (domain["kind"], domain["name"], domain["members"]) == ("nvlink_domain", CLUSTER, names)
    (finding,) = domain["findings"]
    assert finding["verdict"] == "nvlink-fabric-degraded" and finding["members"] == names
    assert finding["action"].startswith(f"inspect nvlink_domain {CLUSTER} (NVLink trays and fabric manager)")
    assert domain["outliers"] == [] and domain["primary"] is None  # alike: nobody stands out, nobody leads
    sweep(tmp_path, dict.fromkeys(names, CLIQUE_UNHEALTHY), "table")
    table = capsys.readouterr().out
    assert f"nvlink_domain {CLUSTER} (18 hosts: nvlink-fabric-degraded 18)" in table
    assert f"  finding: inspect nvlink_domain {CLUSTER}" in table


def test_the_one_node_with_a_fault_the_peers_xids_follow_is_the_primary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recorded = {
        "gpu-01": HOSTS / "xid43-sympathetic-only",
        "gpu-02": HOSTS / "xid79-fallen-off-bus",
        "gpu-03": HOSTS / "xid13-app-fault",
        "gpu-04": HOSTS / "xid31-app-fault-llama",
        "gpu-05": HOSTS / "healthy-l40s",
    }
    sweep(tmp_path, recorded, "json", {name: {"rack": "r07"} for name in recorded})
    (domain,) = json.loads(capsys.readouterr().out)["domains"]
    primary = domain["primary"]
    assert (primary["host"], primary["xids"]) == ("gpu-02", ["79"])
    assert primary["followers"] == ["gpu-01", "gpu-03", "gpu-04"]
    assert "Xid 13, 31, 43" in primary["why"]
    sweep(tmp_path, recorded, "table", {name: {"rack": "r07"} for name in recorded})
    assert "  primary: gpu-02 (it alone shows Xid 79;" in capsys.readouterr().out


def test_follower_xids_come_from_the_catalog() -> None:
    assert [xid_is_follower(c) for c in ("43", "45", "13", "31")] == [True] * 4
    assert [xid_is_follower(c) for c in ("79", "48", "74", "S20034", "99999")] == [False] * 5


def test_no_primary_when_the_evidence_does_not_single_one_out() -> None:
    names = ["a", "b", "c"]
    assert primary_node(names, {"a": {"79": 1}, "b": {"48": 2}, "c": {"43": 1}}) is None  # two faults
    assert primary_node(names, {"a": {"79": 1}, "b": {}, "c": {}}) is None  # nobody follows
    assert primary_node(names, {}) is None  # no kernel log read
    assert primary_node(names, {"a": {"79": 1, "43": 2}, "b": {"45": 1}})["host"] == "a"


def test_fact_domains_join_the_inventorys_and_the_inventory_wins() -> None:
    fleet = {"nvlink_domains": {"a": "u1", "b": "u1"}}
    merged = with_fact_domains({"a": {"rack": "r1"}, "b": {"nvlink_domain": "tray-3"}}, fleet)
    assert merged == {"a": {"rack": "r1", "nvlink_domain": "u1"}, "b": {"nvlink_domain": "tray-3"}}
    hosts = [{"host": h, "status": "ok", "verdict": None} for h in ("a", "b")]
    assert [(d["kind"], d["name"]) for d in fleet_domains(hosts, merged)] == [
        ("rack", "r1"),
        ("nvlink_domain", "u1"),
        ("nvlink_domain", "tray-3"),
    ]


def test_nvlink_domain_needs_one_non_zero_cluster() -> None:
    assert nvlink_domain({"cluster_uuids": [CLUSTER.upper()]}) == CLUSTER
    assert nvlink_domain({"cluster_uuids": ["00000000-0000-0000-0000-000000000000"]}) is None
    assert nvlink_domain({"cluster_uuids": [CLUSTER, "11111111-0000-0000-0000-000000000000"]}) is None
    assert nvlink_domain({}) is None
