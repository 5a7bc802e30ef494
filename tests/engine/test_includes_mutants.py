"""What a runbook author reads when an ``include:`` goes wrong, written out whole (file, line, message), and the
runbook as it ran, line by line (engine/includes.py; scripts/mutate's survivors led here)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from nightowl.engine import includes
from nightowl.engine.validate import RunbookInvalid, load_runbook
from tests.engine.runbook_texts import INCLUDING as RUNBOOK
from tests.engine.runbook_texts import KNOWN_COLLECTORS as KNOWN
from tests.engine.runbook_texts import SHARED_FRAGMENT as FRAGMENT
from tests.engine.runbook_texts import write_with_fragment as write


def messages(path: Path) -> list[str]:
    """Each issue as the author reads it: FILE:LINE: [node NODE] MESSAGE."""
    with pytest.raises(RunbookInvalid) as info:
        load_runbook(path, known_collectors=KNOWN)
    return [str(issue) for issue in info.value.issues]


def test_a_fragment_whose_nodes_are_not_last_is_refused_naming_the_nodes_line(tmp_path: Path) -> None:
    fragment = "fragment: shared\nnodes:\n  bad:\n    verdict: {id: x, severity: ok, action: none, summary: s}\n"
    path = write(tmp_path, fragment=fragment + "description: after the nodes\n")
    shared = tmp_path / "fragments" / "shared.yaml"
    assert messages(path) == [f"{shared}:2: nodes: must be the fragment's last key"]


@pytest.mark.parametrize("nodes", ["nodes: {}\n", "nodes: [bad]\n", ""])
def test_a_fragment_without_nodes_is_refused(tmp_path: Path, nodes: str) -> None:
    path = write(tmp_path, fragment="fragment: shared\ndescription: d\n" + nodes)
    shared = tmp_path / "fragments" / "shared.yaml"
    line = 3 if nodes else 1
    assert messages(path) == [f"{shared}:{line}: nodes: a mapping of node id -> node"]


def test_a_fragment_that_is_no_mapping_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, fragment="- just\n- a list\n")
    shared = tmp_path / "fragments" / "shared.yaml"
    assert messages(path) == [f"{shared}:1: a fragment is a mapping with fragment, description, nodes"]


def test_a_fragment_with_the_wrong_name_and_an_unknown_key_gets_both(tmp_path: Path) -> None:
    fragment = FRAGMENT.replace("fragment: shared", "fragment: other\nentry: start")
    shared = tmp_path / "fragments" / "shared.yaml"
    assert messages(write(tmp_path, fragment=fragment)) == [
        f"{shared}:2: unknown key 'entry' (a fragment has fragment, description, nodes)",
        f"{shared}:1: fragment: must be 'shared', its file's name",
    ]


def test_a_fragment_without_its_name_is_refused_at_line_one(tmp_path: Path) -> None:
    fragment = FRAGMENT.replace("fragment: shared\n", "")
    shared = tmp_path / "fragments" / "shared.yaml"
    assert messages(write(tmp_path, fragment=fragment)) == [f"{shared}:1: fragment: must be 'shared', its file's name"]


def test_a_fragment_that_is_bad_yaml_names_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, fragment=FRAGMENT + "  bad:\n    verdict: {}\n")  # a duplicate key
    [message] = messages(path)
    assert message.startswith(f"{tmp_path / 'fragments' / 'shared.yaml'}:6: ")


def test_a_fragment_that_cannot_be_read_says_why_in_words(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path)
    shared = tmp_path / "fragments" / "shared.yaml"
    real = Path.read_text

    def refuse(self: Path, *args: object, **kwargs: object) -> str:
        if self == shared:
            raise OSError(errno.EACCES, "Permission denied", str(self))
        return real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "read_text", refuse)
    assert messages(path) == [f"{path}:3: include: shared: cannot read {shared} (Permission denied)"]


def test_a_fragment_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path)
    shared = tmp_path / "fragments" / "shared.yaml"
    shared.write_bytes(b"fragment: \xff\n")
    [message] = messages(path)
    assert message.startswith(f"{path}:3: include: shared: cannot read {shared} (") and "utf-8" in message


def test_a_fragment_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path)
    shared = tmp_path / "fragments" / "shared.yaml"
    if os.getuid() != 0:
        pytest.skip("only root can give a file to another user")
    os.chown(shared, 1, -1)  # uid 1: only root (0) and the runner may own a fragment
    assert messages(path) == [
        f"{path}:3: include: shared: refused: {shared} is owned by uid 1, neither root nor the user running nightowl"
    ]
    os.chown(shared, 12345, -1)
    assert messages(path) == [
        f"{path}:3: include: shared: refused: {shared} is owned by uid 12345,"
        " neither root nor the user running nightowl"
    ]


def test_a_fragment_folder_every_user_may_write_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path)
    os.chmod(tmp_path / "fragments", 0o777)
    folder = tmp_path / "fragments"
    assert messages(path) == [f"{path}:3: include: shared: refused: {folder} is writable by every user (mode 0777)"]


def test_a_fragment_a_foreign_group_may_write_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule a site runbook is held to (engine/file_trust.py): a group that is neither root's nor the runner's."""
    path = write(tmp_path)
    shared = tmp_path / "fragments" / "shared.yaml"
    os.chmod(shared, 0o664)
    if os.getuid() == 0:
        os.chown(shared, -1, 12345)
        group = 12345
    else:  # the file keeps the runner's group: the runner is told it has another
        group = shared.stat().st_gid
        monkeypatch.setattr(os, "getgid", lambda: group + 1)
    assert messages(path) == [f"{path}:3: include: shared: refused: {shared} is writable by group {group} (mode 0664)"]
    os.chmod(shared, 0o644)  # the group may read it only: it supplies nodes
    assert load_runbook(path, known_collectors=KNOWN).file_of("bad") == str(shared)


def test_a_fragment_that_vanished_cannot_be_stat(tmp_path: Path) -> None:
    problem = includes.unsafe(tmp_path / "gone" / "x.yaml")
    assert problem == f"{tmp_path / 'gone'}: cannot stat (No such file or directory)"


def test_the_missing_fragment_message_lists_the_folders_searched(tmp_path: Path) -> None:
    path = write(tmp_path, runbook=RUNBOOK.replace("[shared]", "[absent]"))
    other = tmp_path / "other"
    with pytest.raises(RunbookInvalid) as info:
        load_runbook(path, known_collectors=KNOWN, fragment_dirs=(other,))
    [issue] = info.value.issues
    assert str(issue) == f"{path}:3: include: no fragment absent.yaml in {tmp_path / 'fragments'}, {other}"


def test_include_must_be_a_list(tmp_path: Path) -> None:
    path = write(tmp_path, runbook=RUNBOOK.replace("[shared]", "shared"))
    assert f"{path}:3: include: a list of fragment names" in messages(path)


def test_a_name_given_twice_is_refused_at_its_own_line(tmp_path: Path) -> None:
    path = write(tmp_path, runbook=RUNBOOK.replace("include: [shared]", "include:\n  - shared\n  - shared"))
    assert messages(path) == [f"{path}:5: include: shared is named twice"]


def test_a_bad_name_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, runbook=RUNBOOK.replace("[shared]", "[Shared]"))
    assert messages(path) == [f"{path}:3: include: 'Shared' is not a fragment name (a-z, 0-9, -)"]


def test_the_runbooks_nodes_must_come_last(tmp_path: Path) -> None:
    path = write(tmp_path, runbook=RUNBOOK.replace("include: [shared]\n", "") + "include: [shared]\n")
    assert f"{path}:4: nodes: must be the last key of a runbook that includes fragments" in messages(path)


def test_a_node_defined_twice_names_the_other_place(tmp_path: Path) -> None:
    fragment = FRAGMENT + "  good:\n    verdict: {id: g, severity: ok, action: none, summary: s}\n"
    path = write(tmp_path, fragment=fragment)
    shared = tmp_path / "fragments" / "shared.yaml"
    assert messages(path) == [f"{shared}:6: [node good] node 'good' of fragment shared is also defined at {path}:14"]


def test_a_runbook_without_includes_runs_as_written(tmp_path: Path) -> None:
    text = RUNBOOK.replace("include: [shared]\n", "")
    assert includes.as_ran(text, []) == text


def test_the_runbook_as_it_ran_comments_out_a_block_include(tmp_path: Path) -> None:
    runbook = RUNBOOK.replace("include: [shared]", "include:\n  # the shared verdict\n  - shared\n")
    loaded = load_runbook(write(tmp_path, runbook=runbook), known_collectors=KNOWN)
    lines = loaded.as_ran().splitlines()
    assert lines[2:7] == [
        "# include:  (the fragments' nodes are written after the runbook's own, below)",
        "#   # the shared verdict",
        "#   - shared",
        "",
        "entry: start",
    ]
    assert lines[-4:] == [
        "",
        "  # ---- fragment shared (fragments/shared.yaml), included ----",
        "  bad:",
        "    verdict: {id: xid-seen, severity: warning, action: escalate, summary: seen}",
    ]


def test_fragment_files_skips_a_folder_it_cannot_list(tmp_path: Path) -> None:
    path = write(tmp_path)
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    found = includes.fragment_files(path, fallback=(blocked,))
    assert found == {f"fragment:{tmp_path / 'fragments' / 'shared.yaml'}": tmp_path / "fragments" / "shared.yaml"}


def test_the_first_folder_holding_a_fragment_wins(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    for folder in (first, second):
        folder.mkdir()
        (folder / "x.yaml").write_text("")
    assert includes.fragment_path("x", [first, second]) == first / "x.yaml"
    assert includes.fragment_path("y", [first, second]) is None
    assert includes.search_dirs(tmp_path / "rb.yaml", [first, first]) == (tmp_path / "fragments", first)


def test_a_missing_fragment_in_a_block_list_names_its_own_line(tmp_path: Path) -> None:
    runbook = RUNBOOK.replace("include: [shared]", "include:\n  - shared\n  - absent")
    path = write(tmp_path, runbook=runbook)
    assert messages(path) == [f"{path}:5: include: no fragment absent.yaml in {tmp_path / 'fragments'}"]


def test_a_node_defined_twice_keeps_the_runbooks_own(tmp_path: Path) -> None:
    """merge (the engine's Python entry) reports the clash and leaves the runbook's node in place."""
    from nightowl.engine.yaml_lines import load_with_lines

    fragment = FRAGMENT + "  good:\n    verdict: {id: g, severity: ok, action: none, summary: s}\n"
    path = write(tmp_path, fragment=fragment)
    data, lines = load_with_lines(path.read_text(), unique_keys=True)
    fragments, node_files, problems = includes.merge(str(path), data, lines, path)
    assert [f.name for f in fragments] == ["shared"] and len(problems) == 1
    assert node_files == {"bad": str(tmp_path / "fragments" / "shared.yaml")}
    assert data["nodes"]["good"]["verdict"]["id"] == "healthy" and lines[("nodes", "good")] == 14


def test_a_wrong_fragment_name_is_refused_at_its_own_line(tmp_path: Path) -> None:
    fragment = "description: d\nfragment: other\nnodes:\n  bad:\n    verdict: {id: x, severity: ok, action: none}\n"
    shared = tmp_path / "fragments" / "shared.yaml"
    assert messages(write(tmp_path, fragment=fragment)) == [f"{shared}:2: fragment: must be 'shared', its file's name"]


def test_merge_leaves_a_runbook_without_includes_or_nodes_alone(tmp_path: Path) -> None:
    path = write(tmp_path)
    assert includes.merge(str(path), {"id": "rb"}, {}, path) == ([], {}, [])
    assert includes.merge(str(path), ["not", "a", "mapping"], {}, path) == ([], {}, [])
    assert includes.merge(str(path), {"include": ["shared"], "nodes": ["x"]}, {}, path) == ([], {}, [])


def test_the_runbook_as_it_ran_keeps_what_comes_before_the_include(tmp_path: Path) -> None:
    runbook = "# the xid runbook, site copy\n" + RUNBOOK
    loaded = load_runbook(write(tmp_path, runbook=runbook), known_collectors=KNOWN)
    text = loaded.as_ran()
    assert text.startswith("# the xid runbook, site copy\nid: rb\ntitle: t\n# include: [shared]")
    assert text.endswith("summary: seen}\n") and not text.endswith("\n\n")
