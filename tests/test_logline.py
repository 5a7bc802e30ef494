"""`serve` and `check` log JSON lines (level, node, runbook, verdict) unless told text or on a terminal."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from nightowl.cli.main import main as cli
from nightowl.logline import LogLine, render, resolve_format
from nightowl.paths import data_dir

XID79 = data_dir("fixtures") / "hosts" / "xid79-fallen-off-bus"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_auto_is_text_on_a_terminal_and_json_elsewhere() -> None:
    assert resolve_format("auto", _Terminal()) == "text"
    assert resolve_format("auto", io.StringIO()) == "json"
    assert resolve_format("json", _Terminal()) == "json"
    assert resolve_format("text", io.StringIO()) == "text"


def test_a_json_line_carries_the_fields_and_text_stays_text() -> None:
    line = LogLine("gpu-17: gpu-fell-off-bus", level="warning", node="gpu-17", verdict="gpu-fell-off-bus", x=None)
    assert line == "gpu-17: gpu-fell-off-bus"  # callers that want text get text
    record = json.loads(render(line, "json", "nightowl.serve", now=0.25))
    assert record == {
        "time": "1970-01-01T00:00:00.250Z",
        "level": "warning",
        "logger": "nightowl.serve",
        "msg": "gpu-17: gpu-fell-off-bus",
        "node": "gpu-17",
        "verdict": "gpu-fell-off-bus",
    }
    assert json.loads(render("plain", "json", "nightowl.serve"))["level"] == "info"
    assert render(line, "text", "nightowl.serve").endswith(" gpu-17: gpu-fell-off-bus")


@pytest.fixture
def xid79_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool, kind in (("nvidia-smi", "nvidia-smi"), ("journalctl", "kernel-log"), ("dmesg", "kernel-log")):
        (bin_dir / tool).write_text(f"#!/bin/sh\ncat '{XID79 / f'{kind}.out'}'\n")
        (bin_dir / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("NODE_NAME", "gpu-17")


def test_check_logs_a_json_line_per_node_when_not_on_a_terminal(tmp_path: Path, xid79_node: None) -> None:
    result = CliRunner().invoke(cli, ["check", "--format", "json", "--out", str(tmp_path / "b")])
    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout)["hosts"][0]["host"] == "gpu-17"  # stdout stays the report
    (line,) = result.stderr.splitlines()
    record = json.loads(line)
    assert {k: record[k] for k in ("level", "logger", "node", "runbook", "verdict", "action", "status")} == {
        "level": "warning",
        "logger": "nightowl.check",
        "node": "gpu-17",
        "runbook": "node-health",
        "verdict": "gpu-fell-off-bus",
        "action": "reboot-node",
        "status": "ok",
    }
    assert Path(record["bundle"]).is_dir()


def test_check_log_format_text_keeps_stderr_for_problems_only(tmp_path: Path, xid79_node: None) -> None:
    result = CliRunner().invoke(cli, ["check", "--log-format", "text", "--out", str(tmp_path / "b")])
    assert result.exit_code == 1 and result.stderr == ""
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    result = CliRunner().invoke(cli, ["check", "--log-format", "json", "--out", str(blocker / "b")])
    assert result.exit_code == 2
    records = [json.loads(line) for line in result.stderr.splitlines()]
    assert [r["level"] for r in records] == ["warning", "error"]
    assert "cannot write the bundle" in records[1]["msg"]


def test_serve_log_lines_carry_node_runbook_and_verdict(tmp_path: Path) -> None:
    from tests.receiver.test_serve import capture_first_alert, write_config

    lines: list[str] = []
    capture_first_alert(write_config(tmp_path), lines.append)
    records = [json.loads(render(line, "json", "nightowl.serve")) for line in lines]
    admitted, finished = records[0], records[-1]
    assert (admitted["level"], admitted["status"], admitted["runbook"]) == ("info", "queued", "xid")
    assert finished["node"] == admitted["node"] == "xid79-fallen-off-bus"
    assert (finished["level"], finished["verdict"], finished["action"]) == (
        "warning",
        "gpu-fell-off-bus",
        "reboot-node",
    )
    assert finished["status"] == "captured" and Path(finished["bundle"]).is_dir()
