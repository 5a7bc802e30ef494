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
            alternatives = "  |or|  ".join(shlex.join(argv) for argv in step["commands"] or step["declared"])
            click.echo(f"  [{step['node']}] {step['collector']}: {alternatives}  (timeout {step['timeout']}s){note}")
    if graph:  # the commands come first: at 3 a.m. they are what the reader came for
        click.echo()
        click.echo(to_mermaid(loaded.runbook))
