"""`runbook test` on a rehearsal file it cannot read: exit 2 with the file and line, never an internal error."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from nightowl.cli.main import main


def _test(rehearsals: Path) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["runbook", "test", "oom", "--rehearsals", str(rehearsals)])
    return result.exit_code, result.output


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("- name: x\n  host: [unclosed\n", ":3: not YAML: expected ',' or ']'"),
        ("- name: x\n\thost: y\n", ":2: not YAML"),
        ("name: x\nhost: y\n", "a rehearsal file is a list of cases"),
        ("- just a string\n", "a rehearsal file is a list of cases"),
    ],
    ids=["unclosed-flow", "tab-indent", "a-mapping", "a-string-case"],
)
def test_a_rehearsal_file_that_cannot_be_read_is_an_input_error(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "oom.yaml"
    path.write_text(text)
    code, output = _test(path)
    assert code == 2, output
    assert f"{path}" in output and says in output
    assert "internal error" not in output


def test_an_unreadable_file_is_an_input_error_too(tmp_path: Path) -> None:
    path = tmp_path / "oom.yaml"
    path.write_bytes(b"- name: \xff\xfe\n")
    code, output = _test(path)
    assert code == 2 and "cannot read it" in output, output


def test_an_empty_list_is_no_rehearsal_as_before(tmp_path: Path) -> None:
    path = tmp_path / "oom.yaml"
    path.write_text("[]\n")
    code, output = _test(path)
    assert code == 2 and "no rehearsals for oom" in output  # an empty list is no rehearsal, as before
