"""Nothing read is "cannot judge" (exit 3), never an `escalate` verdict (exit 1): docs/reference.md#exit-status puts
"every collector failed" under exit 3. The same answer from triage, check and sweep (JSON, exit, textfile)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from nightowl.cli.exit import ExitStatus
from nightowl.cli.main import main
from nightowl.cli.sweep_cmd import param_values, run_sweep
from nightowl.library import runbooks
from nightowl.transports.replay import ReplayTransport

REASON = "cannot judge: no collector returned evidence"
# The node each runbook ends on when neither nvidia-smi nor the kernel log (nor the engine log) was read.
ENDS = {"node-health": "no-evidence", "xid": "not-enough-evidence", "oom": "not-enough-evidence"}


def _json(output: str) -> dict:
    """The run's JSON, which opens the output (check's log line on stderr may follow it)."""
    return json.JSONDecoder().raw_decode(output[output.index("{") :])[0]


@pytest.mark.parametrize("runbook", sorted(ENDS))
def test_replay_of_a_host_with_every_output_missing_is_cannot_judge(runbook: str, tmp_path: Path) -> None:
    empty = tmp_path / "host"
    empty.mkdir()
    args = ["triage", runbook, "--replay", str(empty), "--format", "json", "--out", str(tmp_path / "b")]
    result = CliRunner().invoke(main, [*args, "--history", "off"])
    assert result.exit_code == ExitStatus.NO_VERDICT, result.output
    (host,) = _json(result.output)["hosts"]
    assert host["verdict"] is None and host["status"] == "incomplete"
    assert host["error"].startswith(REASON) and "every collector failed" in host["error"]
    assert host["path"][-1] == ENDS[runbook]  # the node's name stays in the JSON, on the path


def test_check_with_no_command_on_path_exits_3_and_its_textfile_asks_no_action(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bare = tmp_path / "bin"
    bare.mkdir()
    monkeypatch.setenv("PATH", str(bare))  # nvidia-smi, journalctl, dmesg, sudo: none found
    monkeypatch.setenv("NODE_NAME", "gpu-17")
    textfile = tmp_path / "node.prom"
    argv = ["check", "--format", "json", "--textfile", str(textfile), "--out", str(tmp_path / "b")]
    result = CliRunner().invoke(main, [*argv, "--history", "off", "--log-format", "json"])
    assert result.exit_code == ExitStatus.NO_VERDICT, result.output
    (host,) = _json(result.output)["hosts"]
    assert host["verdict"] is None and host["error"].startswith(REASON)
    assert "nvidia-smi" in host["error"] and host["path"][-1] == "no-evidence"
    prom = textfile.read_text()
    assert 'nightowl_host_needs_action{host="gpu-17",runbook="node-health"} 0.0' in prom
    assert 'verdict="no-evidence"' not in prom and 'status="incomplete"' in prom


def test_sweep_of_an_unread_host_beside_a_healthy_one_exits_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from nightowl.paths import data_dir

    empty = tmp_path / "host"
    empty.mkdir()
    healthy = data_dir("fixtures") / "hosts" / "healthy-l40s"
    status = run_sweep(
        runbooks.load("node-health"),
        {"ok-1": lambda: ReplayTransport(healthy, "ok-1"), "dark-2": lambda: ReplayTransport(empty, "dark-2")},
        param_values((), None),
        {"command_timeout": None, "host_timeout": None},
        fmt="json",
        textfile=tmp_path / "fleet.prom",
        log_format="json",
        out_dir=tmp_path / "b",
        forks=1,
    )
    assert status == ExitStatus.NO_VERDICT
    hosts = {h["host"]: h for h in json.loads(capsys.readouterr().out)["hosts"]}
    assert hosts["ok-1"]["verdict"]["action"] == "none"
    assert hosts["dark-2"]["verdict"] is None and hosts["dark-2"]["error"].startswith(REASON)
    prom = (tmp_path / "fleet.prom").read_text()
    assert 'nightowl_host_needs_action{host="dark-2",runbook="node-health"} 0.0' in prom


def test_a_hung_command_is_still_evidence_when_nothing_else_was_read(tmp_path: Path) -> None:
    """The guard is not "no facts, no verdict" for every failure: nvidia-smi hanging says the driver is stuck."""
    hung = tmp_path / "host"
    hung.mkdir()
    (hung / "nvidia-smi.timeout").write_text("")
    args = ["triage", "node-health", "--replay", str(hung), "--format", "json", "--out", str(tmp_path / "b")]
    result = CliRunner().invoke(main, [*args, "--history", "off"])
    assert result.exit_code == ExitStatus.ACTION_NEEDED, result.output
    (host,) = _json(result.output)["hosts"]
    assert host["verdict"]["id"] == "nvidia-smi-hung"
    assert not host["error"].startswith("cannot judge")  # the verdict stands: its reason is not "cannot judge"
