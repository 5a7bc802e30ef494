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
    assert xc.strictest(["none", "hardware-ticket", "restart-app"]) == "hardware-ticket"
    assert xc.strictest(actions.names()) == actions.names()[-1]
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


# --- a new action is its row (issue 44 item 5) ----------------------------------------------------------------
def _with_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra_row: str) -> None:
    """actions.csv as shipped plus ``extra_row``: every reader takes the new action from the table alone."""
    shipped = (Path(knowledge.HERE) / "actions.csv").read_text()
    for name in (p.name for p in Path(knowledge.HERE).iterdir() if p.suffix in (".csv", ".yaml")):
        if name != "actions.csv":
            (tmp_path / name).write_text((Path(knowledge.HERE) / name).read_text())
    (tmp_path / "actions.csv").write_text(shipped + extra_row)
    monkeypatch.setattr(knowledge, "HERE", tmp_path)
    for cached in (actions.rows, actions.names, actions.by_action, actions.node_actions):
        cached.cache_clear()


@pytest.fixture
def clean_tables() -> Any:
    yield
    for cached in (actions.rows, actions.names, actions.by_action, actions.node_actions):
        cached.cache_clear()
    from nightowl.fleet import verify

    verify.checks_by_action.cache_clear()


def test_the_actions_that_take_a_node_out_are_the_tables_column() -> None:
    assert actions.node_actions() == ("reset-gpu", "drain-and-reset", "reboot-node", "hardware-ticket")
    assert actions.takes_node_out("reboot-node") and not actions.takes_node_out("restart-app")
    assert not actions.takes_node_out("no-such-action")


def test_a_new_action_is_one_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_tables: Any) -> None:
    """A runbook may name it, it ranks, watch takes its lines, verify checks everything: no other file."""
    from nightowl.fleet import verify

    _with_table(tmp_path, monkeypatch, "power-cycle-rack,10,power-cycle the rack,cycle it,rack down.,dc,,yes,test\n")
    assert VerdictSpec(**verdict("power-cycle-rack")).action == "power-cycle-rack"
    assert xc.strictest(["hardware-ticket", "power-cycle-rack"]) == "power-cycle-rack"
    assert actions.takes_node_out("power-cycle-rack") and "power-cycle-rack" in actions.node_actions()
    verify.checks_by_action.cache_clear()
    assert verify.checks_for(verdict("power-cycle-rack")) == verify.CHECKS
    assert "| `power-cycle-rack` | 10 |" in docgen.render_actions()


def test_takes_node_out_is_yes_or_no(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_tables: Any) -> None:
    _with_table(tmp_path, monkeypatch, "rack,10,m,f,b,w,,maybe,s\n")
    with pytest.raises(knowledge.KnowledgeError, match="takes_node_out 'maybe'"):
        actions.rows()


def test_the_slurm_health_check_drains_for_the_tables_actions() -> None:
    """The shell script cannot read the table: a draining action added to it must be added there too."""
    script = (Path(__file__).resolve().parents[2] / "deploy" / "slurm" / "nightowl-healthcheck.sh").read_text()
    listed = next(line for line in script.splitlines() if line.startswith("DRAIN_ACTIONS="))
    assert sorted(listed.split('"')[1].split()) == sorted(actions.node_actions())
    assert "(" + "|".join(("reboot-node", "drain-and-reset", "reset-gpu", "hardware-ticket")) + ")" in script
    assert sorted(("reboot-node", "drain-and-reset", "reset-gpu", "hardware-ticket")) == sorted(actions.node_actions())
