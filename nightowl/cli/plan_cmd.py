"""`nightowl plan`: a dry run listing every command a runbook would run."""

from __future__ import annotations

import json
import shlex

import click

from nightowl.cli.common import (
    INVASIVE_OPTION,
    PARAM_OPTION,
    TEXT_JSON_OPTION,
    fail,
    load_runbook_or_exit,
    parse_params,
)

LONG = 160  # a command longer than this is shown as its script, one statement a line (issue 45 item 9)
SCRIPT_FLAGS = ("-c", "-lc")  # sh -c SCRIPT, bash -lc SCRIPT


def command_lines(argv: list[str]) -> list[str]:
    """One command of a plan for a person to read: ``shlex.join(argv)`` when it fits on a line; else the
    command with its script named ``SCRIPT``, then the script one ``; ``-separated statement a line (joined
    back with ``; `` it is the script exactly; ``--format json`` has the argv as run)."""
    whole = shlex.join(argv)
    at = next((i + 1 for i, arg in enumerate(argv[:-1]) if arg in SCRIPT_FLAGS), None)
    if len(whole) <= LONG or at is None:
        return [whole]
    script = argv[at]
    shown = " ".join([shlex.join(argv[:at]), '"$SCRIPT"', shlex.join(argv[at + 1 :])]).rstrip()
    head = f"SCRIPT ({len(script)} characters; one statement a line, joined by '; ' it is the argument as run):"
    return [shown, head, *(f"  {part}" for part in script.split("; "))]


@click.command()
@click.argument("runbook")
@click.option("--host", "hosts", multiple=True, required=True, metavar="SPEC", help="host spec(s)")
@INVASIVE_OPTION
@PARAM_OPTION
@TEXT_JSON_OPTION
@click.option("--graph", is_flag=True, help="also print the runbook's graph (Mermaid), after the commands")
def plan(
    runbook: str, hosts: tuple[str, ...], allow_invasive: bool, params: tuple[str, ...], fmt: str, graph: bool
) -> None:
    """Dry run: per host the exact commands RUNBOOK would run, and its graph with --graph. Connects to
    nothing."""
    from nightowl.collectors import get_collector
    from nightowl.engine.mermaid import to_mermaid
    from nightowl.engine.session import plan as plan_steps

    loaded = load_runbook_or_exit(runbook)
    try:
        steps = plan_steps(loaded, get_collector, allow_invasive, parse_params(params))
    except ValueError as exc:  # an undeclared --param
        fail(str(exc))
    if fmt == "json":
        click.echo(json.dumps({"runbook": loaded.id, "hosts": [{"host": h, "steps": steps} for h in hosts]}, indent=2))
        return
    for host in hosts:
        click.echo(f"{host}:")
        for step in steps:
            note = ""
            if step["skipped"]:
                note = (
                    " (skipped: invasive, needs --allow-invasive)"
                    if step["invasive"]
                    else " (skipped: unset parameter)"
                )
            if step["derived_from"]:
                click.echo(
                    f"  [{step['node']}] {step['collector']}: runs no command; derived from "
                    + ", ".join(step["derived_from"])
                )
                continue
            commands = list(dict.fromkeys(tuple(argv) for argv in step["commands"] or step["declared"]))
            lines = [
                ("or: " if n and not i else "") + line
                for n, argv in enumerate(commands)
                for i, line in enumerate(command_lines(list(argv)))
            ]
            if len(lines) == 1 and len(lines[0]) <= LONG:  # one short command: one line, as before
                click.echo(f"  [{step['node']}] {step['collector']}: {lines[0]}  (timeout {step['timeout']}s){note}")
                continue
            click.echo(f"  [{step['node']}] {step['collector']}: (timeout {step['timeout']}s){note}")
            for line in lines:
                click.echo(f"      {line}")
    if graph:  # the commands come first: at 3 a.m. they are what the reader came for
        click.echo()
        click.echo(to_mermaid(loaded.runbook))
