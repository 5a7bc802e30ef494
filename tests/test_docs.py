"""The docs and --help point only at what a user has: the repository and public sources.

Every citation names a section of docs/ (reference.md, sources.md) or a public primary source, never a
document kept outside the repository or a path on a build machine.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from nightowl.cli.main import main

ROOT = Path(__file__).resolve().parent.parent
# Where a reader looks: the package, the docs, the runbooks and everything shipped beside them.
CHECKED = ("nightowl", "docs", "runbooks", "templates", "deploy", "scripts", "bench", "README.md")
# Documents users do not have, and machine paths.
FORBIDDEN = ("CONTRACT", "../shared", "/work/", "decision-trees.md", "peers-gpu-health", "peers-runbook-engines")
# Being rewritten into data files with their public sources (issue 11 item 5); drop each entry when it lands.
PENDING = frozenset(
    {
        "nightowl/collectors/gpu/xid_catalog.py",
        "nightowl/collectors/gpu/sku_profiles.py",
        "nightowl/collectors/serving/metrics.py",
        "nightowl/collectors/serving/engine_log.py",
    }
)


def tracked_files() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "-z", "--", *CHECKED], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    return [name for name in out.split("\0") if name]


def forbidden_in(text: str) -> list[str]:
    return [word for word in FORBIDDEN if word in text]


def test_forbidden_words_are_detected() -> None:
    assert forbidden_in("see CONTRACT s4") == ["CONTRACT"]
    assert forbidden_in("(/work/shared/domain/decision-trees.md 5.4)") == ["/work/", "decision-trees.md"]
    assert forbidden_in("docs/reference.md#verdicts, docs/sources.md#xid") == []


def test_no_citation_of_a_document_users_do_not_have() -> None:
    files = tracked_files()
    assert "README.md" in files and any(f.startswith("nightowl/") for f in files)
    hits = []
    for name in files:
        if name in PENDING:
            continue
        try:
            text = (ROOT / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        for lineno, line in enumerate(text.splitlines(), 1):
            hits += [f"{name}:{lineno}: {word}" for word in forbidden_in(line)]
    assert not hits, "\n".join(hits)


def walk(command: click.Command, parent: click.Context | None = None) -> Iterator[click.Context]:
    """A context for every command of the tree, depth first (the group itself included)."""
    ctx = click.Context(command, info_name=command.name if parent else "nightowl", parent=parent)
    yield ctx
    if isinstance(command, click.Group):
        for name in sorted(command.list_commands(ctx)):
            sub = command.get_command(ctx, name)
            assert sub is not None
            yield from walk(sub, ctx)


ALL_HELP = [(ctx.command_path, ctx.get_help()) for ctx in walk(main)]


def test_the_walk_covers_nested_commands() -> None:
    paths = {path for path, _ in ALL_HELP}
    assert {"nightowl", "nightowl triage", "nightowl runbook validate", "nightowl bench compare"} <= paths


@pytest.mark.parametrize(("path", "text"), ALL_HELP, ids=[path for path, _ in ALL_HELP])
def test_help_cites_no_document_users_do_not_have(path: str, text: str) -> None:
    assert not forbidden_in(text), f"{path} --help: {forbidden_in(text)}"
