"""The rule kinds of xid_rules.yaml (``rules:``) decide the judgement: change a row and the judgement changes.

Each test edits one rule in a copy of the shipped file and checks that ``judge``, ``action_for`` or ``explain``
follow the edit, so no rule can be decided in Python behind the data's back.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from nightowl import knowledge
from nightowl.collectors.gpu import xid_catalog as xc
from nightowl.collectors.gpu.xid_catalog import rules

SHIPPED = knowledge.read_yaml("xid_rules.yaml")
DBE = {"kind": "xid", "code": 48, "pci": "0000:01:00", "text": "DBE"}
REMAP = {"kind": "xid", "code": 63, "pci": "0000:01:00", "text": "row remap pending"}
OFF_BUS = {"kind": "fallen_off_bus", "pci": "0000:02:00", "text": "GPU has fallen off the bus."}
HUNG = {"kind": "hung_task", "pci": None, "text": "INFO: task python:12 blocked for more than 120 seconds."}
XID154 = "GPU recovery action changed from 0x0 (None) to 0x2 (OS Reboot)"


@pytest.fixture
def edit(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str, Callable[[dict[str, Any]], None]], None]]:
    """edit(rule_id, change): the judgement reads a copy of xid_rules.yaml with that rule changed."""
    document = copy.deepcopy(SHIPPED)

    def change(rule_id: str, how: Callable[[dict[str, Any]], None]) -> None:
        how(next(rule for rule in document["rules"] if rule["id"] == rule_id))
        rules.rules.cache_clear()

    monkeypatch.setattr(rules, "_rules", lambda: document)
    rules.rules.cache_clear()
    yield change
    rules.rules.cache_clear()


def test_every_rule_kind_is_used_by_a_shipped_rule() -> None:
    assert {rule["kind"] for rule in rules.rules()} == set(rules.KINDS)


def test_the_shipped_rules_give_the_documented_judgements() -> None:
    assert xc.judge([DBE, REMAP])["action"] == "drain-and-reset"
    assert xc.judge([OFF_BUS])["action"] == "reboot-node"
    assert xc.action_for(154, XID154) == "reboot-node"
    assert xc.judge([DBE, HUNG])["action"] == "reboot-node"


def test_an_escalating_pair_row_decides_the_pair(edit: Any) -> None:
    edit("xid48-with-63-64", lambda rule: rule.update(action="hardware-ticket"))
    judged = xc.judge([DBE, REMAP])
    assert judged["action"] == "hardware-ticket"
    assert "Xid 48 with Xid 63 on 0000:01:00 -> hardware-ticket" in judged["reasons"]
    edit("xid48-with-63-64", lambda rule: rule.update(**{"with": [64]}))
    assert xc.judge([DBE, REMAP])["action"] == "reset-gpu"  # 63 is no longer a partner: 48's own action


def test_a_line_as_code_row_names_the_code_it_stands_for(edit: Any) -> None:
    edit("off-the-bus-as-79", lambda rule: rule.update(code=13))  # as an application fault (RESTART_APP)
    assert xc.judge([OFF_BUS])["action"] == "restart-app"
    assert xc.explain(OFF_BUS)["action"] == "restart-app"
    edit("off-the-bus-as-79", lambda rule: rule.update(line="gpu_reset_required"))
    assert xc.judge([OFF_BUS])["action"] == "none"


def test_a_line_action_row_decides_its_line(edit: Any) -> None:
    line = {"kind": "gpu_reset_required", "pci": "0000:03:00", "text": "GPU Reset Required"}
    assert xc.judge([line])["action"] == "reset-gpu"
    edit("driver-says-reset", lambda rule: rule.update(action="reboot-node"))
    assert xc.judge([line])["action"] == "reboot-node"
    assert xc.explain(line)["first_step"] == xc.FIRST_STEP_BY_ACTION["reboot-node"]


def test_a_text_decides_row_reads_the_line(edit: Any) -> None:
    fatal = "NETIR_LINK_EVT Fatal XC0 i0 Link 05 (0x004dc008 0x00000001 0x0 0x0 0x0 0x0)"
    assert xc.action_for(149, fatal) == "drain-and-reset"
    edit("nvlink5-severity", lambda rule: rule["actions"].update(fatal="reset-gpu"))
    assert xc.action_for(149, fatal) == "reset-gpu"
    edit("xid154-recovery-action", lambda rule: rule.update(codes=[]))
    assert xc.action_for(154, XID154) == "escalate"  # the catalog's XID_154 bucket: nothing reads the text
    assert xc.explain({"kind": "xid", "code": 154, "text": XID154})["first_step"] != (
        "follow the driver's recovery action: OS Reboot"
    )


def test_a_hung_task_after_row_decides_the_wedged_driver(edit: Any) -> None:
    assert xc.event_row({**HUNG, "subkind": "hung task after Xid 45 on 0000:01:00"})["action"] == "reboot-node"
    edit("wedged-driver", lambda rule: rule.update(with_any_xid=False))
    # 48 is not a code the rule names: the hung task is judged by its kernel_patterns row (escalate)
    assert xc.judge([DBE, HUNG])["action"] == "escalate"
    edit("wedged-driver", lambda rule: rule.update(codes=[48]))
    assert xc.judge([DBE, HUNG])["action"] == "reboot-node"
    assert xc.wedged_after_codes() == {48}
    from nightowl.collectors.gpu.kernel_log import log_facts

    hung = {"hung_tasks": [{"task": "python", "after_xids": {"0000:01:00": [48]}}]}
    assert log_facts._hung_facts(hung)["wedged_driver_gpus"] == ["0000:01:00"]  # kernel_log reads the rule too
    row = xc.event_row({**HUNG, "subkind": "hung task after Xid 45 on 0000:01:00"})
    assert row["action"] != "reboot-node"


@pytest.mark.parametrize(
    ("rule_id", "change", "message"),
    [
        ("xid48-with-63-64", {"kind": "pairs"}, "kind 'pairs'"),
        ("xid48-with-63-64", {"action": "power-off"}, "action 'power-off'"),
        ("nvlink5-severity", {"reader": "tea-leaves"}, "reader 'tea-leaves'"),
        ("off-the-bus-as-79", {"code": "drop"}, "code"),
    ],
)
def test_a_bad_rule_is_refused_naming_it(edit: Any, rule_id: str, change: dict[str, Any], message: str) -> None:
    def bad(rule: dict[str, Any]) -> None:
        for key, value in change.items():
            rule.pop(key) if value == "drop" else rule.update({key: value})

    edit(rule_id, bad)
    with pytest.raises(knowledge.KnowledgeError, match=message) as raised:
        rules.rules()
    assert rule_id in str(raised.value)


def test_the_nvlink5_list_is_one_fact(monkeypatch: pytest.MonkeyPatch) -> None:
    """xid-nvlink5 reads xid_rules.yaml's nvlink5_codes: the runbooks read other_xid_codes, no list of their own."""
    from nightowl.collectors.gpu import xid_nvlink5
    from nightowl.library import runbooks

    kernel = {"events": [], "xid_codes": [13, 145, 149]}
    assert xid_nvlink5.derive({"kernel_log": kernel})["other_xid_codes"] == [13]
    monkeypatch.setattr(xc.catalog, "_codes", lambda name: frozenset({13}) if name == "nvlink5_codes" else frozenset())
    monkeypatch.setitem(xc.catalog._LAZY, "NVLINK5_CODES", lambda: frozenset({13}))
    assert xid_nvlink5.derive({"kernel_log": kernel})["other_xid_codes"] == [145, 149]
    for name in ("xid", "node-health"):
        assert "148, 149, 150" not in runbooks.builtin_paths()[name].read_text()
