"""What `nightowl xid` and the judgement say because of a rule of xid_rules.yaml, and the error an author of the
file reads for a bad rule, written out (collectors/gpu/xid_catalog/rules.py; scripts/mutate's survivors led here).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from nightowl import knowledge
from nightowl.collectors.gpu import xid_catalog as xc
from nightowl.collectors.gpu.xid_catalog import rules

SHIPPED = knowledge.read_yaml("xid_rules.yaml")
NVLINK5_STEP = "check nvidia-smi nvlink -s / -e and follow the Xid 154 that accompanies it; fatal: drain and reset"


@pytest.fixture
def document(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """A copy of xid_rules.yaml the rules are read from; change it, then call rules.rules()."""
    copied = copy.deepcopy(SHIPPED)
    monkeypatch.setattr(rules, "_rules", lambda: copied)
    rules.rules.cache_clear()
    yield copied
    rules.rules.cache_clear()


def rule(document: dict[str, Any], rule_id: str) -> dict[str, Any]:
    return next(r for r in document["rules"] if r["id"] == rule_id)


def nvlink5(text: str) -> dict[str, Any]:
    return xc.explain({"kind": "xid", "code": 144, "pci": "0000:05:00", "text": text})


def test_a_nonfatal_nvlink5_line_reads_the_rules_step_for_none() -> None:
    explained = nvlink5("SAW_MVB Nonfatal XC0 i0 Link 0 (0x00000001)")
    assert (explained["action"], explained["first_step"]) == (
        "none",
        "non-fatal: no action now; watch for repeats on the same link",
    )


@pytest.mark.parametrize(
    ("text", "action"),
    [("SAW_MVB Fatal XC0 i0 Link 0 (0x00000001)", "drain-and-reset"), ("no severity written", "reset-gpu")],
)
def test_an_nvlink5_line_that_is_not_nonfatal_reads_the_codes_own_step(text: str, action: str) -> None:
    """The rule has a step only for `none`: any other action keeps the catalog's first step for the code."""
    explained = nvlink5(text)
    assert (explained["action"], explained["first_step"]) == (action, NVLINK5_STEP)


def test_an_off_bus_line_beside_its_xid_79_is_judged_once_with_the_code() -> None:
    events = [
        {"kind": "xid", "code": 79, "pci": "0000:02:00", "text": "GPU has fallen off the bus."},
        {"kind": "fallen_off_bus", "pci": "0000:02:00", "text": "GPU has fallen off the bus."},
    ]
    assert xc.judge(events)["reasons"] == ["Xid 79 on 0000:02:00: catalog RESTART_BM -> reboot-node"]
    alone = xc.judge(events[1:])["reasons"]
    assert alone == ["0000:02:00 fell off the bus (no Xid 79 line) -> treated as Xid 79 -> reboot-node"]


def test_two_rules_with_one_id_are_refused(document: dict[str, Any]) -> None:
    document["rules"].append(copy.deepcopy(rule(document, "wedged-driver")))
    with pytest.raises(knowledge.KnowledgeError) as raised:
        rules.rules()
    assert str(raised.value) == f"{knowledge.path('xid_rules.yaml')}: rule ids must be unique"


def test_rules_that_are_no_list_are_refused(document: dict[str, Any]) -> None:
    document["rules"] = {"id": "x"}
    with pytest.raises(knowledge.KnowledgeError) as raised:
        rules.rules()
    assert str(raised.value) == f"{knowledge.path('xid_rules.yaml')}: rules must be a list"


@pytest.mark.parametrize(
    ("rule_id", "change", "says"),
    [
        ("nvlink5-severity", {"actions": None}, "reader nvlink_severity needs `actions` (found -> action)"),
        ("nvlink5-severity", {"codes": [144]}, "give either codes or codes_from"),
        ("xid154-recovery-action", {"codes": None}, "give either codes or codes_from"),
        ("nvlink5-severity", {"reader": "tea"}, "reader 'tea' is not one of recovery_action, nvlink_severity"),
        ("xid48-with-63-64", {"action": "panic"}, "action 'panic' is not in actions.csv"),
        ("nvlink5-severity", {"actions": {"fatal": "panic"}}, "action 'panic' is not in actions.csv"),
    ],
)
def test_a_bad_text_rule_is_refused_naming_it(
    document: dict[str, Any], rule_id: str, change: dict[str, Any], says: str
) -> None:
    changed = rule(document, rule_id)
    for key, value in change.items():
        changed.pop(key) if value is None else changed.update({key: value})
    index = document["rules"].index(changed)
    with pytest.raises(knowledge.KnowledgeError) as raised:
        rules.rules()
    assert str(raised.value) == f"{knowledge.path('xid_rules.yaml')}: rules[{index}] ({rule_id}): {says}"


def test_a_rule_that_is_no_mapping_is_refused(document: dict[str, Any]) -> None:
    document["rules"].insert(0, "wedged-driver")
    with pytest.raises(knowledge.KnowledgeError) as raised:
        rules.rules()
    assert str(raised.value) == f"{knowledge.path('xid_rules.yaml')}: rules[0]: not a mapping"


def test_a_rule_without_its_source_or_an_unknown_kind_is_refused(document: dict[str, Any]) -> None:
    where = f"{knowledge.path('xid_rules.yaml')}: rules[0] (xid154-recovery-action)"
    rule(document, "xid154-recovery-action").pop("source")
    with pytest.raises(knowledge.KnowledgeError) as raised:
        rules.rules()
    assert str(raised.value) == f"{where}: missing 'source'"
    rule(document, "xid154-recovery-action").update(source="s", kind="pairs")
    rules.rules.cache_clear()
    with pytest.raises(knowledge.KnowledgeError) as raised:
        rules.rules()
    kinds = "text_decides, escalating_pair, line_as_code, line_action, hung_task_after"
    assert str(raised.value) == f"{where}: kind 'pairs' is not one of {kinds}"


def test_the_first_unknown_action_is_named(document: dict[str, Any]) -> None:
    rule(document, "nvlink5-severity")["actions"] = {"fatal": "panic", "nonfatal": "shrug"}
    with pytest.raises(knowledge.KnowledgeError, match="action 'panic' is not in actions.csv"):
        rules.rules()


def test_an_unknown_code_escalates() -> None:
    assert xc.action_for(99999) == "escalate"
    assert xc.explain({"kind": "xid", "code": 99999, "pci": "p", "text": "?"})["action"] == "escalate"


def test_a_hung_task_after_several_xids_names_them_all() -> None:
    events = [
        {"kind": "xid", "code": 45, "pci": "0000:01:00", "text": "x"},
        {"kind": "xid", "code": 13, "pci": "0000:01:00", "text": "x"},
        {"kind": "hung_task", "pci": None, "text": "INFO: task python:12 blocked for more than 120 seconds."},
    ]
    reasons = xc.judge(events)["reasons"]
    assert "hung task after Xid 13, 45: wedged driver (processes stuck in D state) -> reboot-node" in reasons


def test_a_catalog_bucket_the_action_table_lacks_escalates(monkeypatch: pytest.MonkeyPatch) -> None:
    assert xc.action_for(48) == "reset-gpu"
    monkeypatch.setattr(rules, "_bucket_to_action", lambda: {})
    assert xc.action_for(48) == "escalate"
