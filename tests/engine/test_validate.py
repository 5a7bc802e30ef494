"""Broken runbooks: each problem is reported with the file, the line and the node."""

from __future__ import annotations

from pathlib import Path

import pytest

from nightowl.engine.validate import RunbookInvalid, load_runbook
from tests.engine.runbook_texts import XID_CHECK, variant
from tests.engine.runbook_texts import write_runbook as write

KNOWN = ["kernel-log", "nvidia-smi"]

GOOD = XID_CHECK


def issues_of(tmp_path: Path, text: str) -> list:
    with pytest.raises(RunbookInvalid) as info:
        load_runbook(write(tmp_path, text), known_collectors=KNOWN)
    return info.value.issues


def test_good_runbook_loads(tmp_path: Path) -> None:
    loaded = load_runbook(write(tmp_path, GOOD), known_collectors=KNOWN)
    assert set(loaded.graph.nodes) == {"start", "check", "bad", "good"}
    assert loaded.collected_before["check"] == frozenset({"kernel_log"})


def test_malformed_yaml_names_line(tmp_path: Path) -> None:
    issues = issues_of(tmp_path, GOOD.replace("    default: good", "    default: [good"))
    assert issues[0].line is not None and issues[0].line >= 12
    assert "invalid YAML" in issues[0].message
    assert str(tmp_path / "rb.yaml") in str(issues[0])


def test_unknown_key_is_an_error_with_line(tmp_path: Path) -> None:
    issues = issues_of(tmp_path, GOOD.replace("    next: check", "    next: check\n    nxet: check"))
    assert any(i.line == 8 and i.node == "start" and "nxet" in i.message for i in issues), issues


def test_cycle(tmp_path: Path) -> None:
    text = GOOD.replace("    default: good", "    default: start")
    issues = issues_of(tmp_path, text)
    assert any("cycle" in i.message for i in issues)
    cycle_issue = next(i for i in issues if "cycle" in i.message)
    assert cycle_issue.line in (5, 8)


ORPHAN = "  orphan:\n    verdict: {id: o, severity: ok, action: none, summary: x}\n"


@pytest.mark.parametrize(
    ("old", "new", "line", "node", "words"),
    [
        pytest.param("goto: bad", "goto: nowhere", 11, "check", ["nowhere"], id="dangling-target"),
        pytest.param("summary: fine}\n", "summary: fine}\n" + ORPHAN, 17, "orphan", ["unreachable"], id="unreachable"),
        pytest.param("xid_codes | length > 0", "xid_codes", 10, "check", ["bool"], id="non-boolean-condition"),
        pytest.param(
            "kernel_log.xid_codes | length > 0",
            "nvidia_smi.gpu_count > 0",
            10,
            "check",
            ["nvidia_smi", "not every path"],
            id="fact-read-before-collected",
        ),
        pytest.param("[kernel-log]", "[kernel-logs]", 6, "start", ["unknown collector"], id="unknown-collector"),
    ],
)
def test_one_problem_is_one_issue_naming_line_and_node(
    tmp_path: Path, old: str, new: str, line: int, node: str, words: list[str]
) -> None:
    issues = issues_of(tmp_path, variant(GOOD, (old, new)))
    assert [(i.line, i.node) for i in issues] == [(line, node)]
    assert all(word in issues[0].message for word in words), issues[0].message


def test_template_braces_rejected(tmp_path: Path) -> None:
    issues = issues_of(tmp_path, GOOD.replace('"kernel_log.xid_codes | length > 0"', '"{{ 1 == 1 }}"'))
    assert issues[0].line == 10 and "{{ }}" in issues[0].message


def test_fact_collected_on_one_path_only(tmp_path: Path) -> None:
    text = """\
    id: t
    title: test
    entry: a
    nodes:
      a:
        decide:
          - when: "params.x == 1"
            goto: b
        default: c
      b:
        collect: [nvidia-smi]
        next: c
      c:
        decide:
          - when: "nvidia_smi.gpu_count > 0"
            goto: v
        default: v
      v:
        verdict: {id: v, severity: ok, action: none, summary: x}
    """
    issues = issues_of(tmp_path, text)
    assert [(i.line, i.node) for i in issues] == [(15, "c")]


def test_bad_action_names_line(tmp_path: Path) -> None:
    issues = issues_of(tmp_path, GOOD.replace("action: reset-gpu", "action: reboot"))
    assert issues[0].node == "bad" and issues[0].line == 14


def test_builtin_runbooks_are_valid() -> None:
    from nightowl.library import runbooks

    for name in runbooks.builtin_paths():
        runbooks.load(name)
