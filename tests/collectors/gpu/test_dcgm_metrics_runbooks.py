"""The xid and node-health runbooks on telemetry alone (issue 47): a node whose kernel log and nvidia-smi were
not read is judged from dcgm-exporter's scrape, every verdict says what it could not see, and a blind DCGM
ends "cannot judge" (exit 3). Recorded hosts are built from the scrapes under fixtures/dcgm/."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from nightowl.library.rehearse import replay_case

ROOT = Path(__file__).resolve().parents[3]
DCGM = ROOT / "fixtures" / "dcgm"
URL = {"dcgm_url": "http://10.0.0.7:9400/metrics"}
RUNBOOKS = ("xid", "node-health")


def recorded(tmp_path: Path, scrape: str, extra: Path | None = None) -> Path:
    """A recorded host holding only the exporter's scrape (plus, with ``extra``, another host's outputs)."""
    host = tmp_path / "gpu-17"
    if extra is not None:
        shutil.copytree(extra, host)
    else:
        host.mkdir()
    shutil.copy(DCGM / scrape, host / "dcgm-metrics.out")
    return host


def run(runbook: str, host: Path, params: dict[str, Any] | None = None) -> Any:
    case = {"host": "gpu-17", "params": URL if params is None else params}
    (result,) = replay_case(runbook, case, host_dirs={"gpu-17": host})
    return result


@pytest.mark.parametrize("runbook", RUNBOOKS)
def test_an_xid_79_seen_only_by_dcgm_reboots_the_node_and_says_what_it_could_not_see(
    runbook: str, tmp_path: Path
) -> None:
    result = run(runbook, recorded(tmp_path, "derived/xid79-t4.prom"))
    assert result.verdict["id"] == "gpu-fell-off-bus" and result.verdict["action"] == "reboot-node"
    assert "dcgm-telemetry" in result.path
    summary = result.verdict["summary"]
    assert "kernel log not read" in summary and "any earlier Xid are unknown" in summary
    assert result.verdict["gpus"] == ["GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e"]


@pytest.mark.parametrize("runbook", RUNBOOKS)
def test_a_row_remap_failure_in_dcgm_is_a_hardware_ticket(runbook: str, tmp_path: Path) -> None:
    result = run(runbook, recorded(tmp_path, "derived/remap-failure-a30.prom"))
    assert result.verdict["id"] == "row-remap-failed" and result.verdict["action"] == "hardware-ticket"
    assert result.verdict["gpus"] == ["GPU-2d20791a-b4a6-ba59-97f1-e95b99fe5b49"]


@pytest.mark.parametrize("runbook", RUNBOOKS)
@pytest.mark.parametrize("scrape", ["pr736-mixed-node.prom", "derived/xid-blank-t4.prom", "gist-1x-names.prom"])
def test_a_blind_dcgm_is_cannot_judge_never_healthy(runbook: str, scrape: str, tmp_path: Path) -> None:
    result = run(runbook, recorded(tmp_path, scrape))
    assert result.verdict is None and result.status == "incomplete"
    assert "DCGM is not reporting health" in result.error
    assert result.path[-1] == "dcgm-blind"


@pytest.mark.parametrize("runbook", RUNBOOKS)
def test_a_reporting_dcgm_with_nothing_wrong_is_healthy_with_its_limits(runbook: str, tmp_path: Path) -> None:
    result = run(runbook, recorded(tmp_path, "datadog-t4.prom"))
    assert result.verdict["id"] == "healthy" and result.verdict["action"] == "none"
    assert "Telemetry only" in result.verdict["summary"] and "kernel log not read" in result.verdict["summary"]


def test_the_xid_window_count_is_judged_by_the_catalog(tmp_path: Path) -> None:
    result = run("xid", recorded(tmp_path, "pr239-xid-window.prom"))  # Xid 42 (video processor exception)
    assert result.verdict is not None and "dcgm-telemetry" in result.path
    assert "42" in result.verdict["summary"] and "kernel log not read" in result.verdict["summary"]


@pytest.mark.parametrize("runbook", RUNBOOKS)
def test_without_dcgm_url_nothing_changes(runbook: str, tmp_path: Path) -> None:
    result = run(runbook, recorded(tmp_path, "derived/xid79-t4.prom"), params={})
    assert result.verdict is None and "dcgm-telemetry" not in result.path  # the old "nothing read" end


@pytest.mark.parametrize("runbook", RUNBOOKS)
def test_a_node_read_by_ssh_is_judged_by_its_own_evidence_not_dcgm(runbook: str, tmp_path: Path) -> None:
    """The healthy L40S recording plus a DCGM scrape saying Xid 79: the node's own outputs decide."""
    host = recorded(tmp_path, "derived/xid79-t4.prom", extra=ROOT / "fixtures" / "hosts" / "healthy-l40s")
    result = run(runbook, host)
    assert "dcgm-telemetry" not in result.path
    assert result.verdict is not None and result.verdict["id"] != "gpu-fell-off-bus"


def test_triage_exits_3_on_a_blind_dcgm(tmp_path: Path) -> None:
    from nightowl.cli.main import main

    host = recorded(tmp_path, "derived/xid-blank-t4.prom")
    args = ["triage", "xid", "--replay", str(host), "--param", f"dcgm_url={URL['dcgm_url']}", "--out", str(tmp_path)]
    result = CliRunner().invoke(main, [*args, "--history", "off"])
    assert result.exit_code == 3, result.output
    assert "DCGM is not reporting health" in result.output
