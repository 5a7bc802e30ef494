"""What a caller of the scheduler actions reads, written out (nightowl/fleet/scheduler_actions.py): the exit
statuses the contract names, each outcome line as actions.jsonl keeps it, the note a report about another node
leaves, and a dry run that logs nothing even when the scheduler fails (scripts/mutate's survivors led here)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nightowl.fleet import scheduler_actions
from nightowl.fleet.scheduler_actions import action_status, check_node, record_failure, verdict_from_report
from nightowl.fleet.slurm_actions import SlurmError

REPORT = {"hosts": [{"host": "gpu-17", "verdict": {"id": "gpu-fell-off-bus", "action": "reboot-node"}}]}


def test_the_exit_statuses_are_the_documented_numbers() -> None:
    """docs/reference.md#scheduler-actions: 4 held, 5 failed; a script branches on these numbers."""
    assert action_status([{"result": "held"}]) == 4
    assert action_status([{"result": "would-hold"}, {"result": "drained"}]) == 4
    assert action_status([{"result": "held"}, {"result": "set-unconfirmed"}]) == 5
    assert action_status([{"result": "drained"}, {"result": "already-drained"}]) == 0


def test_a_failure_is_logged_as_one_whole_line(tmp_path: Path) -> None:
    log = tmp_path / "actions.jsonl"
    entry = record_failure(log, "gpu-2", "drain", "x" * 600, dry_run=False)
    [line] = [json.loads(raw) for raw in log.read_text().splitlines()]
    assert line == entry
    wanted = {"node": "gpu-2", "what": "drain", "why": "x" * 500, "result": "failed", "bundle": None}
    assert {key: line[key] for key in wanted} == wanted and line["bundle_sha256"] is None


def test_a_failure_the_log_cannot_take_says_so(tmp_path: Path) -> None:
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    entry = record_failure(blocked / "actions.jsonl", "gpu-2", "resume", "boom", dry_run=False, result="refused")
    assert entry["logged"] is False and entry["result"] == "refused" and entry["what"] == "resume"
    assert entry["why"].startswith("boom; not logged (") and entry["node"] == "gpu-2"


def test_a_dry_run_failure_is_returned_and_not_logged(tmp_path: Path) -> None:
    log = tmp_path / "actions.jsonl"
    entry = record_failure(log, "gpu-2", "drain", "boom", dry_run=True)
    wanted = {
        "node": "gpu-2",
        "what": "drain",
        "why": "boom",
        "result": "failed",
        "bundle": None,
        "bundle_sha256": None,
    }
    assert entry == wanted
    assert not log.exists()


def test_the_note_names_each_other_node_once(tmp_path: Path) -> None:
    note, refused = check_node(REPORT, ("gpu-03", "gpu-04"), "drain", tmp_path / "l", dry_run=True, for_other_node=True)
    assert refused == []
    assert note == (
        "the report is about gpu-17, not gpu-03: applied with --report-for-other-node; "
        "the report is about gpu-17, not gpu-04: applied with --report-for-other-node"
    )


def test_a_refusal_per_node_is_logged_with_its_reason(tmp_path: Path) -> None:
    log = tmp_path / "actions.jsonl"
    note, refused = check_node(REPORT, ("gpu-03",), "drain", log, dry_run=False, for_other_node=False)
    assert note is None
    [line] = [json.loads(raw) for raw in log.read_text().splitlines()]
    assert (line["node"], line["what"], line["result"]) == ("gpu-03", "drain", "refused")
    assert line["why"] == "the report is about gpu-17, not gpu-03: refused (--report-for-other-node applies it)"
    assert refused == [line]


def test_the_verdict_is_the_first_hosts() -> None:
    report = {"hosts": [REPORT["hosts"][0], {"host": "gpu-18", "verdict": {"id": "healthy", "action": "none"}}]}
    assert verdict_from_report(report, None, None, None) == ("gpu-fell-off-bus", "reboot-node", None)
    no_action = {"hosts": [{"verdict": {"id": "v"}}], "bundle": ""}
    assert verdict_from_report(no_action, None, None, None) == ("v", "", None)


def failing_scheduler(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    def fail(*args: Any, **kwargs: Any) -> dict[str, Any]:
        raise SlurmError("scontrol: Invalid node name")

    monkeypatch.setattr("nightowl.fleet.slurm_actions.Slurm", lambda: None)
    monkeypatch.setattr(f"nightowl.fleet.slurm_actions.{name}", fail)


def test_a_dry_run_drain_the_scheduler_fails_on_logs_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    failing_scheduler(monkeypatch, "drain")
    log = tmp_path / "actions.jsonl"
    done = scheduler_actions.drain_nodes(("gpu-1",), "v", "reboot-node", None, log, dry_run=True)
    assert [(d["node"], d["what"], d["result"]) for d in done] == [("gpu-1", "drain", "failed")]
    assert not log.exists()
    scheduler_actions.drain_nodes(("gpu-1",), "v", "reboot-node", None, log, dry_run=False)
    assert log.read_text().count("\n") == 1


def test_a_resume_the_scheduler_fails_on_is_logged_as_a_resume(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    failing_scheduler(monkeypatch, "resume")
    log = tmp_path / "actions.jsonl"
    done = scheduler_actions.resume_nodes(("gpu-1", "gpu-2"), log, dry_run=False, lock=None, node_cap=None)
    failed = [("gpu-1", "resume", "failed"), ("gpu-2", "resume", "failed")]
    assert [(d["node"], d["what"], d["result"]) for d in done] == failed
    assert [json.loads(raw)["what"] for raw in log.read_text().splitlines()] == ["resume", "resume"]


def test_a_report_of_another_shape_has_no_verdict() -> None:
    """A report is untrusted JSON: hosts as an object, or a first host that is no object, holds no verdict."""
    for report in ({"hosts": {"gpu-17": REPORT["hosts"][0]}}, {"hosts": ["gpu-17", REPORT["hosts"][0]]}):
        with pytest.raises(ValueError) as raised:
            verdict_from_report(report, None, None, None)
        assert str(raised.value) == "--report: no verdict in the report (nightowl check --format json of the node)"
    trailing = {"hosts": [REPORT["hosts"][0], "junk"]}
    assert verdict_from_report(trailing, None, None, None) == ("gpu-fell-off-bus", "reboot-node", None)
