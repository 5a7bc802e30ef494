"""`nightowl parse KIND FILE`: any saved output to JSON."""

from __future__ import annotations

import json
from typing import Any

import click

from nightowl.cli.common import fail

# The contract's own kinds (docs/reference.md#kinds, contract section 3); every other registered kind is
# listed after them, from the registry, so a new collector kind is never missing from --help.
CORE_KINDS = ("nvidia-smi", "kernel-log", "nccl-log", "nccl-tests", "metrics", "engine-log")
HELP = """Parse a saved command output (FILE, or - for stdin) and print JSON.

\b
{kinds}

The facts each kind gives runbook conditions (name, type, meaning) are listed in
docs/reference.md#kinds; `nightowl runbook validate` rejects any other.

The answer also holds "normalised" (what was unwrapped first: indentation,
prompts, launcher prefixes, HTML entities ...) and "coverage" (lines with
text, lines recognised, understood, the first unread lines). An output with
text nightowl recognised nothing in is understood: false, which a run
calls "cannot judge" (docs/reference.md#unreadable).
"""


def kinds_help() -> str:
    """The help text, with the kinds the collector registry holds (read only when help is shown)."""
    import textwrap

    from nightowl.collectors import available_kinds

    others = ", ".join(kind for kind in available_kinds() if kind not in CORE_KINDS)
    kinds = (
        f"KIND is a collector kind (docs/reference.md#kinds): {', '.join(CORE_KINDS)}. Also: {others}. "
        'A kind whose commands column there says "derived from" is collected by runbooks from other '
        "collectors' facts and reads no file."
    )
    return HELP.format(kinds=textwrap.fill(kinds, width=78, break_on_hyphens=False, break_long_words=False))


class KindsCommand(click.Command):
    """A command whose help lists the registered kinds, read from the registry only when the help is."""

    @property  # type: ignore[override]
    def help(self) -> str:
        return kinds_help()

    @help.setter
    def help(self, value: str | None) -> None:
        pass  # click stores the docstring here; the text comes from kinds_help()


@click.command(
    "parse", cls=KindsCommand, short_help="Parse a saved command output (FILE, or - for stdin) and print JSON."
)
@click.argument("kind", metavar="KIND")
@click.argument("file", type=click.File("r", errors="replace"))
def parse_cmd(kind: str, file: Any) -> None:
    from nightowl.collectors import UnknownCollector, available_kinds, get_collector
    from nightowl.collectors.base import parse_document

    try:
        collector = get_collector(kind)
    except (UnknownCollector, ModuleNotFoundError):
        fail(f"unknown kind {kind!r}; one of: {', '.join(available_kinds())}")
    result = parse_document(collector, file.read())
    click.echo(json.dumps(result, indent=2, default=str))
