"""Scheduler actions as library calls (nightowl/fleet/scheduler_actions.py): one outcome per node, in order,
a node the scheduler fails on never leaving the rest undone, a report about another node refused per node,
and the exit status the outcomes add up to; no click, no exit."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from nightowl.fleet import scheduler_actions
from nightowl.fleet.scheduler_actions import (
    ACTIONS_FAILED,
    ACTIONS_HELD,
    action_status,
    check_node,
    each_node,
    read_report,
    verdict_from_report,
)
from nightowl.fleet.slurm_actions import SlurmError

REPORT = {"hosts": [{"host": "gpu-17", "verdict": {"id": "gpu-fell-off-bus", "action": "reboot-node"}}], "bundle": "/b"}


@pytest.mark.parametrize(
    ("results", "status"),
    [
        (["drained", "already-drained"], 0),
        (["drained", "held"], ACTIONS_HELD),
        (["held", "failed"], ACTIONS_FAILED),
        (["drained-unconfirmed"], ACTIONS_FAILED),
    ],
)
def test_the_outcomes_add_up_to_the_exit_status(results: list[str], status: int) -> None:
    assert action_status([{"result": result} for result in results]) == status


def test_an_unlogged_or_refused_outcome_is_a_failure() -> None:
    assert action_status([{"result": "drained", "logged": False}]) == ACTIONS_FAILED
    assert action_status([{"result": "not-ours"}], refused=frozenset({"not-ours"})) == ACTIONS_FAILED
    assert action_status([{"result": "not-ours"}]) == 0


def test_each_node_goes_on_past_a_node_the_scheduler_fails_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("nightowl.fleet.slurm_actions.Slurm", lambda: "client")
    failures = {"gpu-2": SlurmError("scontrol update: Invalid node name"), "gpu-3": subprocess.TimeoutExpired("x", 30)}

    def act(client: Any, node: str) -> dict[str, Any]:
        assert client == "client"
        if node in failures:
            raise failures[node]
        return {"node": node, "what": "drain", "result": "drained", "why": "ok"}

    log = tmp_path / "actions.jsonl"
    done = each_node(("gpu-1", "gpu-2", "gpu-3", "gpu-4"), act, "drain", log, dry_run=False)
    assert [(d["node"], d["result"]) for d in done] == [
        ("gpu-1", "drained"),
        ("gpu-2", "failed"),
        ("gpu-3", "failed"),
        ("gpu-4", "drained"),
    ]
    assert "Invalid node name" in done[1]["why"] and log.read_text().count("\n") == 2  # the failures logged
    assert action_status(done) == ACTIONS_FAILED


def test_a_report_about_another_node_is_refused_per_node_or_noted(tmp_path: Path) -> None:
    log = tmp_path / "actions.jsonl"
    note, refused = check_node(REPORT, ("gpu-03",), "drain", log, dry_run=True, for_other_node=False)
    assert note is None and [(r["node"], r["result"]) for r in refused] == [("gpu-03", "refused")]
    assert "gpu-17" in refused[0]["why"] and not log.exists()  # a dry run logs nothing
    note, refused = check_node(REPORT, ("gpu-03",), "drain", log, dry_run=True, for_other_node=True)
    assert refused == [] and note is not None and "--report-for-other-node" in note
    assert check_node(REPORT, ("gpu-17",), "drain", log, dry_run=True, for_other_node=False) == (None, [])


def test_the_verdict_comes_from_the_report_unless_given() -> None:
    report = read_report(str(REPORT).replace("'", '"'))
    assert verdict_from_report(report, None, None, None) == ("gpu-fell-off-bus", "reboot-node", Path("/b"))
    assert verdict_from_report(report, "x", "y", Path("/c")) == ("x", "y", Path("/c"))
    assert read_report("not json") is None and read_report("[1]") is None
    with pytest.raises(ValueError, match="no verdict in the report"):
        verdict_from_report({"hosts": [{"host": "gpu-17", "verdict": None}]}, None, None, None)


def test_drain_nodes_counts_the_drains_a_dry_run_would_make(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, tuple[str, ...]]] = []

    def drain(client: Any, node: str, verdict: str, action: str, caps: Any, log: Path, **options: Any) -> dict:
        seen.append((node, options["planned"]))
        return {"node": node, "what": "drain", "result": "would-drain", "why": f"{verdict} ({action})"}

    monkeypatch.setattr("nightowl.fleet.slurm_actions.Slurm", lambda: None)
    monkeypatch.setattr("nightowl.fleet.slurm_actions.drain", drain)
    done = scheduler_actions.drain_nodes(("a", "b", "c"), "v", "reboot-node", None, tmp_path / "l", dry_run=True)
    assert [d["node"] for d in done] == ["a", "b", "c"]
    assert seen == [("a", ()), ("b", ("a",)), ("c", ("a", "b"))]
