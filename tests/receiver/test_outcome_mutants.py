"""What every teller of a run reads from its Outcome, written out whole (nightowl/outcome.py): the webhook's
``outcome`` and ``capture`` objects key by key, the one-line account of each kind of run, the finding lines, the
no-verdict line of a storm, and the verdict chosen among hosts. The runs are stand-ins with a run's fields
(tests/receiver/test_outcome.py makes a real one); scripts/mutate's survivors led here."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from nightowl.outcome import (
    Outcome,
    chosen_run,
    finding_lines,
    manifest_sha256,
    most_severe,
    no_verdict_line,
    outcome_from_run,
    read_bundle_outcome,
    verdict_line,
)

VERDICT = {"id": "gpu-fell-off-bus", "severity": "critical", "action": "reboot-node", "summary": "GPU 3 is gone."}


def host(name: str, verdict: dict[str, Any] | None = None, status: str = "ok", error: str | None = None) -> Any:
    return SimpleNamespace(host=name, verdict=verdict, status=status, error=error)


def result(*runs: Any, bundle: Path | None = None, update: Path | None = None, error: str | None = None) -> Any:
    return SimpleNamespace(runbook="xid", runs=runs, bundle=bundle, bundle_error=error, status_update=update)


def full() -> Outcome:
    return Outcome(
        origin="alert",
        runbook="xid",
        host="gpu-17",
        title="XidError",
        line="gpu-fell-off-bus (critical) -> reboot-node",
        run_id="r1",
        bundle="/b/r1",
        sha256="abc",
        verdict=VERDICT,
        findings=("Why: GPU 3 is gone.",),
        host_status="ok",
        host_error="slow",
        status_update="/b/r1/status-update.md",
        status_update_text="one\n\n two \n",
        labels={"team": "ml"},
        annotations={"runbook": "x"},
        failure=None,
        incident="P1",
        source="pagerduty",
        context={"fingerprint": "f", "alert": "old", "action": "old"},
    )


def test_the_webhooks_outcome_object_key_by_key() -> None:
    assert full().as_json() == {
        "origin": "alert",
        "runbook": "xid",
        "host": "gpu-17",
        "title": "XidError",
        "line": "gpu-fell-off-bus (critical) -> reboot-node",
        "run_id": "r1",
        "bundle": "/b/r1",
        "sha256": "abc",
        "verdict": VERDICT,
        "findings": ["Why: GPU 3 is gone."],
        "host_status": "ok",
        "host_error": "slow",
        "status_update": "/b/r1/status-update.md",
        "labels": {"team": "ml"},
        "annotations": {"runbook": "x"},
        "failure": None,
        "incident": "P1",
        "source": "pagerduty",
    }


def test_the_webhooks_capture_is_the_origins_record_under_the_outcomes_fields() -> None:
    assert full().capture_record() == {
        "fingerprint": "f",
        "alert": "XidError",
        "source": "pagerduty",
        "host": "gpu-17",
        "runbook": "xid",
        "bundle": "/b/r1",
        "run_id": "r1",
        "verdict": VERDICT,
        "action": "reboot-node",
        "host_status": "ok",
        "host_error": "slow",
        "status_update": "/b/r1/status-update.md",
        "outcome": "gpu-fell-off-bus (critical) -> reboot-node",
        "labels": {"team": "ml"},
        "annotations": {"runbook": "x"},
    }
    bare = Outcome(origin="watch", runbook="xid", host=None, title="watch: xid", line="l")
    assert bare.as_json()["verdict"] is None and bare.capture_record()["verdict"] is None
    assert bare.capture_record()["action"] is None


def test_the_status_update_is_read_once_and_told_line_by_line(tmp_path: Path) -> None:
    assert full().status_update_lines() == ["one", " two "]
    bare = Outcome(origin="watch", runbook="xid", host=None, title="t", line="l")
    assert bare.with_status_update(None) is bare
    path = tmp_path / "status-update.md"
    path.write_text("## Update\nGPU 3 fell off the bus\n")
    told = bare.with_status_update(path)
    assert (told.status_update, told.status_update_text) == (str(path), "## Update\nGPU 3 fell off the bus\n")
    assert bare.with_status_update(tmp_path / "absent.md").status_update_text == ""


def test_a_run_with_no_result_tells_its_failure() -> None:
    outcome = outcome_from_run(None, "watch", failure="runbook xid would not load")
    assert outcome.line == "failed: runbook xid would not load"
    assert (outcome.runbook, outcome.title, outcome.host, outcome.verdict, outcome.findings) == (
        "?",
        "watch",
        None,
        None,
        (),
    )
    assert outcome.bundle is None and outcome.run_id is None and outcome.status_update_text == ""
    with pytest.raises(ValueError) as raised:
        outcome_from_run(None, "cron")
    assert str(raised.value) == "origin 'cron': one of alert, watch, schedule, hand"


def test_a_bundle_that_was_not_written_is_the_failure(tmp_path: Path) -> None:
    outcome = outcome_from_run(result(host("gpu-17", VERDICT), error="disk full"), "hand")
    assert outcome.failure == "disk full" and outcome.line == "gpu-fell-off-bus (critical) -> reboot-node"
    given = outcome_from_run(result(host("gpu-17", VERDICT), error="disk full"), "hand", failure="mine")
    assert given.failure == "mine"


def test_a_written_bundle_gives_its_id_hash_and_update(tmp_path: Path) -> None:
    bundle = tmp_path / "run-7"
    bundle.mkdir()
    (bundle / "manifest.json").write_text("{}")
    (bundle / "status-update.md").write_text("told")
    outcome = outcome_from_run(
        result(host("gpu-17", VERDICT), bundle=bundle, update=bundle / "status-update.md"),
        "alert",
        title="XidError",
        labels={"a": "b"},
        annotations={"c": "d"},
        incident="P9",
        source="alertmanager",
        context={"k": "v"},
    )
    assert (outcome.run_id, outcome.bundle, outcome.failure) == ("run-7", str(bundle), None)
    assert outcome.sha256 == hashlib.sha256(b"{}").hexdigest() == manifest_sha256(bundle)
    assert (outcome.status_update, outcome.status_update_text) == (str(bundle / "status-update.md"), "told")
    assert (outcome.title, outcome.labels, outcome.annotations, outcome.incident, outcome.source) == (
        "XidError",
        {"a": "b"},
        {"c": "d"},
        "P9",
        "alertmanager",
    )
    assert outcome.context == {"k": "v"} and outcome.host == "gpu-17" and outcome.runbook == "xid"
    assert manifest_sha256(tmp_path) is None


def test_a_common_cause_leads_the_summary_and_the_hosts_own_is_kept() -> None:
    cause = {"line": "common cause: switch sw-3", "kind": "switch", "name": "sw-3", "shared_by": 8}
    outcome = outcome_from_run(result(host("gpu-17", VERDICT)), "alert", common_cause=cause)
    assert outcome.verdict is not None
    assert outcome.verdict["summary"] == "Common cause: switch sw-3. GPU 3 is gone."
    assert outcome.verdict["host_summary"] == "GPU 3 is gone." and outcome.verdict["common_cause"] == cause
    assert list(outcome.findings) == [
        "Common cause first: switch sw-3",
        "Why: GPU 3 is gone.",
        "First action: inspect switch sw-3; then reboot-node only on those of its 8 nodes whose fault the switch "
        "does not explain",
    ]
    assert VERDICT["summary"] == "GPU 3 is gone."  # the host's verdict itself is not changed


def test_the_most_severe_host_is_told_and_every_silent_host_named() -> None:
    warn = {**VERDICT, "id": "w", "severity": "warning"}
    runs = [host("a", warn), host("b", VERDICT), host("c", None, "unreachable", "ssh: c refused"), host("d", warn)]
    outcome = outcome_from_run(result(*runs), "alert", line="storm of 4")
    assert outcome.host == "b" and outcome.verdict == VERDICT and outcome.line == "storm of 4"
    assert outcome.host_error == "1 host gave no verdict: c unreachable: ssh: <host> refused"
    assert outcome.host_status == "ok"
    one = outcome_from_run(result(host("c", None, "unreachable", "ssh: c refused")), "alert", host="named")
    assert one.host_error == "ssh: c refused" and one.host == "named"
    assert one.line == "no verdict: host named unreachable: ssh: c refused"


def test_the_chosen_run() -> None:
    first, second = {**VERDICT, "severity": "warning"}, {**VERDICT, "severity": "warning"}
    a, b = host("a", first), host("b", second)
    assert chosen_run([a, b]) is a  # the first of equals
    silent = host("s", None, "unreachable")
    assert chosen_run([silent, b]) is b
    assert chosen_run([silent, host("t", None)]) is silent
    assert chosen_run([]) is None
    assert most_severe([]) is None
    assert most_severe([{"severity": "bogus"}, {"severity": "ok"}]) == {"severity": "bogus"}
    assert most_severe([{"severity": "info"}, {"severity": "ok"}]) == {"severity": "info"}


@pytest.mark.parametrize(
    ("args", "line"),
    [
        ((VERDICT, "h", "ok", None), "gpu-fell-off-bus (critical) -> reboot-node"),
        (({"id": "x", "action": "none"}, "h", "ok", None), "x (?) -> none"),
        ((None, None, None, None), "no verdict: host ? gave no verdict"),
        ((None, "h", "unreachable", "timed out"), "no verdict: host h unreachable: timed out"),
        ((None, "h", None, None, "no disk"), "failed: no disk"),
        ((VERDICT, "h", "ok", None, "no disk"), "gpu-fell-off-bus (critical) -> reboot-node"),
    ],
)
def test_the_one_line_account(args: tuple[Any, ...], line: str) -> None:
    assert verdict_line(*args) == line


def test_the_finding_lines_of_a_job() -> None:
    job = {**VERDICT, "gpus": [3, 5], "implicated": ["w1", "w3"], "not_implicated": ["w0", "w2"]}
    assert finding_lines(job) == [
        "GPU(s): 3, 5",
        "Why: GPU 3 is gone.",
        "First action: reboot-node on w1, w3 (not implicated: w0, w2)",
    ]
    assert (
        finding_lines({**VERDICT, "implicated": [], "whole_job": True})[-1]
        == "First action: reboot-node on the whole job"
    )
    assert finding_lines({**VERDICT, "implicated": []})[-1] == "First action: reboot-node on no member"
    assert finding_lines({"action": "none", "summary": "one line no stop", "gpus": []}) == [
        "Why: one line no stop",
        "First action: none",
    ]
    assert finding_lines({}) == [] and finding_lines(None) == []


def test_a_storms_no_verdict_line_groups_reasons_and_counts_the_rest() -> None:
    runs = [host(f"r{i}", None, "unreachable", f"reason {i} (detail of r{i})") for i in range(6)]
    runs += [host("r6", None, "unreachable", "reason 0 (other)"), host("ok", VERDICT), host("x", None, "incomplete")]
    assert no_verdict_line(runs) == (
        "8 hosts gave no verdict: r0, r6 unreachable: reason 0; r1 unreachable: reason 1; r2 unreachable: reason 2; "
        "r3 unreachable: reason 3; and 3 other reasons (storm.results)"
    )
    assert no_verdict_line(runs[:5] + [runs[7]]) == (
        "5 hosts gave no verdict: r0 unreachable: reason 0; r1 unreachable: reason 1; r2 unreachable: reason 2; "
        "r3 unreachable: reason 3; and 1 other reason (storm.results)"
    )
    assert no_verdict_line([host("ok", VERDICT)]) is None


def test_a_long_reason_is_cut_with_a_mark() -> None:
    long = "x" * 165
    line = no_verdict_line([host("h", None, "incomplete", long)])
    assert line == f"1 host gave no verdict: h incomplete: {'x' * 159}…"  # 160 characters
    exact = "y" * 160
    assert no_verdict_line([host("h", None, "incomplete", exact)]) == f"1 host gave no verdict: h incomplete: {exact}"
    assert no_verdict_line([host("h", None, "incomplete", " (only detail)")]) == (
        "1 host gave no verdict: h incomplete:  (only detail)"
    )


def test_only_the_head_of_a_long_status_update_is_read(tmp_path: Path) -> None:
    path = tmp_path / "status-update.md"
    path.write_bytes(b"a" * 16394)
    bare = Outcome(origin="watch", runbook="xid", host=None, title="t", line="l")
    assert bare.with_status_update(path).status_update_text == "a" * 16384  # 16 KiB: a chat message, not an archive


def test_a_status_update_that_is_not_utf8_is_read_with_replacements(tmp_path: Path) -> None:
    path = tmp_path / "status-update.md"
    path.write_bytes(b"GPU \xff gone\n")
    bare = Outcome(origin="watch", runbook="xid", host=None, title="t", line="l")
    assert bare.with_status_update(path).status_update_text == "GPU \ufffd gone\n"


def test_a_saved_bundles_outcome_is_read_back_only_when_it_can_be_used(tmp_path: Path) -> None:
    """outcome.json is untrusted input: an origin outside ORIGINS, a verdict that is no object, bad JSON or a
    symbolic link make it unusable (None), never trusted."""
    record = full().as_json()
    (tmp_path / "outcome.json").write_text(json.dumps(record))
    assert read_bundle_outcome(tmp_path) == record
    for bad in ({**record, "origin": "cron"}, {**record, "verdict": "gpu-fell-off-bus"}, [record], "{"):
        (tmp_path / "outcome.json").write_text(bad if isinstance(bad, str) else json.dumps(bad))
        assert read_bundle_outcome(tmp_path) is None, bad
    (tmp_path / "outcome.json").write_text(json.dumps({**record, "verdict": None}))
    assert read_bundle_outcome(tmp_path) == {**record, "verdict": None}
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "outcome.json").symlink_to(tmp_path / "outcome.json")
    assert read_bundle_outcome(linked) is None
    assert read_bundle_outcome(tmp_path / "absent") is None


def test_two_hosts_one_silent_names_the_silent_one() -> None:
    runs = [host("a", VERDICT), host("b", None, "unreachable", "ssh: b refused")]
    outcome = outcome_from_run(result(*runs), "alert")
    assert outcome.host == "a" and outcome.host_error == "1 host gave no verdict: b unreachable: ssh: <host> refused"


def test_a_run_that_never_ran_and_says_nothing() -> None:
    outcome = outcome_from_run(None, "schedule")
    assert (outcome.failure, outcome.line) == (None, "no verdict: host ? gave no verdict")


def test_severities_rank_ok_info_warning_critical_and_unknown_lowest() -> None:
    ok, info, warn, crit = ({"severity": s} for s in ("ok", "info", "warning", "critical"))
    assert most_severe([ok, info]) is info and most_severe([info, warn]) is warn and most_severe([warn, crit]) is crit
    bogus = {"severity": "bogus"}
    assert most_severe([bogus, info]) is info and most_severe([bogus, ok]) is bogus  # unknown ranks as ok


def test_four_reasons_are_all_told_with_no_tail() -> None:
    runs = [host(f"r{i}", None, "unreachable", f"reason {i}") for i in range(4)]
    assert no_verdict_line(runs) == (
        "4 hosts gave no verdict: r0 unreachable: reason 0; r1 unreachable: reason 1; r2 unreachable: reason 2; "
        "r3 unreachable: reason 3"
    )


def test_the_why_line_is_the_summarys_first_sentence() -> None:
    verdict = {**VERDICT, "summary": "GPU 3 fell off the bus. Reboot the node, then check the riser."}
    assert finding_lines(verdict)[0] == "Why: GPU 3 fell off the bus."
