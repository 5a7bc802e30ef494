"""The rules of ``xid_rules.yaml``'s ``rules:`` list, and the one small interpreter that applies them.

Each rule has a ``kind`` (the file's header says what each does): the line's text decides the action
(``text_decides``: Xid 154's recovery action, the NVLink5 Fatal/Nonfatal word), a pair that escalates
(``escalating_pair``: 48 with 63/64), a kernel line judged as an Xid (``line_as_code``: off the bus as 79)
or with an action of its own (``line_action``), and the codes after which a hung task is a wedged driver
(``hung_task_after``). ``action_for`` (one Xid's action) lives here because it applies the first kind;
``policy.judge`` and ``explanation`` ask the functions below. A rule's words (its reason, its first step)
are templates filled here, so changing a row changes the judgement with no code change.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

from nightowl import knowledge
from nightowl.collectors.gpu.xid_catalog.catalog import (
    _bucket_to_action,
    _codes,
    _recovery,
    _rules,
    lookup,
    nvlink_severity,
    recovery_from_text,
    recovery_name,
)
from nightowl.knowledge import actions as action_table

# kind -> the fields a rule of that kind must have (besides id, kind and source)
KINDS: dict[str, tuple[str, ...]] = {
    "text_decides": ("reader",),
    "escalating_pair": ("code", "with", "action"),
    "line_as_code": ("line", "code", "meaning", "reason"),
    "line_action": ("line", "action", "meaning", "reason"),
    "hung_task_after": ("codes", "action", "step", "reason"),
}
# text_decides readers: what a reader finds in the line, and the words a person reads for it
READERS = ("recovery_action", "nvlink_severity")


def _where(index: int, rule: Any) -> str:
    name = rule.get("id") if isinstance(rule, dict) else None
    return f"{knowledge.path('xid_rules.yaml')}: rules[{index}]" + (f" ({name})" if name else "")


def _check(index: int, rule: Any) -> dict[str, Any]:
    where = _where(index, rule)
    if not isinstance(rule, dict):
        raise knowledge.KnowledgeError(f"{where}: not a mapping")
    for field in ("id", "kind", "source"):
        knowledge.field(rule, field, where)
    kind = rule["kind"]
    if kind not in KINDS:
        raise knowledge.KnowledgeError(f"{where}: kind {kind!r} is not one of {', '.join(KINDS)}")
    for field in KINDS[kind]:
        knowledge.field(rule, field, where)
    named = [rule["action"]] if "action" in rule else []
    named += list((rule.get("actions") or {}).values())
    unknown = [a for a in named if a not in action_table.names()]
    if unknown:
        raise knowledge.KnowledgeError(f"{where}: action {unknown[0]!r} is not in actions.csv")
    if kind == "text_decides":
        if rule["reader"] not in READERS:
            raise knowledge.KnowledgeError(f"{where}: reader {rule['reader']!r} is not one of {', '.join(READERS)}")
        if ("codes" in rule) == ("codes_from" in rule):
            raise knowledge.KnowledgeError(f"{where}: give either codes or codes_from")
        if rule["reader"] != "recovery_action" and not isinstance(rule.get("actions"), dict):
            raise knowledge.KnowledgeError(f"{where}: reader {rule['reader']} needs `actions` (found -> action)")
    return rule


@functools.cache
def rules() -> tuple[dict[str, Any], ...]:
    """Every rule, in file order, checked (a known kind, its fields, known actions and readers)."""
    listed = _rules().get("rules") or []
    if not isinstance(listed, list):
        raise knowledge.KnowledgeError(f"{knowledge.path('xid_rules.yaml')}: rules must be a list")
    checked = tuple(_check(index, rule) for index, rule in enumerate(listed))
    ids = [r["id"] for r in checked]
    if len(set(ids)) != len(ids):
        raise knowledge.KnowledgeError(f"{knowledge.path('xid_rules.yaml')}: rule ids must be unique")
    return checked


def of_kind(kind: str) -> list[dict[str, Any]]:
    return [rule for rule in rules() if rule["kind"] == kind]


def _int_codes(rule: Mapping[str, Any]) -> frozenset[int]:
    if "codes_from" in rule:
        return _codes(str(rule["codes_from"]))
    return frozenset(int(code) for code in rule["codes"])


# -- text_decides -------------------------------------------------------------------------------------------


def text_rule(code: int) -> dict[str, Any] | None:
    """The first ``text_decides`` rule for ``code``, or None."""
    return next((rule for rule in of_kind("text_decides") if code in _int_codes(rule)), None)


def _read(rule: Mapping[str, Any], text: str | None) -> tuple[str | None, str | None]:
    """(what the reader found, the words a person reads for it)."""
    if rule["reader"] == "recovery_action":
        return recovery_from_text(text), recovery_name(text)
    found = nvlink_severity(text)
    return found, found


def text_action(rule: Mapping[str, Any], text: str | None) -> str | None:
    """The action the line's text decides under ``rule``; None when the text says nothing the rule reads."""
    found, _ = _read(rule, text)
    if found is None:
        return None
    if rule["reader"] == "recovery_action":
        return _recovery()[2][found]
    return (rule.get("actions") or {}).get(found)


def action_for(code: int, text: str | None = None) -> str:
    """The verdict action for one Xid, reading the text where a ``text_decides`` rule says the text decides."""
    entry = lookup(code)
    if entry is None or not entry.immediate_action:
        return "escalate"  # unknown code, or the catalog names no action: a person reads its words
    rule = text_rule(code)
    decided = text_action(rule, text) if rule is not None else None
    return decided or _bucket_to_action().get(entry.immediate_action, "escalate")


def text_step(code: int, action: str, text: str | None) -> tuple[bool, str | None]:
    """(a rule speaks, its first step): a rule with ``step`` fills it with what the reader shows (None when the
    line shows nothing readable); a rule with ``step_for_none`` speaks only for a ``none`` action."""
    rule = text_rule(code)
    if rule is None:
        return False, None
    if "step" in rule:
        _, shown = _read(rule, text)
        return True, str(rule["step"]).format(name=shown) if shown else None
    if action == "none" and "step_for_none" in rule:
        return True, str(rule["step_for_none"])
    return False, None


# -- escalating_pair ---------------------------------------------------------------------------------------


def escalating_pair(code: int, codes: Iterable[int]) -> tuple[str, list[int]] | None:
    """(action, the partner codes present) when ``code`` with one of its partners on the same GPU escalates."""
    present = set(codes)
    for rule in of_kind("escalating_pair"):
        partners = sorted(present & {int(c) for c in rule["with"]})
        if int(rule["code"]) == code and partners:
            return str(rule["action"]), partners
    return None


# -- line_as_code, line_action -----------------------------------------------------------------------------


def line_rule(kind: str | None) -> dict[str, Any] | None:
    return next((r for r in rules() if r["kind"] in ("line_as_code", "line_action") and r["line"] == kind), None)


def line_action(rule: Mapping[str, Any]) -> str:
    """A line rule's action: its own, or the catalog action of the code it stands for."""
    return str(rule["action"]) if rule["kind"] == "line_action" else action_for(int(rule["code"]))


def judge_lines(where: str, kinds: set[Any], codes: set[int], reasons: list[str]) -> list[str]:
    """The line rules, in file order, for one GPU's event kinds; a line standing for a code already there is
    judged with that code."""
    actions = []
    for rule in rules():
        if rule["kind"] not in ("line_as_code", "line_action") or rule["line"] not in kinds:
            continue
        if rule["kind"] == "line_as_code" and int(rule["code"]) in codes:
            continue
        action = line_action(rule)
        reasons.append(str(rule["reason"]).format(where=where, action=action))
        actions.append(action)
    return actions


# -- hung_task_after ---------------------------------------------------------------------------------------


def wedged_after_codes() -> frozenset[int]:
    """Codes after which a hung task on the same GPU is a wedged driver."""
    return frozenset(code for rule in of_kind("hung_task_after") for code in _int_codes(rule))


def hung_task_rule(log_xids: Iterable[int]) -> tuple[str, str] | None:
    """(action, reason) for a hung task in a log holding ``log_xids``, or None when no rule applies."""
    xids = sorted(set(log_xids))
    for rule in of_kind("hung_task_after"):
        if xids and (rule.get("with_any_xid") or set(xids) & _int_codes(rule)):
            action = str(rule["action"])
            return action, str(rule["reason"]).format(xids=", ".join(map(str, xids)), action=action)
    return None


def wedged_line(event: Mapping[str, Any], label: str) -> tuple[str, str] | None:
    """(action, first step) for a hung-task event whose label says it came after one of a rule's codes."""
    if event.get("kind") != "hung_task":
        return None
    for rule in of_kind("hung_task_after"):
        if any(f"after Xid {code}" in label for code in sorted(_int_codes(rule))):
            return str(rule["action"]), str(rule["step"])
    return None
