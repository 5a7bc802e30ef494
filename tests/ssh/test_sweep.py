"""`nightowl sweep` over the real OpenSSH test fleet: verdicts, fault hosts, formats, exit codes."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from nightowl.cli.main import main
from tests.ssh.fleet import Fault, Fleet

# Starts real sshd processes: `pytest -m "not integration"` leaves it out.
pytestmark = pytest.mark.integration

RECORDED = {"healthy": "healthy", "xid79": "gpu-fell-off-bus", "nvsmi-hung": "nvidia-smi-hung"}


def sweep(fleet: Fleet, tmp_path: Path, names: list[str], *extra: str) -> tuple[int, str]:
    inventory = fleet.write_inventory(tmp_path / "hosts.yaml", names)
    args = [
        "sweep",
        "--inventory",
        str(inventory),
        "--known-hosts",
        str(fleet.known_hosts),
        "--ssh-config",
        str(fleet.ssh_config),
        "--identity",
        str(fleet.client_key),
        "--connect-timeout",
        "2",
        "--command-timeout",
        "3",
        "--host-timeout",
        "8",
        "--out",
        str(tmp_path / "bundles"),
        *extra,
    ]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    return result.exit_code, result.output


def test_sweep_reaches_each_recorded_verdict_and_reports_each_fault(fleet: Fleet, tmp_path: Path) -> None:
    faults = [Fault.REFUSED, Fault.SILENT, Fault.WRONG_HOST_KEY, Fault.REJECTED_KEY, Fault.HANG]
    names = [*RECORDED, *(f.value for f in faults), "recorded-unreachable"]
    started = time.monotonic()
    code, output = sweep(fleet, tmp_path, names, "--format", "json")
    elapsed = time.monotonic() - started
    data = json.loads(output)
    hosts = {h["host"]: h for h in data["hosts"]}
    assert [h["host"] for h in data["hosts"]] == names  # inventory order (docs/reference.md#verdicts)
    for name, verdict in RECORDED.items():
        assert hosts[name]["status"] == "ok", (name, hosts[name]["error"])
        assert hosts[name]["verdict"]["id"] == verdict
    reasons = {
        "refused": "refused",
        "silent": "timed out",
        "wrong-host-key": "host key mismatch",
        "rejected-key": "auth failed",
        "recorded-unreachable": "refused",
    }
    for name, reason in reasons.items():
        assert hosts[name]["status"] == "unreachable", hosts[name]
        assert hosts[name]["error"].startswith(reason), hosts[name]["error"]
    # answers SSH, every command hangs: the host's own timeout ends each one, the kernel log's too, so a hung
    # nvidia-smi is no GPU finding: host unresponsive or overloaded, cannot judge (issue "never cry wolf", 6)
    hang = hosts[Fault.HANG.value]
    assert hang["status"] == "incomplete" and hang["verdict"] is None
    assert "host unresponsive or overloaded" in hang["error"] and "timed_out" in hang["error"]
    assert code == 1
    assert elapsed < 30, f"sweep took {elapsed:.1f}s: deadlines not honoured"
    bundle = Path(data["bundle"])
    assert (bundle / "hosts" / "xid79" / "kernel-log.out").is_file()
    assert not (bundle / "hosts" / "refused").exists()
    assert json.loads((bundle / "verdicts.json").read_text())["hosts"][list(hosts).index("refused")]["status"] == (
        "unreachable"
    )


def test_sweep_table_and_prometheus(fleet: Fleet, tmp_path: Path) -> None:
    names = ["healthy", "gpu-01", "gpu-02", "xid79"]
    code, table = sweep(fleet, tmp_path, names, "--format", "table", "--textfile", str(tmp_path / "n.prom"))
    assert code == 1
    rows = {line.split()[0]: line.split() for line in table.splitlines()[1:5]}
    assert rows["xid79"][2:4] == ["gpu-fell-off-bus", "reboot-node"]
    assert rows["gpu-01"][2:4] == ["healthy", "none"]
    assert "hosts by verdict: healthy 3, gpu-fell-off-bus 1" in table
    from prometheus_client.parser import text_string_to_metric_families

    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families((tmp_path / "n.prom").read_text())
        for s in family.samples
    }
    node = ("runbook", "node-health")
    assert samples[("nightowl_host_needs_action", (("host", "xid79"), node))] == 1
    assert samples[("nightowl_host_needs_action", (("host", "gpu-02"), node))] == 0
    assert samples[("nightowl_sweep_hosts", (node, ("status", "ok")))] == 4
    assert samples[("nightowl_xid_events", (("code", "79"), ("host", "xid79"), node))] == 1
    xid_hosts = {dict(labels)["host"] for name, labels in samples if name == "nightowl_xid_events"}
    assert xid_hosts == {"xid79"}  # a clean kernel log has no Xid series


def test_sweep_exit_codes_and_limit(fleet: Fleet, tmp_path: Path) -> None:
    code, _ = sweep(fleet, tmp_path, ["gpu-03", "gpu-04"], "--format", "json")
    assert code == 0
    code, _ = sweep(fleet, tmp_path, ["gpu-05", Fault.REFUSED.value], "--format", "json")
    assert code == 3
    code, output = sweep(fleet, tmp_path, ["gpu-06", "gpu-07", "xid79"], "--format", "json", "--limit", "gpu-*")
    assert code == 0 and [h["host"] for h in json.loads(output)["hosts"]] == ["gpu-06", "gpu-07"]


def test_sweep_strict_host_keys_refuse_unknown_hosts(fleet: Fleet, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    inventory = fleet.write_inventory(tmp_path / "hosts.yaml", ["gpu-08"])
    base = [
        "sweep",
        "--inventory",
        str(inventory),
        "--known-hosts",
        str(empty),
        "--ssh-config",
        str(fleet.ssh_config),
        "--identity",
        str(fleet.client_key),
        "--format",
        "json",
        "--out",
        str(tmp_path / "b"),
    ]
    strict = json.loads(CliRunner().invoke(main, base).output)
    assert strict["hosts"][0]["status"] == "unreachable"
    assert strict["hosts"][0]["error"].startswith("unknown host key")
    accepted = json.loads(CliRunner().invoke(main, [*base, "--accept-new"]).output)
    assert accepted["hosts"][0]["verdict"]["id"] == "healthy"
    assert empty.read_text().strip()  # the key was recorded


def test_sweep_labels_spec_strings_by_their_host_everywhere(fleet: Fleet, tmp_path: Path) -> None:
    """Issue: labels were raw specs (`ssh://root@gpu-02:2222?jump=bastion`) in every view."""
    from prometheus_client.parser import text_string_to_metric_families

    from nightowl.engine.layout import host_dirname

    bastion_ip, bastion_port = fleet.addresses["gpu-02"]
    specs = [f"{fleet.spec('gpu-01')}?jump={fleet.user}@{bastion_ip}:{bastion_port}", fleet.spec("xid79")]
    expected = [fleet.addresses["gpu-01"][0], fleet.addresses["xid79"][0]]
    inventory = tmp_path / "specs.yaml"
    inventory.write_text("hosts:\n" + "".join(f"  - {spec}\n" for spec in specs))
    base = ["sweep", "--inventory", str(inventory), "--known-hosts", str(fleet.known_hosts)]
    base += ["--ssh-config", str(fleet.ssh_config), "--identity", str(fleet.client_key), "--host-timeout", "20"]
    textfile = tmp_path / "n.prom"
    table = CliRunner().invoke(main, [*base, "--out", str(tmp_path / "t"), "--textfile", str(textfile)])
    assert table.exit_code == 1, table.output
    assert [line.split()[0] for line in table.output.splitlines()[1:3]] == expected
    assert "ssh://" not in table.output
    labels = {
        s.labels["host"]
        for family in text_string_to_metric_families(textfile.read_text())
        for s in family.samples
        if "host" in s.labels
    }
    assert labels == set(expected)
    result = CliRunner().invoke(main, [*base, "--format", "json", "--out", str(tmp_path / "j")])
    report = json.loads(result.stdout)
    assert [h["host"] for h in report["hosts"]] == expected
    assert [(h.get("verdict") or {}).get("id") for h in report["hosts"]] == ["healthy", "gpu-fell-off-bus"]
    folders = sorted(p.name for p in Path(report["bundle"]).glob("hosts/*"))
    assert folders == sorted(host_dirname(name) for name in expected)
