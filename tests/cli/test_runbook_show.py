"""`nightowl runbook show` prints the runbook as it runs: an ``include:``d fragment's nodes written in."""

from __future__ import annotations

import re

from click.testing import CliRunner

from nightowl.cli.main import main
from nightowl.library import runbooks


def _node_ids(text: str) -> set[str]:
    return set(re.findall(r"^  ([a-z0-9-]+):$", text, re.MULTILINE))


def test_show_writes_in_the_nodes_of_the_fragments_a_runbook_includes() -> None:
    path = runbooks.resolve("xid")
    own = path.read_text()
    assert re.search(r"^include:", own, re.MULTILINE), "xid no longer includes a fragment: pick one that does"
    fragment = (runbooks.fragment_dirs()[0] / "xid-judgement.yaml").read_text()
    shown = CliRunner().invoke(main, ["runbook", "show", "xid"])
    assert shown.exit_code == 0, shown.output
    assert not re.search(r"^include:", shown.output, re.MULTILINE)  # not the bare include line
    fragment_nodes = _node_ids(fragment) - _node_ids(own)
    assert fragment_nodes and fragment_nodes <= _node_ids(shown.output)
    assert shown.output == runbooks.load("xid").as_ran()  # what a run walks and its bundle keeps


def test_show_prints_an_invalid_runbook_as_written(tmp_path) -> None:  # noqa: ANN001
    broken = tmp_path / "broken.yaml"
    broken.write_text("id: broken\nentry: nowhere\nnodes: {}\n")
    shown = CliRunner().invoke(main, ["runbook", "show", str(broken)])
    assert shown.exit_code == 0 and shown.stdout == broken.read_text(), shown.output
    # and says it is not the runbook as it runs (stderr): the help promises that, an invalid one cannot run
    assert "not valid, shown as written" in shown.output


def test_show_says_nothing_else_about_a_valid_runbook() -> None:
    shown = CliRunner().invoke(main, ["runbook", "show", "xid"])
    assert shown.exit_code == 0 and "shown as written" not in shown.output
