"""nightowl/knowledge/actions.csv is the one home of the verdict actions: every reader takes its rows."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pydantic
import pytest

from nightowl import docgen, knowledge
from nightowl.collectors.gpu import xid_catalog as xc
from nightowl.engine.model import Runbook, VerdictSpec
from nightowl.knowledge import actions
from nightowl.postmortem import sre
from nightowl.reports import status_update

HEADER = "action,rank,meaning,first_step,business_impact,who_acts,prevention,source\n"


def verdict(action: str) -> dict[str, Any]:
    return {"id": "x", "severity": "critical", "action": action, "summary": "s"}


@pytest.mark.parametrize("row", actions.rows(), ids=lambda r: r.action)
def test_every_row_is_an_action_the_schema_accepts(row: actions.ActionRow) -> None:
    assert VerdictSpec(**verdict(row.action)).action == row.action


def test_an_action_outside_the_table_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(pydantic.ValidationError, match="unknown action 'reboot-everything': one of none, "):
        VerdictSpec(**verdict("reboot-everything"))


def test_the_json_schema_enum_is_the_table_in_rank_order() -> None:
    schema = Runbook.model_json_schema()
    assert schema["$defs"]["VerdictSpec"]["properties"]["action"]["enum"] == list(actions.names())


def test_the_xid_ranking_is_the_table_rank() -> None:
    assert actions.names() == xc.ACTION_ORDER
    assert [xc.action_rank(a) for a in actions.names()] == list(range(len(actions.names())))
    assert xc.action_rank("no-such-action") == actions.by_action()["escalate"].rank
    assert xc.strictest(["none", "hardware-ticket", "restart-app"]) == actions.names()[-1]
    assert {a: xc.FIRST_STEP_BY_ACTION[a] for a in actions.names()} == {r.action: r.first_step for r in actions.rows()}


@pytest.mark.parametrize("row", actions.rows(), ids=lambda r: r.action)
def test_the_status_update_says_the_rows_business_impact_and_who_acts(row: actions.ActionRow) -> None:
    summary = {"hosts": [{"host": "gpu-01", "verdict": verdict(row.action)}], "runbook": "xid"}
    fields = status_update.context(summary, now=0)
    assert fields["business"] == row.business_impact
    assert fields["who"] == row.who_acts


@pytest.mark.parametrize("row", [r for r in actions.rows() if r.prevention], ids=lambda r: r.action)
def test_the_postmortem_prevention_item_is_the_rows(row: actions.ActionRow) -> None:
    found = [{"action": row.action, "host": "gpu-01", "gpus": [], "verdict_cites": []}]
    data: Any = SimpleNamespace(alert=None, trace={"hosts": []}, verdicts={"hosts": []}, manifest={})
    items = sre.action_items(data, found)
    assert [i["text"] for i in items if i["type"] == "prevent"] == [f"gpu-01: {row.prevention}"]


def test_the_docs_table_has_a_line_per_row() -> None:
    table = docgen.render_actions()
    for row in actions.rows():
        assert f"| `{row.action}` | {row.rank} |" in table


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ("none,0,m,f,b,w,,s\nescalate,0,m,f,b,w,,s\n", "ranks must be"),
        ("escalate,0,m,f,b,w,,s\nnone,1,m,f,b,w,,s\n", "`none` first"),
        ("none,0,m,f,b,w,,s\nnone,1,m,f,b,w,,s\n", "unique"),
        ("none,0,m,f,b,w,,s\n", "`escalate` present"),
        ("none,zero,m,f,b,w,,s\n", "rank 'zero'"),
        ("none,0,m,,b,w,,s\n", "empty first_step"),
    ],
)
def test_a_malformed_table_is_an_error_naming_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, error: str
) -> None:
    (tmp_path / "actions.csv").write_text(HEADER + body)
    monkeypatch.setattr(knowledge, "HERE", tmp_path)
    for cached in (actions.rows, actions.names, actions.by_action):
        cached.cache_clear()
    try:
        with pytest.raises(knowledge.KnowledgeError, match=error):
            actions.rows()
    finally:
        for cached in (actions.rows, actions.names, actions.by_action):
            cached.cache_clear()
