"""status_words.csv: every row names a verdict its runbook has, and the status update says what the row says."""

from __future__ import annotations

import pytest
import yaml

from nightowl import knowledge
from nightowl.paths import data_dir
from nightowl.reports import status_update

ROWS = knowledge.read_csv("status_words.csv", required=("runbook", "verdict", "source"))


def _verdict_ids(runbook: str) -> set[str]:
    nodes = yaml.safe_load((data_dir("runbooks") / f"{runbook}.yaml").read_text())["nodes"]
    return {node["verdict"]["id"] for node in nodes.values() if "verdict" in node} | {
        name for name, node in nodes.items() if "cannot_judge" in node
    }


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r['runbook']}:{r['verdict']}")
def test_every_row_names_a_verdict_of_its_runbook(row: dict[str, str]) -> None:
    assert row["verdict"] in _verdict_ids(row["runbook"])
    assert row["what"] or row["users_see"]
    assert row["source"] == f"runbooks/{row['runbook']}.yaml (the verdict's summary and why)"


def test_one_row_per_verdict() -> None:
    ids = [row["verdict"] for row in ROWS]
    assert len(ids) == len(set(ids))


def _update(verdict: dict[str, str]) -> str:
    summary = {"runbook": "first-look", "hosts": [{"host": "r1", "verdict": verdict}, {"host": "r2", "verdict": None}]}
    return status_update.render(summary, now=0)


def test_the_update_says_what_the_row_says_and_falls_back_where_it_is_empty(monkeypatch: pytest.MonkeyPatch) -> None:
    kv = {"id": "kv-full", "severity": "warning", "action": "scale-out", "summary": "KV cache full on r1."}
    text = _update(kv)
    assert "Impact: replica out of KV cache" in text
    assert "What users see: slower answers and longer waits for the first token" in text
    words = status_update.status_words()
    changed = {**words, "kv-full": {**words["kv-full"], "what": "KV cache exhausted", "users_see": ""}}
    monkeypatch.setattr(status_update, "status_words", lambda: changed)
    text = _update(kv)
    assert "Impact: KV cache exhausted" in text  # the row, read
    assert f"What users see: {status_update.BY_SEVERITY['warning']}" in text  # empty: by severity
    text = _update({**kv, "id": "sdc-suspect-replica"})
    assert "Impact: sdc suspect replica" in text  # no "what": the id with spaces
