"""Render the generated sections of docs/reference.md from the code itself.

``python -m nightowl.docgen`` rewrites what lies between ``<!-- BEGIN GENERATED: name -->`` and
``<!-- END GENERATED -->`` (``commands`` from the click tree, ``kinds`` from the collector
registry, ``exit-status`` from nightowl/cli/exit.py, ``actions`` from nightowl/knowledge/actions.csv,
``runbook-nodes`` from engine/model.py, ``contents`` from the page's own headings), in docs/reference.md
and README.md; ``--check`` only reports whether they are up to date (exit 1 when not), which is what
tests/test_docs.py runs. Everything outside the markers is written by hand.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import click

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "docs" / "reference.md"
# Every file with generated blocks; the README repeats the exit-status table, generated the same way.
FILES = (REFERENCE, ROOT / "README.md")
# How click writes a group's subcommand in usage: required (every release) and optional (8.4 on, for a group
# with invoke_without_command); see _usage.
SUBCOMMAND_REQUIRED, SUBCOMMAND_OPTIONAL = "COMMAND [ARGS]...", "[COMMAND] [ARGS]..."
BLOCK = re.compile(r"(<!-- BEGIN GENERATED: (?P<name>[a-z-]+) -->\n)(?P<body>.*?)(<!-- END GENERATED -->)", re.S)


def walk(command: click.Command, parent: click.Context | None = None) -> Iterator[click.Context]:
    """A context for every command of the tree, depth first, the group itself first."""
    ctx = click.Context(command, info_name=command.name if parent else "nightowl", parent=parent)
    yield ctx
    if isinstance(command, click.Group):
        for name in sorted(command.list_commands(ctx)):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                yield from walk(sub, ctx)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _help_markdown(text: str) -> str:
    """click help -> Markdown: ``\\b`` paragraphs (kept verbatim by click) become code blocks."""
    out = []
    for para in re.split(r"\n\s*\n", text.strip()):
        lines = para.splitlines()
        if lines and lines[0].strip() == "\b":
            out.append("```\n" + "\n".join(line.rstrip() for line in lines[1:]) + "\n```")
        else:
            out.append(" ".join(line.strip() for line in lines))
    return "\n\n".join(out)


def _type_name(param: click.Parameter) -> str:
    if isinstance(param, click.Option) and param.is_flag:
        return "flag"
    if isinstance(param.type, click.Choice):
        return " \\| ".join(f"`{c}`" for c in param.type.choices)
    return param.type.name.upper()


def _default(param: click.Parameter) -> str:
    value = param.default
    # click 8.2 marks "no default" with a sentinel object rather than None
    if value is None or value is False or value == () or callable(value) or "UNSET" in repr(value):
        return ""
    if isinstance(value, (list, tuple)):
        return ", ".join(f"`{v}`" for v in value)
    return f"`{value}`"


def _usage(ctx: click.Context) -> str:
    """The usage line's pieces after the command path, the same under every click of pyproject's range.

    click 8.4 writes the subcommand of a group that runs without one as optional (``[COMMAND] [ARGS]...``),
    earlier releases as ``COMMAND [ARGS]...``; the docs take the newer form, true of such a group whatever
    click is installed, so the generated docs do not change with the click a checkout resolved."""
    cmd = ctx.command
    pieces = cmd.collect_usage_pieces(ctx)
    if isinstance(cmd, click.Group) and cmd.invoke_without_command and not cmd.chain:
        pieces = [SUBCOMMAND_OPTIONAL if piece == SUBCOMMAND_REQUIRED else piece for piece in pieces]
    return " ".join(pieces)


def render_commands(root: click.Command) -> str:
    """One section per command: usage, help, and a table of its arguments and options."""
    parts = []
    for ctx in walk(root):
        cmd = ctx.command
        level = "###" if ctx.parent is None or ctx.parent.parent is None else "####"
        usage = _usage(ctx)
        parts.append(f"{level} `{ctx.command_path}`\n\n```\n{ctx.command_path} {usage}\n```\n")
        if cmd.help:
            parts.append(_help_markdown(cmd.help) + "\n")
        rows = []
        for param in cmd.get_params(ctx):
            if isinstance(param, click.Option):
                if param.hidden or "--help" in param.opts:  # every command takes --help
                    continue
                names = ", ".join(f"`{n}`" for n in (*param.opts, *param.secondary_opts))
                more = " (repeatable)" if param.multiple else ""
                rows.append(f"| {names} | {_type_name(param)}{more} | {_default(param)} | {_cell(param.help or '')} |")
            elif isinstance(param, click.Argument):
                name = f"`{param.human_readable_name}`" + ("" if param.required else " (optional)")
                rows.append(f"| {name} | argument | {_default(param)} | |")
        if rows:
            parts.append("| option | type | default | meaning |\n|---|---|---|---|\n" + "\n".join(rows) + "\n")
        if cmd.epilog:
            parts.append(_help_markdown(cmd.epilog) + "\n")
    return "\n".join(parts)


def declared_facts(collector: Any) -> list[tuple[str, str, str]]:
    """(name, type, meaning) rows a collector declares in ``facts_declared`` or ``produces``.

    Rows may be objects with ``name``/``type``/``meaning`` attributes, mappings with those keys,
    or tuples; a collector that declares nothing yields no rows.
    """
    declared: Iterable[Any] = getattr(collector, "facts_declared", None) or getattr(collector, "produces", None) or ()
    if isinstance(declared, dict):
        declared = [{"name": k, **(v if isinstance(v, dict) else {"meaning": v})} for k, v in declared.items()]
    rows = []
    for item in declared:
        if isinstance(item, (tuple, list)):
            item = dict(zip(("name", "type", "meaning"), item, strict=False))
        fields = item if isinstance(item, dict) else vars(item) if hasattr(item, "__dict__") else {}
        type_ = fields.get("type") or ""
        type_name = getattr(type_, "__name__", str(type_))
        rows.append((str(fields.get("name", "")), type_name, str(fields.get("meaning") or "")))
    return rows


def render_kinds() -> str:
    """The kinds table from the registry, then a facts table for each kind that declares its facts."""
    from nightowl.collectors import MODULES, get_collector

    rows, facts = [], []
    for kind in sorted(MODULES):
        collector = get_collector(kind)
        module = MODULES[kind].partition(":")[0].replace(".", "/") + ".py"
        inputs = getattr(collector, "inputs", None)
        if inputs:
            reads = "derived from " + ", ".join(f"`{i}`" for i in inputs)
        else:
            reads = "<br>".join(f"`{' '.join(argv)}`" for argv in collector.commands) or "(no command)"
        reads = reads.replace("|", "\\|")
        flags = "invasive" if collector.invasive else ""
        rows.append(f"| `{kind}` | {_cell(collector.description)} | {reads} | {flags} | `{module}` |")
        declared = declared_facts(collector)
        if declared:
            table = "\n".join(f"| `{n}` | {_cell(t)} | {_cell(m)} |" for n, t, m in declared)
            facts.append(f"#### `{kind}` facts\n\n| fact | type | meaning |\n|---|---|---|\n{table}\n")
    head = "| kind | what it reads | commands (tried in order) | | module |\n|---|---|---|---|---|\n"
    return head + "\n".join(rows) + "\n" + ("\n" + "\n".join(facts) if facts else "")


def render_exit_status() -> str:
    """The exit-status table from nightowl/cli/exit.py (the enum and its meanings), never by hand."""
    from nightowl.cli.exit import MEANINGS, ExitStatus

    rows = [f"| {int(status)} | {_cell(MEANINGS[status])} |" for status in ExitStatus]
    return "| code | meaning |\n|---|---|\n" + "\n".join(rows) + "\n"


def render_actions() -> str:
    """The verdict actions from nightowl/knowledge/actions.csv, least drastic first."""
    from nightowl.knowledge import actions

    rows = [
        f"| `{row.action}` | {row.rank} | {_cell(row.meaning)} | {_cell(row.who_acts)} | {_cell(row.business_impact)} |"
        for row in actions.rows()
    ]
    head = "| action | rank | the first step | who acts | what the business side should expect |\n" + "|---" * 5 + "|\n"
    return head + "\n".join(rows) + "\n"


def _type_text(annotation: Any) -> str:
    """A field's type in words: ``list[Branch] | None`` -> ``list of Branch, or null``."""
    import types
    import typing

    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        kinds = [_type_text(a) for a in args if a is not type(None)]
        return " or ".join(kinds) + (", or null" if type(None) in args else "")
    if origin is typing.Literal:
        return " | ".join(f"`{a}`" for a in args)
    if origin is list:
        return f"list of {_type_text(args[0])}"
    if origin is dict:
        return f"mapping of {_type_text(args[0])} to {_type_text(args[1])}"
    words = {str: "string", int: "integer", float: "number", bool: "boolean", typing.Any: "any"}
    return words.get(annotation, getattr(annotation, "__name__", str(annotation)))


def render_runbook_nodes() -> str:
    """Every key of a runbook, a parameter, a node, a branch and a verdict, from engine/model.py."""
    from nightowl.engine import model

    parts = []
    for title, cls in (
        ("runbook", model.Runbook),
        ("parameter", model.Parameter),
        ("node", model.Node),
        ("branch (`decide:` entry)", model.Branch),
        ("`verdict:`", model.VerdictSpec),
        ("`next:` (of a verdict)", model.NextSpec),
    ):
        rows = []
        for name, info in cls.model_fields.items():
            kind = "action (the table above)" if name == "action" and cls is model.VerdictSpec else None
            required = "yes" if info.is_required() else ""
            meaning = _cell(info.description or "")
            rows.append(f"| `{name}` | {_cell(kind or _type_text(info.annotation))} | {required} | {meaning} |")
        doc = _cell((cls.__doc__ or "").strip().split("\n\n")[0]).replace("``", "`")
        head = f"#### {title}\n\n{doc}\n\n| key | type | required | meaning |\n|---|---|---|---|\n"
        parts.append(head + "\n".join(rows) + "\n")
    return "\n".join(parts)


def render_contents(text: str) -> str:
    """A table of contents of ``text``'s ``##`` and ``###`` headings outside generated blocks, linked as
    GitHub anchors them (lower case, punctuation dropped, spaces as hyphens)."""
    lines = []
    in_code = in_block = False
    for line in text.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if line.startswith(("<!-- BEGIN GENERATED", "<!-- END GENERATED")):
            in_block = line.startswith("<!-- BEGIN")  # a generated block's own headings are not listed
        match = None if in_code or in_block else re.match(r"^(##|###) (.+)$", line)
        if match:
            title = match.group(2).strip()
            anchor = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
            indent = "  " if match.group(1) == "###" else ""
            lines.append(f"{indent}- [{title}](#{anchor})")
    return "\n".join(lines) + "\n"


def sections() -> dict[str, str]:
    from nightowl.cli.main import main

    return {
        "commands": render_commands(main),
        "kinds": render_kinds(),
        "exit-status": render_exit_status(),
        "actions": render_actions(),
        "runbook-nodes": render_runbook_nodes(),
    }


def regenerate(text: str, rendered: dict[str, str]) -> str:
    """``text`` with every generated block replaced; a block with no renderer is an error."""

    def fill(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in rendered:
            raise KeyError(f"no generator for the block {name!r}")
        return match.group(1) + "\n" + rendered[name].strip() + "\n\n" + match.group(4)

    return BLOCK.sub(fill, text)


def render_file(text: str, rendered: dict[str, str] | None = None) -> str:
    """``text`` with every generated block rendered afresh, the contents list last (it lists the rest)."""
    rendered = sections() if rendered is None else rendered
    fresh = regenerate(text, {**rendered, "contents": "-"})
    return regenerate(fresh, {**rendered, "contents": render_contents(fresh)})


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    rendered = sections()
    stale = []
    for file in FILES:
        current = file.read_text(encoding="utf-8")
        fresh = render_file(current, rendered)
        if fresh == current:
            continue
        stale.append(file.name)
        if "--check" not in args:
            file.write_text(fresh, encoding="utf-8")
    if "--check" in args and stale:
        print(f"{', '.join(stale)} out of date: run python -m nightowl.docgen", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
