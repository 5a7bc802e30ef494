"""The postmortem of a saved bundle reads the run's Outcome from its outcome.json (issue 44 item 1): the
verdict it titles and what it says started the run are the Outcome's, even where the hosts' verdicts or the
manifest would say otherwise (the proof that it reads the file); a bundle written before outcome.json was
kept is told from its manifest as before.

Real runs of the `xid` runbook over two recorded hosts (fixtures/hosts): one fallen off the bus (critical),
one with an application's Xid 13 (restart-app).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nightowl.library import runbooks
from nightowl.mcp.bundles import read_bundle
from nightowl.postmortem import render_bundle
from nightowl.run import RunSettings, run_and_save
from nightowl.transports.replay import ReplayTransport
from tests.postmortem.bundles import HOSTS, make_bundle

FALLEN, APP = "xid79-fallen-off-bus", "xid13-app-fault"


def detection(markdown: str) -> str:
    return markdown.split("## Detection", 1)[1].split("\n## ", 1)[0]


def title(markdown: str) -> str:
    return next(line for line in markdown.splitlines() if line.startswith("# Postmortem: "))


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    """A bundle as `nightowl triage` saves it (by hand), over both hosts."""
    hosts = {h: (lambda d=HOSTS / h: ReplayTransport(d, d.name)) for h in (FALLEN, APP)}
    result = run_and_save(runbooks.load("xid"), hosts, tmp_path, settings=RunSettings(history=False))
    assert result.bundle is not None and (result.bundle / "outcome.json").is_file()
    return result.bundle


def test_the_draft_of_a_saved_bundle_follows_its_outcome_json(saved: Path) -> None:
    as_run = render_bundle(saved)
    assert title(as_run) == f"# Postmortem: gpu-fell-off-bus on {FALLEN} and 1 other host"
    assert "the run was started by hand (`nightowl triage` or `demo`)" in detection(as_run)

    path = saved / "outcome.json"
    outcome = json.loads(path.read_text(encoding="utf-8"))
    app_verdict = next(
        h["verdict"] for h in json.loads((saved / "verdicts.json").read_text())["hosts"] if h["host"] == APP
    )
    path.write_text(json.dumps({**outcome, "origin": "schedule", "verdict": app_verdict, "host": APP}))
    edited = render_bundle(saved)
    assert title(edited) == f"# Postmortem: {app_verdict['id']} on {APP} and 1 other host"
    assert "the run was started by a schedule (`nightowl check` or `sweep`)" in detection(edited)
    assert "started by hand" not in edited and "A scheduled check" in edited
    assert "started by a schedule" in render_bundle(saved, fmt="html")

    path.write_text(json.dumps({**outcome, "origin": "watch"}))
    assert "`nightowl watch` captured evidence automatically" in detection(render_bundle(saved))
    assert read_bundle(str(saved))["outcome"]["origin"] == "watch"  # the MCP bundle tools return it


def test_an_outcome_json_that_cannot_be_used_is_not_trusted(saved: Path) -> None:
    (saved / "outcome.json").write_text(json.dumps({"origin": "cron", "verdict": {"id": "forged"}}))
    markdown = render_bundle(saved)
    assert "forged" not in markdown and "started by hand" in detection(markdown)
    assert read_bundle(str(saved))["outcome"] is None


def test_a_bundle_without_outcome_json_is_told_from_its_manifest(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path, [FALLEN, APP])  # the engine alone: no outcome.json, as bundles before it
    assert not (bundle / "outcome.json").exists()
    markdown = render_bundle(bundle)
    assert title(markdown) == f"# Postmortem: gpu-fell-off-bus on {FALLEN} and 1 other host"
    assert "the run was started by hand (`nightowl triage` or `demo`)" in detection(markdown)
    assert read_bundle(str(bundle))["outcome"] is None
