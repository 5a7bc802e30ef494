"""One Outcome per run (issue 44 item 1): a run's result becomes the record every teller reads by one
function, and a serve capture and a watch burst of the same run tell it the same way.

The run is a real one: the xid runbook over a recorded host (fixtures/hosts/xid79-fallen-off-bus).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from nightowl.outcome import ORIGINS, Outcome, chosen_run, no_verdict_line, outcome_from_run, verdict_line
from nightowl.receiver.capture import Capture, _captured, _description, plan_capture
from nightowl.receiver.config import load_config
from nightowl.receiver.notify import Target, request_for
from nightowl.receiver.payload import parse_alertmanager
from nightowl.watch.burst import burst_description
from tests.receiver.test_storm import RECORDED, alert, storm_config

CHAT = Target("chat", "https://chat.example/hook")
HOOK = Target("webhook", "https://hook.example/in")
PAGER = Target("pagerduty", "https://api.example", "k", "a@b", "incident")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One real run of the xid runbook on the recorded host, as serve and watch both run it."""
    from nightowl.library import runbooks
    from nightowl.run import run_and_save
    from nightowl.transports import open_transport

    out = tmp_path_factory.mktemp("out")
    spec = f"replay:{RECORDED}"
    return run_and_save(runbooks.load("xid"), {"gpu-17": lambda: open_transport(spec)}, out)


def serve_capture(tmp_path: Path, result: Any) -> Capture:
    """The capture serve makes of an alert naming gpu-17, recording ``result`` as its run, with the Outcome
    run_and_save builds for serve's run (nightowl/run.py ``_outcome``: origin and what the capture describes)."""
    config = load_config(storm_config(tmp_path, "http://127.0.0.1:9/hook"))
    (planned,) = parse_alertmanager({"alerts": [alert("gpu-17", 0, None)]})
    capture = plan_capture(planned, config, 0.0)
    told = outcome_from_run(result, "alert", **_description(capture)(result.runs))
    _captured(capture, dataclasses.replace(result, outcome=told))  # the hand run's own is not serve's
    return capture


def watch_outcome(result: Any, burst: Any) -> Outcome:
    """The Outcome run_and_save builds for the run a burst started on gpu-17 (what the burst describes)."""
    return outcome_from_run(result, "watch", **burst_description("gpu-17", burst))


def test_the_outcome_is_built_from_the_runs_result(run: Any) -> None:
    outcome = outcome_from_run(run, "hand")
    verdict = run.runs[0].verdict
    assert outcome.verdict == verdict and outcome.verdict["id"] == "gpu-fell-off-bus"
    assert outcome.host == "gpu-17" and outcome.runbook == "xid" and outcome.origin == "hand"
    assert outcome.bundle == str(run.bundle) and outcome.run_id == run.bundle.name
    assert outcome.sha256 == hashlib.sha256((run.bundle / "manifest.json").read_bytes()).hexdigest()
    assert outcome.line == f"gpu-fell-off-bus ({verdict['severity']}) -> {verdict['action']}"
    assert outcome.findings[0] == f"GPU(s): {', '.join(verdict['gpus'])}"
    assert outcome.findings[-1] == f"First action: {verdict['action']}"
    assert outcome.status_update_text == run.status_update.read_text()
    assert outcome.status_update_lines()[0].startswith("STATUS UPDATE")
    assert json.loads(json.dumps(outcome.as_json()))["verdict"] == verdict
    with pytest.raises(ValueError, match="origin 'cron'"):
        outcome_from_run(run, "cron")
    assert set(ORIGINS) == {"alert", "watch", "schedule", "hand"}


def test_serve_and_watch_tell_the_same_run_the_same_way(run: Any, tmp_path: Path) -> None:
    """Watch's posts used to lack the status update serve's carry, and its webhook `capture` was a record of
    its own: now both come from the one Outcome, and differ only in what started the run."""
    capture = serve_capture(tmp_path, run)
    served = capture.notice()
    watched = watch_outcome(run, SimpleNamespace(triggers=Counter({"xid": 2})))
    assert (served.origin, watched.origin) == ("alert", "watch")
    assert watched.title == "watch: xid" and served.title == "GpuXidErrors"
    for field in ("verdict", "findings", "line", "status_update_text", "bundle", "run_id", "sha256", "host"):
        assert getattr(served, field) == getattr(watched, field), field
    assert watched.status_update_text and watched.findings

    _, _, serve_chat = request_for(CHAT, served, None)
    _, _, watch_chat = request_for(CHAT, watched, None)
    assert serve_chat["blocks"][1:] == watch_chat["blocks"][1:]  # the status update, as a block of its own
    serve_lines = serve_chat["blocks"][0]["text"]["text"].splitlines()
    watch_lines = watch_chat["blocks"][0]["text"]["text"].splitlines()
    assert serve_lines[1:] == watch_lines[1:] and any(line.startswith("Why: ") for line in watch_lines)

    _, _, serve_hook = request_for(HOOK, served, None)
    _, _, watch_hook = request_for(HOOK, watched, None)
    for key in ("finding", "status_update_text"):
        assert serve_hook[key] == watch_hook[key] and watch_hook[key], key
    assert serve_hook["capture"]["verdict"] == watch_hook["capture"]["verdict"] == dict(run.runs[0].verdict)
    assert watch_hook["capture"]["triggers"] == {"xid": 2} and serve_hook["capture"]["id"] == capture.id
    assert serve_hook["capture"]["status"] == "captured"  # serve's journal entry stays the capture record
    differs = {k for k in serve_hook["outcome"] if serve_hook["outcome"][k] != watch_hook["outcome"][k]}
    assert differs == {"origin", "title", "source", "labels", "annotations"}


def test_the_pagerduty_note_goes_on_the_incident_the_outcome_names(run: Any, tmp_path: Path) -> None:
    served = serve_capture(tmp_path, run).notice()
    with pytest.raises(LookupError, match="no PagerDuty incident: the alert came from alertmanager"):
        request_for(PAGER, served, None)
    url, _, note = request_for(PAGER, Outcome(**{**vars(served), "labels": {"incident": "P9"}}), None)
    assert url.endswith("/incidents/P9/notes") and "Status update:" in note["note"]["content"]
    url, _, _ = request_for(PAGER, Outcome(**{**vars(served), "incident": "Q1"}), None)
    assert url.endswith("/incidents/Q1/notes")


def test_a_run_over_several_hosts_is_told_by_its_worst_verdict_and_every_silent_host() -> None:
    def host(name: str, severity: str | None, error: str | None = None) -> Any:
        verdict = {"id": f"v-{severity}", "severity": severity, "action": "none"} if severity else None
        return SimpleNamespace(host=name, status="ok" if verdict else "unreachable", verdict=verdict, error=error)

    runs = [host("a", "warning"), host("b", None, "ssh: b refused"), host("c", "critical"), host("d", "info")]
    assert chosen_run(runs).host == "c"
    assert chosen_run([runs[1]]).host == "b" and chosen_run([]) is None
    result = SimpleNamespace(runbook="xid", runs=runs, bundle=None, bundle_error="disk full", status_update=None)
    outcome = outcome_from_run(result, "schedule", host="rack=r1", common_cause={"line": "common cause: rack r1"})
    assert outcome.verdict is not None and outcome.verdict["id"] == "v-critical" and outcome.host == "rack=r1"
    assert outcome.verdict["summary"] == "Common cause: rack r1." and outcome.verdict["host_summary"] == ""
    assert outcome.host_error == "1 host gave no verdict: b unreachable: ssh: <host> refused"
    assert outcome.failure == "disk full" and outcome.sha256 is None and outcome.run_id is None
    assert outcome.findings[0] == "Common cause first: rack r1"
    assert no_verdict_line(runs[:1]) is None


def test_the_verdict_line_says_what_prevented_a_verdict() -> None:
    assert verdict_line(None, "gpu-17", "unreachable", "timed out") == "no verdict: host gpu-17 unreachable: timed out"
    assert verdict_line(None, None, None, None) == "no verdict: host ? gave no verdict"
    assert verdict_line(None, "h", None, None, failure="disk full") == "failed: disk full"
    verdict = {"id": "x", "severity": "critical", "action": "reboot-node"}
    assert verdict_line(verdict, "h", "ok", None, failure="disk full") == "x (critical) -> reboot-node"


def test_a_jobs_members_failing_alike_are_one_reason_told_short() -> None:
    """Each member's error of a job run lists every member's failures by name; the line groups them as one
    reason, cut before that detail (the first-look status update listed 3 KB of it, once per member)."""
    from types import SimpleNamespace

    from nightowl.outcome import REASON_CHARS, no_verdict_line

    hosts = ["r1", "r2", "r3"]
    detail = "; ".join(f"replica-health: {h}: the command printed nothing to read" for h in hosts)
    runs = [
        SimpleNamespace(
            host=h,
            verdict=None,
            status="incomplete",
            error=f"cannot judge: no evidence (every collector failed: {detail})",
        )
        for h in hosts
    ]
    line = no_verdict_line(runs)
    assert line == "3 hosts gave no verdict: r1, r2, r3 incomplete: cannot judge: no evidence"
    long = [SimpleNamespace(host="a", verdict=None, status="unreachable", error="x" * 1000)]
    assert len(no_verdict_line(long) or "") < REASON_CHARS + 60
