"""Docs that cannot drift (issue 21 item 6): what the code knows is generated into the docs, and the
indexes name every part they stand for."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from nightowl import docgen
from nightowl.cli.exit import ExitStatus
from nightowl.engine import model
from nightowl.knowledge import actions

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "reference.md"
README = ROOT / "README.md"


def block(text: str, name: str) -> str:
    match = re.search(rf"<!-- BEGIN GENERATED: {name} -->\n(.*?)<!-- END GENERATED -->", text, re.S)
    assert match, f"no generated block {name!r}"
    return match.group(1)


def section(text: str, title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert match, title
    return match.group(1)


def test_the_readme_layout_names_every_top_level_part_of_the_repository() -> None:
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.decode()
    parts = {name.split("/", 1)[0]: "/" in name for name in tracked.split("\0") if name}
    layout = section(README.read_text(), "Layout")
    missing = [
        name for name, is_dir in sorted(parts.items()) if f"`{name}/" not in layout and f"`{name}`" not in layout
    ]
    assert not missing, f"README.md ## Layout does not name {missing}"


def test_the_docs_index_lists_every_document() -> None:
    index = (ROOT / "docs" / "README.md").read_text()
    files = sorted(p.name for p in (ROOT / "docs").iterdir() if p.is_file() and p.name != "README.md")
    assert files
    missing = [name for name in files if f"]({name})" not in index]
    assert not missing


def test_every_link_of_the_docs_index_exists() -> None:
    index = (ROOT / "docs" / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#]+)\)", index)
    assert targets and all((ROOT / "docs" / target).exists() for target in targets)


def test_the_contents_lists_every_section_and_links_to_it() -> None:
    text = REFERENCE.read_text()
    contents = block(text, "contents")
    headings = re.findall(r"^## (.+)$", re.sub(r"<!-- BEGIN GENERATED.*?END GENERATED -->", "", text, flags=re.S), re.M)
    assert len(headings) >= 8
    for heading in headings:
        assert f"- [{heading}](#" in contents, heading
    anchors = re.findall(r"\]\(#([^)]+)\)", contents)
    slugs = {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in re.findall(r"^#{2,3} (.+)$", text, re.M)}
    assert anchors and set(anchors) <= slugs


def test_the_contents_skips_code_and_generated_headings() -> None:
    text = "## A\n```\n## not a heading\n```\n<!-- BEGIN GENERATED: x -->\n### `cmd`\n<!-- END GENERATED -->\n### B c\n"
    assert docgen.render_contents(text) == "- [A](#a)\n  - [B c](#b-c)\n"


@pytest.mark.parametrize("path", [REFERENCE, README], ids=lambda p: p.name)
def test_the_exit_table_is_generated_from_the_enum(path: Path) -> None:
    table = block(path.read_text(), "exit-status")
    assert table.strip() == docgen.render_exit_status().strip()
    for status in ExitStatus:
        assert re.search(rf"^\| {int(status)} \|", table, re.M)
    assert "reserved" not in table


def test_the_actions_table_is_the_action_file() -> None:
    table = block(REFERENCE.read_text(), "actions")
    rows = re.findall(r"^\| `([a-z-]+)` \| (\d+) \|", table, re.M)
    assert rows == [(row.action, str(row.rank)) for row in actions.rows()]


@pytest.mark.parametrize(
    ("cls", "title"),
    [
        (model.Runbook, "#### runbook"),
        (model.Parameter, "#### parameter"),
        (model.Node, "#### node"),
        (model.Branch, "#### branch"),
        (model.VerdictSpec, "#### `verdict:`"),
        (model.NextSpec, "#### `next:`"),
    ],
)
def test_every_key_of_the_schema_is_described(cls: type[model.Strict], title: str) -> None:
    nodes = block(REFERENCE.read_text(), "runbook-nodes")
    assert title in nodes
    part = nodes[nodes.index(title) :].split("\n#### ", 1)[0]
    for name in cls.model_fields:
        row = rf"^\| `{name}` \| (?:\\\||[^|])+ \| (?:yes)? \| \S"  # a type cell may hold escaped pipes
        assert re.search(row, part, re.M), f"{title}: {name} undescribed"


def test_cannot_judge_next_and_gpus_are_described() -> None:
    nodes = block(REFERENCE.read_text(), "runbook-nodes")
    for key in ("cannot_judge", "next", "gpus"):
        assert f"| `{key}` |" in nodes


def test_the_xid_policy_example_names_only_known_actions() -> None:
    text = (ROOT / "docs" / "xid-policy.example.yaml").read_text()
    comment = " ".join(line.lstrip("# ") for line in text.splitlines() if line.startswith("#"))
    listed = re.search(r"Actions: ([a-z, -]+)\.", comment)
    assert listed
    named = [a.strip() for a in listed.group(1).split(",")]
    assert named and set(named) <= set(actions.names())
