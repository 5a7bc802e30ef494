"""The status update, the postmortem draft's title and the run's Outcome (nightowl/outcome.py) name the same
verdict for a run over several hosts: the most severe, the first of equals (issue 44 item 1: readers of one
run cannot disagree)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from nightowl.outcome import outcome_from_run
from nightowl.postmortem import sre
from nightowl.reports import status_update


def verdict(ident: str, severity: str, action: str) -> dict[str, Any]:
    return {"id": ident, "severity": severity, "action": action, "summary": f"{ident} on its host. More."}


CASES = [
    (
        [
            verdict("w", "warning", "drain-and-reset"),
            verdict("c1", "critical", "reboot-node"),
            verdict("c2", "critical", "reset-gpu"),
        ],
        "c1",
    ),
    (
        [verdict("i", "info", "none"), verdict("w1", "warning", "reset-gpu"), verdict("w2", "warning", "reboot-node")],
        "w1",
    ),
    ([verdict("c", "critical", "reboot-node"), verdict("o", "ok", "none")], "c"),
]


@pytest.mark.parametrize(("verdicts", "named"), CASES)
def test_the_status_update_and_the_outcome_name_the_same_verdict(verdicts: list[dict[str, Any]], named: str) -> None:
    names = [f"gpu-{n}" for n in range(len(verdicts))]
    summary = {
        "runbook": "xid",
        "run_id": "r1",
        "bundle": None,
        "hosts": [{"host": h, "status": "ok", "verdict": v} for h, v in zip(names, verdicts, strict=True)],
    }
    runs = [SimpleNamespace(host=h, status="ok", verdict=v, error=None) for h, v in zip(names, verdicts, strict=True)]
    result = SimpleNamespace(runbook="xid", runs=runs, bundle=None, bundle_error=None, status_update=None)
    outcome = outcome_from_run(result, "schedule")
    told = status_update.context(summary, now=0.0)
    assert outcome.verdict is not None and outcome.verdict["id"] == named
    assert told["action"] == f"{outcome.verdict['action']}: {outcome.verdict['id']} on its host."
    assert outcome.host == names[verdicts.index(next(v for v in verdicts if v["id"] == outcome.verdict["id"]))]
    drafted = sre.title(SimpleNamespace(verdicts=summary, outcome=None))  # the draft's title, without outcome.json
    others = "1 other host" if len(names) == 2 else f"{len(names) - 1} other hosts"
    assert drafted == f"{named} on {outcome.host} and {others}"
    # rendered from the Outcome (the run hands it; a saved bundle keeps it as outcome.json): the same words
    assert status_update.context(summary, now=0.0, outcome=outcome) == told
    assert sre.title(SimpleNamespace(verdicts=summary, outcome=outcome.as_json())) == drafted


def test_the_status_update_takes_a_storms_common_cause_from_the_outcome(tmp_path: Path) -> None:
    """The cause is read from the Outcome the run hands ``write`` (its ``verdict.common_cause``), not from the
    bundle's manifest again: a manifest with no storm record still gets the cause the Outcome names."""
    (tmp_path / "manifest.json").write_text("{}")
    verdicts = [verdict("gpu-fell-off-bus", "critical", "reboot-node") for _ in range(3)]
    names = ["r12-gpu-01", "r12-gpu-02", "r12-gpu-03"]
    hosts = [{"host": h, "status": "ok", "verdict": v} for h, v in zip(names, verdicts, strict=True)]
    summary = {"runbook": "xid", "run_id": "r1", "bundle": str(tmp_path), "hosts": hosts}
    runs = [SimpleNamespace(host=h, status="ok", verdict=v, error=None) for h, v in zip(names, verdicts, strict=True)]
    result = SimpleNamespace(runbook="xid", runs=runs, bundle=None, bundle_error=None, status_update=None)
    cause = {
        "kind": "rack",
        "name": "r12",
        "suspect": "rack power",
        "verdict": "gpu-fell-off-bus",
        "host_action": "reboot-node",
        "shared_by": 3,
        "of": 3,
        "members": names,
        "primary": None,
        "line": "common cause: rack r12",
    }
    outcome = outcome_from_run(result, "alert", common_cause=cause)
    text = status_update.write(tmp_path, summary, outcome).read_text()
    impact = next(row for row in text.splitlines() if row.startswith("Impact: "))
    assert impact.startswith("Impact: common cause: rack r12 (rack power): check it before reboot-node on 3 nodes")
    # without the Outcome (a summary alone) there is no cause to tell
    assert "common cause" not in status_update.write(tmp_path, summary).read_text().lower()
