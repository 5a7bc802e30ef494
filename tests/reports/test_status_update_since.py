"""The status update says "Since" and "Service" from the evidence (issue 27 item 3): replica-compare's
``since`` (the engine start times, the first failing answer) with its source, and the served model id
from ``/v1/models``; today's fixed text when the evidence does not show them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nightowl.engine.bundle_summary import triage_summary
from nightowl.library.rehearse import rehearsal_cases, replay_case
from nightowl.reports import status_update

CASES = {c["name"]: c for c in rehearsal_cases("first-look")}
DEPLOY = "read by URL only, every replica down, every engine started 4 min before the look (a deploy)"
ONE_RESTART = "read by URL only, one engine started 90 s before the look (no scrape saw the restart)"


def replayed(name: str, tmp_path: Path) -> tuple[dict[str, Any], str]:
    runs = replay_case("first-look", CASES[name], out_dir=tmp_path)
    summary = triage_summary("first-look", "run-1", tmp_path / "run-1", runs)
    return summary, status_update.render(summary, now=0)


def line(text: str, head: str) -> str:
    return next(x for x in text.splitlines() if x.startswith(head))


def job_fact(summary: dict[str, Any], name: str) -> Any:
    # first-look cites the onset of the finding its verdict is about (replica_compare.onset.<finding>.since)
    return next(f["value"] for f in summary["job"]["facts"] if f["fact"].rpartition(".")[2] == name)


@pytest.mark.parametrize("name", [DEPLOY, ONE_RESTART])
def test_since_is_the_evidence_with_its_source(name: str, tmp_path: Path) -> None:
    summary, text = replayed(name, tmp_path)
    since = job_fact(summary, "since")
    assert since["text"] and since["source"]  # the collector dated it
    got = line(text, "Since: ")
    assert got.startswith(f"Since: {since['text']}; source: the engine process on r")
    assert "process_start_time_seconds in /metrics" in got
    assert "not known" not in got
    assert "first-look-" not in got  # short names, as elsewhere in the update
    # the same time and source the verdict's own summary states
    assert f"Since {since['text']} (" in summary["hosts"][0]["verdict"]["summary"]


def test_service_is_the_model_id_from_v1_models(tmp_path: Path) -> None:
    summary, text = replayed("one replica answers 503 on /health", tmp_path)
    model = job_fact(summary, "service")
    assert isinstance(model, str) and model
    assert text.splitlines()[0].startswith(f"STATUS UPDATE - {model} (r1, r2, r3) - ")


def test_no_date_in_the_evidence_keeps_the_honest_fallback(tmp_path: Path) -> None:
    summary, text = replayed("one replica answers 503 on /health", tmp_path)
    assert job_fact(summary, "since") is None
    assert line(text, "Since: ") == (
        "Since: not known: first seen by this check at 00:00 UTC; the dashboards show when it began"
    )


def test_no_model_id_names_the_service_by_its_hosts(tmp_path: Path) -> None:
    _, text = replayed("curl missing on every host, no /health read", tmp_path)
    assert text.splitlines()[0].startswith("STATUS UPDATE - first-look-cannot-judge (r1, r2, r3) - ")


def test_a_since_without_text_is_not_used() -> None:
    job = {"facts": [{"fact": "replica_compare.since", "rule": "job", "value": {"source": "x"}}]}
    summary = {"hosts": [{"host": "a", "verdict": None}], "job": job}
    assert status_update.context(summary, now=0)["since"].startswith("not known: first seen by this check")
