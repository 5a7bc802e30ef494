"""The job drafts and status updates read as an SRE would sign them (issue 27, closing note): nightowl's own
timeline row names the job's verdict once with its action on the implicated members only; an empty output
is never cited for a value; a training job's status update speaks of training, not request traffic; a
silent-corruption update dates the trouble from the last passing known-answer probe."""

from __future__ import annotations

import re
from pathlib import Path

from nightowl.postmortem.render import render_bundle
from nightowl.reports import status_update
from tests.postmortem.bundles import rehearsed_bundle


def _field(text: str, name: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(f"{name}: ")).split(": ", 1)[1]


def test_nightowl_row_names_the_job_verdict_once_and_no_healthy_member_for_action(tmp_path: Path) -> None:
    bundle, _ = rehearsed_bundle(tmp_path, "nccl-hang", "watchdog timeouts on one host, Xid 79")
    draft = render_bundle(bundle)
    (row,) = [r for r in draft.splitlines() if r.startswith("| ") and "| nightowl | diagnosis |" in r]
    assert "the job of 2 → `gpu-fault-on-rank-host` (drain-and-reset on nccl-xid-b; not implicated: nccl-xid-a)" in row
    assert "nccl-xid-a → `gpu-fault-on-rank-host`" not in row and row.count("gpu-fault-on-rank-host") == 1


def test_an_empty_output_is_not_cited_for_a_value_another_member_shows(tmp_path: Path) -> None:
    """nccl-xid-b's NCCL log was not recorded (an empty file): `hang_evidence: true` rests on nccl-xid-a's."""
    bundle, _ = rehearsed_bundle(tmp_path, "nccl-hang", "watchdog timeouts on one host, Xid 79")
    draft = render_bundle(bundle)
    summary_and_causes = draft.split("## Trigger", 1)[0]
    assert re.search(r"\[E\d+ nccl-log\.out:L1-L\d+\]", summary_and_causes)
    assert ":L0-L0]" not in summary_and_causes


def test_a_training_job_update_speaks_of_training_not_traffic(tmp_path: Path) -> None:
    _, summary = rehearsed_bundle(tmp_path, "nccl-hang", "watchdog timeouts on one host, Xid 79")
    text = status_update.render(summary, now=0)
    assert _field(text, "What users see").startswith("no training progress")
    assert "traffic" not in text
    # one-letter rests of the hosts' shared prefix are no names to act on: the hosts keep their names
    assert "Pull nccl-xid-b from the job" in text and "not implicated: nccl-xid-a" in _field(text, "Impact")


def test_a_silent_corruption_update_dates_the_trouble_from_the_last_passing_probe(tmp_path: Path) -> None:
    _, summary = rehearsed_bundle(tmp_path, "silent-corruption", "one replica of three answers differently")
    text = status_update.render(summary, now=0)
    since = _field(text, "Since")
    assert since.startswith("some time after 2024-06-12T13:00:00Z, up to this check")
    assert "the last known-answer probe that passed" in since
    assert _field(text, "What users see").startswith("possibly wrong answers")
    assert "errors or no answer" not in text
    # an all-clear of the same runbook claims no window and no wrong answers
    tmp = tmp_path / "good"
    tmp.mkdir()
    _, summary = rehearsed_bundle(tmp, "silent-corruption", "every replica gives the golden answer")
    text = status_update.render(summary, now=0)
    assert "wrong answers" not in _field(text, "What users see") and "known-answer probe" not in _field(text, "Since")
