"""`runbook validate`'s lint for hidden failures (issue 21): a fallback that decides for a failed
collector, a parameter default of the wrong type, a YAML key written twice. Each names file, line, node."""

from __future__ import annotations

from pathlib import Path

import pytest

from nightowl.engine.validate import RunbookInvalid, load_runbook
from nightowl.engine.yaml_lines import YamlError, load_with_lines
from nightowl.library import runbooks
from tests.engine.runbook_texts import XID_CHECK, variant, write_runbook

# The shape of the defect in xid.yaml's per-code step: the judgement's action read through a fallback,
# its status never tested, a default that is healthy.
HIDDEN = variant(
    XID_CHECK,
    ("next: check\n  check:", "next: judge\n  judge:"),
    ("kernel_log.xid_codes | length > 0", "(kernel_log.xid_codes | default([])) | length > 0"),
)
CHECK = """      - when: "status.kernel_log != 'ok'"
        goto: unread
"""
UNREAD = """  unread:
    cannot_judge: "kernel log {{ status.kernel_log }}"
"""


def load(tmp_path: Path, text: str) -> object:
    return load_runbook(write_runbook(tmp_path, text), known_collectors=["kernel-log", "nvidia-smi"])


def issues_of(tmp_path: Path, text: str) -> list:
    with pytest.raises(RunbookInvalid) as info:
        load(tmp_path, text)
    return info.value.issues


def test_a_fallback_that_decides_for_a_failed_collector_is_an_error(tmp_path: Path) -> None:
    [issue] = issues_of(tmp_path, HIDDEN)
    assert (issue.node, issue.line, issue.file) == ("judge", 10, str(tmp_path / "rb.yaml"))
    assert "kernel_log.xid_codes" in issue.message and "status.kernel_log" in issue.message
    assert "good" in issue.message


@pytest.mark.parametrize(
    "fixed",
    [
        HIDDEN.replace("    decide:\n", "    decide:\n" + CHECK) + UNREAD,  # checked before the read
        HIDDEN.replace("    default: good", CHECK + "    default: good") + UNREAD,  # after it, same node
        HIDDEN.replace("summary: fine}", 'summary: "kernel log {{ status.kernel_log }}"}'),  # told
        HIDDEN.replace("severity: ok, action: none", "severity: warning, action: escalate"),  # not healthy
        HIDDEN.replace("| default([])", ""),  # no fallback: reading a failed collector is "cannot judge"
    ],
)
def test_a_status_check_on_the_way_or_no_healthy_end_passes(tmp_path: Path, fixed: str) -> None:
    load(tmp_path, fixed)


def test_a_branch_that_needs_the_facts_is_not_a_way_for_a_failed_collector(tmp_path: Path) -> None:
    """With kernel_log failed, `xid_codes | default([]) | length > 0` is false: its target is not reached."""
    text = HIDDEN.replace("goto: bad", "goto: good").replace("    default: good", "    default: bad")
    load(tmp_path, text)
    # ... but a condition that also reads another collector may go either way
    other = text.replace("collect: [kernel-log]", "collect: [kernel-log, nvidia-smi]").replace(
        "(kernel_log.xid_codes | default([])) | length > 0",
        "(kernel_log.xid_codes | default([])) | length > 0 or nvidia_smi.gpu_count == 0",
    )
    [issue] = issues_of(tmp_path, other)
    assert issue.node == "judge" and "kernel_log.xid_codes" in issue.message


def test_a_check_on_only_one_way_to_the_node_is_not_enough(tmp_path: Path) -> None:
    fork = (
        "    next: fork\n  fork:\n    decide:\n      - when: params.strict == true\n        goto: checked\n"
        "    default: judge\n  checked:\n    decide:\n" + CHECK + "    default: judge"
    )
    text = HIDDEN.replace("    next: judge", fork)
    text = text.replace("entry: start", "parameters:\n  strict: {default: false}\nentry: start") + UNREAD
    [issue] = issues_of(tmp_path, text)
    assert issue.node == "judge"
    # every way checked: passes
    load(tmp_path, text.replace("    default: judge\n  checked:", "    default: checked\n  checked:"))


def test_every_built_in_runbook_passes_the_lint() -> None:
    for name in runbooks.builtin_paths():
        runbooks.load(name)  # raises RunbookInvalid, naming file, line and node


def test_the_xid_runbook_does_not_call_unjudged_xids_informational(tmp_path: Path) -> None:
    """Put back the per-code step as it was (no status check of the judgement): the lint refuses it."""
    source = runbooks.builtin_paths()["xid"].read_text()
    guard = (
        "status.kernel_log == 'ok' and (status.xid_judgement != 'ok' or status.pcie_attribution != 'ok'"
        " or status.gpu_history != 'ok')"
    )
    assert guard in source
    path = tmp_path / "xid.yaml"  # its fragments are found in nightowl's own folder (runbooks.fragment_dirs)
    path.write_text(source.replace(guard, "false"))
    with pytest.raises(RunbookInvalid) as info:
        runbooks.load(str(path))
    flagged = {(i.node, "xid_judgement.action" in i.message) for i in info.value.issues}
    assert ("per-code", True) in flagged


# --- parameter defaults and duplicate keys -----------------------------------------------------------
@pytest.mark.parametrize(
    ("declared", "says"),
    [
        ("{default: eight, type: number}", "expects a number"),
        ("{default: '8', type: integer}", "is text, not integer"),
        ("{default: maybe, type: boolean}", "expects true or false"),
        ("{default: '-rf', type: path}", "expects a file path"),
        ("{default: 'file:///etc/shadow', type: url}", "http:// or https://"),
        ("{default: '{not json', type: json}", "expects JSON"),
    ],
)
def test_a_default_that_contradicts_its_type_is_an_error(tmp_path: Path, declared: str, says: str) -> None:
    text = HIDDEN.replace("entry: start", f"parameters:\n  n: {declared}\nentry: start")
    text = text.replace("    decide:\n", "    decide:\n" + CHECK) + UNREAD
    [issue] = issues_of(tmp_path, text)
    assert issue.line == 4 and "parameter n" in issue.message and says in issue.message


@pytest.mark.parametrize(
    "declared", ["{default: 8, type: number}", "{default: 8}", "{default: null, type: integer}", "{default: true}"]
)
def test_a_default_of_its_type_passes(tmp_path: Path, declared: str) -> None:
    text = HIDDEN.replace("entry: start", f"parameters:\n  n: {declared}\nentry: start")
    load(tmp_path, text.replace("    decide:\n", "    decide:\n" + CHECK) + UNREAD)


def test_a_duplicate_key_is_an_error_naming_both_lines(tmp_path: Path) -> None:
    text = HIDDEN.replace("    default: good", "    default: good\n    default: bad")
    [issue] = issues_of(tmp_path, text)
    assert issue.line == 13 and "duplicate key 'default'" in issue.message and "line 12" in issue.message
    nodes = HIDDEN + "  good:\n    verdict: {id: again, severity: ok, action: none, summary: twice}\n"
    [issue] = issues_of(tmp_path, nodes)
    assert "duplicate key 'good'" in issue.message


def test_duplicate_keys_stay_allowed_where_not_asked_for() -> None:
    """Inventories and --param yaml values keep YAML's rule (the later one wins); runbooks refuse it."""
    assert load_with_lines("a: 1\na: 2\n")[0] == {"a": 2}
    with pytest.raises(YamlError, match="duplicate key 'a'"):
        load_with_lines("a: 1\na: 2\n", unique_keys=True)
    with pytest.raises(YamlError, match="duplicate key 'b'"):
        load_with_lines("x: &x {b: 1}\ny: [*x, {b: 1, c: 2, b: 3}]\n", unique_keys=True)
    assert load_with_lines("x: &x {b: 1}\ny: [*x, *x]\n", unique_keys=True)[0]["y"] == [{"b": 1}, {"b": 1}]
