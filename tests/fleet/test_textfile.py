"""The node-exporter textfile: one series per node, named by NODE_NAME, accepted by `promtool check metrics`."""

from __future__ import annotations

import shutil
import socket
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from nightowl.cli.main import main as cli
from nightowl.fleet.identity import node_name
from nightowl.fleet.textfile import prometheus_textfile, write_textfile

SUMMARY = {
    "runbook": "node-health",
    "hosts": [
        {
            "host": "gpu-17",
            "status": "ok",
            "duration": 1.5,
            "verdict": {"id": "gpu-fell-off-bus", "severity": "critical", "action": "reboot-node"},
        },
        {"host": "gpu-18", "status": "unreachable", "duration": 10.0, "verdict": None},
    ],
    "fleet": {"xid_events": {"gpu-17": {"79": 2, "S20034": 1}}},
}


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_one_verdict_info_series_per_host_with_its_labels() -> None:
    samples = _samples(prometheus_textfile(SUMMARY))
    info = {dict(labels)["host"]: dict(labels) for name, labels in samples if name == "nightowl_host_verdict_info"}
    assert info["gpu-17"]["verdict"] == "gpu-fell-off-bus" and info["gpu-17"]["action"] == "reboot-node"
    assert (info["gpu-18"]["status"], info["gpu-18"]["verdict"]) == ("unreachable", "none")
    assert samples[("nightowl_sweep_hosts", (("runbook", "node-health"), ("status", "unreachable")))] == 1
    assert samples[("nightowl_xid_events", (("code", "S20034"), ("host", "gpu-17"), ("runbook", "node-health")))] == 1
    assert samples[("nightowl_sweep_duration_seconds", (("runbook", "node-health"),))] == 10.0


def test_textfile_passes_promtool_check_metrics(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (apt-get install -y prometheus)")
    path = tmp_path / "nightowl.prom"
    write_textfile(path, SUMMARY)
    result = subprocess.run([promtool, "check", "metrics"], input=path.read_text(), capture_output=True, text=True)
    assert result.returncode == 0 and not result.stdout.strip() and not result.stderr.strip(), result


def test_node_name_from_node_name_else_the_host_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NODE_NAME", "gpu-17")
    assert node_name() == "gpu-17"
    monkeypatch.setenv("NODE_NAME", "bad name; rm")
    with pytest.raises(ValueError, match="NODE_NAME"):
        node_name()
    monkeypatch.delenv("NODE_NAME")
    assert node_name() == socket.gethostname() != "local"


def test_check_writes_the_node_name_into_textfile_and_bundle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("nvidia-smi", "journalctl", "dmesg"):  # no GPU tools: evidence too thin, still named
        (bin_dir / tool).write_text("#!/bin/sh\nexit 127\n")
        (bin_dir / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("NODE_NAME", "gpu-17")
    textfile = tmp_path / "n.prom"
    result = CliRunner().invoke(
        cli, ["check", "--out", str(tmp_path / "b"), "--textfile", str(textfile), "--format", "json"]
    )
    hosts = {
        dict(labels)["host"] for name, labels in _samples(textfile.read_text()) if name == "nightowl_host_verdict_info"
    }
    assert hosts == {"gpu-17"}, result.output
    assert [p.name for p in (tmp_path / "b").glob("*/hosts/*")] == ["gpu-17"]
