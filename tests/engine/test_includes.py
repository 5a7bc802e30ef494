"""`include:` of a named fragment (engine/includes.py): its nodes join the runbook's and are validated in the
same passes, errors name the fragment's file and line, a node id is defined once, and the runbook as it ran
(the bundle's copy) loads alone to the same runbook."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from nightowl.engine import includes
from nightowl.engine.validate import RunbookInvalid, load_runbook
from nightowl.library import runbooks
from tests.engine.runbook_texts import INCLUDING, variant, write_with_fragment
from tests.engine.runbook_texts import KNOWN_COLLECTORS as KNOWN

# The shared runbook with a second condition on the Xid codes, which the fragment's summary reads too.
RUNBOOK = variant(
    INCLUDING,
    (
        "        goto: bad\n",
        '        goto: bad\n      - when: "(kernel_log.xid_codes | default([])) | length > 0"\n        goto: bad\n',
    ),
)

FRAGMENT = """\
fragment: shared
description: a verdict two runbooks share
nodes:
  bad:
    verdict:
      id: xid-seen
      severity: warning
      action: escalate
      summary: "Xid {{ kernel_log.xid_codes | join(', ') }}"
"""


def write(folder: Path, runbook: str = RUNBOOK, fragment: str = FRAGMENT) -> Path:
    return write_with_fragment(folder, runbook, fragment)


def issues_of(path: Path, **kwargs: object) -> list:
    with pytest.raises(RunbookInvalid) as info:
        load_runbook(path, known_collectors=KNOWN, **kwargs)  # type: ignore[arg-type]
    return info.value.issues


def test_a_fragments_nodes_join_the_runbooks(tmp_path: Path) -> None:
    loaded = load_runbook(write(tmp_path), known_collectors=KNOWN)
    assert set(loaded.runbook.nodes) == {"start", "check", "good", "bad"}
    assert loaded.runbook.include == ["shared"]
    assert loaded.file_of("bad") == str(tmp_path / "fragments" / "shared.yaml")
    assert loaded.file_of("good") == str(tmp_path / "rb.yaml")
    assert loaded.node_line("bad") == 4  # the fragment's line


def test_an_error_in_a_fragment_node_names_the_fragments_file_and_line(tmp_path: Path) -> None:
    [issue] = issues_of(write(tmp_path, fragment=FRAGMENT.replace("action: escalate", "action: panic")))
    assert issue.file == str(tmp_path / "fragments" / "shared.yaml")
    assert issue.node == "bad" and issue.line == 8 and "panic" in issue.message


def test_a_fragment_node_is_validated_in_the_fact_pass_too(tmp_path: Path) -> None:
    """The fragment's summary reads a fact no node collected before it: the same pass as a runbook node."""
    fragment = FRAGMENT.replace("kernel_log.xid_codes", "nvidia_smi.gpu_count")
    [issue] = issues_of(write(tmp_path, fragment=fragment))
    assert issue.file.endswith("shared.yaml") and issue.node == "bad" and "nvidia_smi" in issue.message


def test_a_node_id_defined_twice_names_both_places(tmp_path: Path) -> None:
    runbook = RUNBOOK + "  bad:\n    verdict: {id: other, severity: ok, action: none, summary: x}\n"
    [issue] = issues_of(write(tmp_path, runbook=runbook))
    assert issue.file.endswith("shared.yaml") and issue.line == 4 and issue.node == "bad"
    assert f"{tmp_path / 'rb.yaml'}:{RUNBOOK.count(chr(10)) + 1}" in issue.message


def test_a_fragments_target_is_checked_after_the_merge(tmp_path: Path) -> None:
    fragment = FRAGMENT + "  more:\n    decide: [{when: 'true', goto: nowhere}]\n    default: good\n"
    issues = issues_of(write(tmp_path, fragment=fragment))
    assert any(i.node == "more" and "nowhere" in i.message and i.file.endswith("shared.yaml") for i in issues)


@pytest.mark.parametrize(
    ("runbook", "fragment", "says"),
    [
        (RUNBOOK.replace("[shared]", "[absent]"), FRAGMENT, "no fragment absent.yaml"),
        (RUNBOOK.replace("[shared]", "['../rb']"), FRAGMENT, "not a fragment name"),
        (RUNBOOK.replace("[shared]", "[shared, shared]"), FRAGMENT, "named twice"),
        (RUNBOOK, FRAGMENT.replace("fragment: shared", "fragment: other"), "must be 'shared'"),
        (RUNBOOK, FRAGMENT.replace("description:", "entry: start\ndescription:"), "unknown key 'entry'"),
        (RUNBOOK.replace("include: [shared]\n", "") + "include: [shared]\n", FRAGMENT, "nodes: must be the last"),
    ],
)
def test_a_bad_include_is_refused_with_its_line(tmp_path: Path, runbook: str, fragment: str, says: str) -> None:
    issues = issues_of(write(tmp_path, runbook=runbook, fragment=fragment))
    assert any(says in i.message and i.line for i in issues), issues


def test_a_fragment_every_user_may_write_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path)
    os.chmod(tmp_path / "fragments" / "shared.yaml", 0o666)
    [issue] = issues_of(path)
    assert "writable by every user" in issue.message and issue.file == str(path)


def test_a_fragment_is_found_in_the_fallback_folder(tmp_path: Path) -> None:
    shared = tmp_path / "nightowl"
    write(shared)
    site = tmp_path / "site"
    site.mkdir()
    (site / "rb.yaml").write_text(RUNBOOK)
    loaded = load_runbook(site / "rb.yaml", known_collectors=KNOWN, fragment_dirs=(shared / "fragments",))
    assert loaded.file_of("bad") == str(shared / "fragments" / "shared.yaml")
    assert "no fragment shared.yaml" in issues_of(site / "rb.yaml")[0].message


def test_the_runbook_as_it_ran_loads_alone_to_the_same_runbook(tmp_path: Path) -> None:
    loaded = load_runbook(write(tmp_path), known_collectors=KNOWN)
    alone = tmp_path / "bundle" / "runbook.yaml"
    alone.parent.mkdir()
    alone.write_text(loaded.as_ran())
    again = load_runbook(alone, known_collectors=KNOWN)
    assert again.runbook.nodes == loaded.runbook.nodes and again.runbook.include == []


@pytest.mark.parametrize("name", ["xid", "node-health"])
def test_the_built_in_runbooks_as_they_ran_load_alone(name: str, tmp_path: Path) -> None:
    loaded = runbooks.load(name)
    alone = tmp_path / "runbook.yaml"
    alone.write_text(loaded.as_ran())
    again = load_runbook(alone)
    assert again.runbook.nodes == load_runbook(runbooks.builtin_paths()[name], fragment_dirs=()).runbook.nodes


def test_xid_and_node_health_share_the_xid_judgement_fragment() -> None:
    """The nodes both Xid runbooks reach alike are written once: each includes the fragment and repeats none
    of its nodes (a node id defined twice would not load)."""
    fragment = yaml.safe_load((runbooks.builtin_dir() / "fragments" / "xid-judgement.yaml").read_text())
    shared = set(fragment["nodes"])
    assert {"dcgm-telemetry", "gpu-repeat-offender", "driver-mismatch", "wedged-driver"} <= shared
    for name in ("xid", "node-health"):
        own = yaml.safe_load(runbooks.builtin_paths()[name].read_text())
        assert own["include"] == ["xid-judgement"]
        assert not shared & set(own["nodes"])
        assert shared <= set(runbooks.load(name).runbook.nodes)


def test_a_fragment_is_no_runbook() -> None:
    names = set(runbooks.builtin_paths())
    assert "xid-judgement" not in names and not any(name.startswith("fragments") for name in names)
    assert (runbooks.builtin_dir() / "fragments" / "xid-judgement.yaml").is_file()


def test_a_changed_fragment_is_not_taken_from_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NIGHTOWL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("NIGHTOWL_CACHE", raising=False)
    site = tmp_path / "site"
    site.mkdir()
    (site / "xid-copy.yaml").write_text(runbooks.builtin_paths()["xid"].read_text())
    (site / "fragments").mkdir()
    fragment = (runbooks.builtin_dir() / "fragments" / "xid-judgement.yaml").read_text()
    (site / "fragments" / "xid-judgement.yaml").write_text(fragment)
    runbooks._LOADED.clear()
    runbooks.load(str(site / "xid-copy.yaml"))
    (site / "fragments" / "xid-judgement.yaml").write_text(fragment.replace("action: reconfigure", "action: panic"))
    with pytest.raises(RunbookInvalid, match="panic"):  # the process's memo sees the edit (serve keeps running)
        runbooks.load(str(site / "xid-copy.yaml"))
    runbooks._LOADED.clear()
    with pytest.raises(RunbookInvalid, match="panic") as info:
        runbooks.load(str(site / "xid-copy.yaml"))
    assert info.value.issues[0].file == str(site / "fragments" / "xid-judgement.yaml")


def test_fragment_files_lists_every_fragment_a_runbook_could_include(tmp_path: Path) -> None:
    path = write(tmp_path)
    assert list(includes.fragment_files(path).values()) == [tmp_path / "fragments" / "shared.yaml"]


def test_the_librarys_own_checks_name_the_fragment_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """runbooks.load checks a verdict's next: after validation: a fragment's node is still named by its file."""
    monkeypatch.setenv("NIGHTOWL_CACHE", "off")
    fragment = FRAGMENT + "      next: {runbook: no-such-runbook, hosts: \"['a']\"}\n"
    path = write(tmp_path, fragment=fragment)
    runbooks._LOADED.clear()
    with pytest.raises(RunbookInvalid) as info:
        runbooks.load(str(path))
    [issue] = info.value.issues
    assert issue.file == str(tmp_path / "fragments" / "shared.yaml") and issue.node == "bad", issue
