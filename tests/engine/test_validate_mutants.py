"""engine/validate.py's messages and lines, pass by pass (issue 30 mutation figures): each check names
the file, the line and the node, and says exactly what is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from nightowl.collectors import get_collector
from nightowl.engine.validate import Issue, RunbookInvalid, load_runbook
from tests.engine.runbook_texts import XID_CHECK, variant
from tests.engine.runbook_texts import write_runbook as write

KNOWN = ["kernel-log", "nvidia-smi"]
GOOD = variant(
    XID_CHECK,
    ("entry: start\n", "entry: start\nparameters:\n  limit: {default: 3, type: integer}\n"),
    ("length > 0", "length > params.limit"),
)


def issues(tmp_path: Path, text: str, lookup: bool = False) -> list[Issue]:
    with pytest.raises(RunbookInvalid) as caught:
        load_runbook(write(tmp_path, text), known_collectors=KNOWN, lookup=get_collector if lookup else None)
    assert str(caught.value) == "\n".join(str(i) for i in caught.value.issues)
    return caught.value.issues


def test_issue_text() -> None:
    assert str(Issue("rb.yaml", 4, "n", "bad")) == "rb.yaml:4: [node n] bad"
    assert str(Issue("rb.yaml", None, None, "bad")) == "rb.yaml: bad"
    assert str(Issue("rb.yaml", 0, None, "bad")) == "rb.yaml: bad"


def test_a_good_runbook_and_its_parameters(tmp_path: Path) -> None:
    loaded = load_runbook(write(tmp_path, GOOD), known_collectors=KNOWN, lookup=get_collector)
    assert loaded.id == "t"
    assert loaded.node_line("check") == 10
    assert loaded.resolve_params() == {"limit": 3}
    assert loaded.resolve_params({"limit": "5"}) == {"limit": 5}
    with pytest.raises(ValueError) as caught:
        loaded.resolve_params({"x": 1, "a": 2})
    assert str(caught.value) == "runbook t has no parameter a, x (its parameters: limit)"
    bare = load_runbook(write(tmp_path, GOOD.replace("parameters:\n  limit: {default: 3, type: integer}\n", "").replace(
        "params.limit", "3")), known_collectors=KNOWN)  # fmt: skip
    with pytest.raises(ValueError, match=r"\(its parameters: none\)$"):
        bare.resolve_params({"x": 1})


def test_a_file_that_cannot_be_read_or_is_not_utf8(tmp_path: Path) -> None:
    with pytest.raises(RunbookInvalid) as caught:
        load_runbook(tmp_path / "absent.yaml")
    (issue,) = caught.value.issues
    assert issue.message == "cannot read: No such file or directory" and issue.line is None
    path = tmp_path / "latin.yaml"
    path.write_bytes(b"id: t\ntitle: caf\xe9\n")
    with pytest.raises(RunbookInvalid) as caught:
        load_runbook(path)
    (issue,) = caught.value.issues
    assert (issue.line, issue.message) == (2, "not UTF-8 text (byte 16): a runbook is YAML in UTF-8")


def test_the_schema_pass(tmp_path: Path) -> None:
    (issue,) = issues(tmp_path, "- a list\n")
    assert (issue.line, issue.message) == (1, "a runbook is a mapping with id, title, entry, nodes")
    found = issues(tmp_path, GOOD.replace("    next: check", "    next: check\n    nxet: check"))
    assert [(i.node, i.line) for i in found] == [("start", 10)]
    assert found[0].message.startswith("nodes.start.")


def test_the_parameter_pass(tmp_path: Path) -> None:
    (issue,) = issues(tmp_path, GOOD.replace("{default: 3, type: integer}", '{default: "3", type: integer}'))
    assert (issue.line, issue.node) == (5, None)
    assert issue.message == "parameter limit: default '3' is text, not integer: write it unquoted"
    (issue,) = issues(tmp_path, GOOD.replace("{default: 3, type: integer}", "{default: eight, type: integer}"))
    assert issue.message.startswith("parameter limit: default 'eight' is not of its type integer: ")
    load_runbook(write(tmp_path, GOOD.replace("{default: 3, type: integer}", '{default: "x", type: string}')))


def test_the_graph_pass(tmp_path: Path) -> None:
    (issue,) = issues(tmp_path, GOOD.replace("entry: start", "entry: begin"))
    assert (issue.line, issue.node, issue.message) == (3, None, "entry 'begin' is not a node")
    found = issues(tmp_path, GOOD.replace("    next: check", "    next: chek").replace("goto: bad", "goto: bda"))
    assert [(i.line, i.node, i.message) for i in found] == [
        (9, "start", "target 'chek' does not exist"),
        (13, "check", "target 'bda' does not exist"),
    ]
    (issue,) = issues(tmp_path, GOOD.replace("default: good", "default: goood"))
    assert (issue.line, issue.message) == (14, "target 'goood' does not exist")
    found = issues(tmp_path, GOOD.replace("        goto: bad", "        goto: start"))
    assert (found[0].message, found[0].node, found[0].line) == ("node is part of a cycle", "start", 7)
    assert sum(i.message == "node is part of a cycle" for i in found) == 1  # the first cycle, once
    unreachable = GOOD + "  lost:\n    verdict: {id: lost, severity: ok, action: none, summary: x}\n"
    (issue,) = issues(tmp_path, unreachable)
    assert (issue.line, issue.node, issue.message) == (19, "lost", "node is unreachable from the entry")


def test_the_collector_and_expression_passes(tmp_path: Path) -> None:
    (issue,) = issues(tmp_path, GOOD.replace("collect: [kernel-log]", "collect: [kernel-logs]"))
    assert (issue.line, issue.node, issue.message) == (8, "start", "unknown collector 'kernel-logs'")
    (issue,) = issues(tmp_path, GOOD.replace("| length > params.limit", "| length"))
    assert (issue.line, issue.node) == (12, "check")
    assert issue.message.startswith("when: condition does not yield a bool")
    (issue,) = issues(tmp_path, GOOD.replace('summary: "xids {{ kernel_log.xid_codes }}"', 'summary: "{{ x "'))
    assert issue.node == "bad" and issue.message.startswith("summary: template syntax error: ")


def test_the_facts_pass(tmp_path: Path) -> None:
    (issue,) = issues(tmp_path, GOOD.replace("kernel_log.xid_codes | length", "kernel_lg.xid_codes | length"))
    assert (issue.line, issue.node) == (12, "check")
    assert issue.message == "reads unknown name 'kernel_lg' (did you mean 'kernel_log'?)"
    (issue,) = issues(tmp_path, GOOD.replace("summary: fine}", "summary: fine, evidence: [nvidia_smi.gpu_count]}"))
    assert (issue.line, issue.node) == (18, "good")  # the evidence line
    assert issue.message.startswith("reads 'nvidia_smi', which not every path to this node collects")
    (issue,) = issues(tmp_path, GOOD.replace("kernel_log.xid_codes | length", "zzz | length"))
    assert issue.message == "reads unknown name 'zzz'"
    late = GOOD.replace("collect: [kernel-log]\n    next: check", (
        "collect: [nvidia-smi]\n    next: fork\n"
        "  fork:\n    decide:\n      - when: \"nvidia_smi.gpu_count > 0\"\n        goto: getlog\n    default: check\n"
        "  getlog:\n    collect: [kernel-log]\n    next: check"
    ))  # fmt: skip
    found = issues(tmp_path, late)
    assert [i.message for i in found][0] == (
        "reads 'kernel_log', which not every path to this node collects (guard it with `| default(...)` if it may be"
        " absent)"
    )
    guarded = late.replace("kernel_log.xid_codes | length >", "(kernel_log.xid_codes | default([])) | length >")
    # A guarded read passes the facts pass (what stops it is the later hidden-failure lint).
    (issue,) = issues(tmp_path, guarded.replace('"xids {{ kernel_log.xid_codes }}"', "x"))
    assert "through a fallback" in issue.message and "not every path" not in issue.message
    # A healthy verdict that states the collector's status in its evidence counts as its check.
    stated = guarded.replace('"xids {{ kernel_log.xid_codes }}"', "x").replace(
        "summary: fine}", "summary: fine, evidence: [status.kernel_log]}"
    )
    load_runbook(write(tmp_path, stated), known_collectors=KNOWN)


def test_the_declared_facts_pass(tmp_path: Path) -> None:
    (issue,) = issues(tmp_path, GOOD.replace("kernel_log.xid_codes | length", "kernel_log.xid_code | length"), True)
    assert (issue.line, issue.node) == (12, "check")
    assert issue.message == (
        "reads kernel_log.xid_code, which collector 'kernel-log' does not produce"
        " (did you mean 'xid_codes' or 'sxid_codes'?)"
    )
    (issue,) = issues(tmp_path, GOOD.replace("params.limit", "params.limt"), True)
    assert issue.message == "reads params.limt, which is not a parameter of this runbook (did you mean 'limit'?)"
    (issue,) = issues(tmp_path, GOOD.replace("| length > params.limit", "| length > 0 and status.nvidia_smi == 'ok'"),
                      True)  # fmt: skip
    assert issue.message.startswith("reads status.nvidia_smi, which is not a namespace this runbook collects")
    # Through hosts[h] the fact is checked as well (item 8 of the earlier sample).
    through_hosts = GOOD.replace("kernel_log.xid_codes | length > params.limit",
                                 "hosts['x'].kernel_log.xid_code | length > 0")  # fmt: skip
    (issue,) = issues(tmp_path, through_hosts, True)
    assert issue.message.startswith("reads kernel_log.xid_code, which collector 'kernel-log' does not produce")
    load_runbook(write(tmp_path, GOOD), known_collectors=KNOWN, lookup=lambda kind: None)  # declares nothing


def test_a_cannot_judge_text_is_checked_and_a_lone_verdict_loads(tmp_path: Path) -> None:
    unsure = GOOD.replace("default: good", "default: unsure") + '  unsure:\n    cannot_judge: "no {{ x "\n'
    unsure = unsure.replace("  good:\n    verdict: {id: good, severity: ok, action: none, summary: fine}\n", "")
    found = issues(tmp_path, unsure)
    assert [(i.node, i.message.split(":")[0]) for i in found] == [("unsure", "cannot_judge")]
    lone = "id: t\ntitle: t\nentry: only\nnodes:\n  only:\n"
    lone += "    verdict: {id: ok, severity: ok, action: none, summary: x}\n"
    assert set(load_runbook(write(tmp_path, lone)).graph.nodes) == {"only"}
