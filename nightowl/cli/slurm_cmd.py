"""`nightowl slurm drain|resume`: scheduler actions behind the fleet circuit breaker (fleet/slurm_actions.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from nightowl.cli.common import TEXT_JSON_OPTION
from nightowl.cli.exit import EXIT_HELP, fail
from nightowl.cli.node_actions import (
    ACTIONS_EXIT_HELP,
    REPORT_FOR_OTHER_NODE_OPTION,
    Acting,
    acting_options,
    caps_options,
    caps_or_exit,
    check_node_or_exit,
    print_actions,
)


@click.group(epilog=EXIT_HELP)
def slurm() -> None:
    """Drain and resume Slurm nodes, opt-in, behind a fleet-wide circuit breaker.

    Drains carry the reason `nightowl: VERDICT (ACTION)`; the breaker counts the nodes Slurm shows
    drained with that prefix inside the window, so checks on different nodes respect one cap. Every
    action taken or held is appended to a hash-chained actions.jsonl.
    """


@slurm.command(epilog=ACTIONS_EXIT_HELP)
@click.argument("nodes", nargs=-1, required=True)
@click.option("--verdict", help="the verdict id that needs the node out of service [default: the report's]")
@click.option("--action", "verdict_action", help="the verdict's action (e.g. reboot-node) [default: the report's]")
@click.option("--bundle", type=click.Path(file_okay=False, path_type=Path), help="the evidence bundle behind it")
@click.option(
    "--report",
    type=click.File("r"),
    help="`nightowl check --format json` of the node (- for stdin): its verdict, action and bundle",
)
@REPORT_FOR_OTHER_NODE_OPTION
@caps_options("drained by nightowl")
@acting_options
def drain(
    nodes: tuple[str, ...],
    verdict: str | None,
    verdict_action: str | None,
    bundle: Path | None,
    report: Any,
    report_for_other_node: bool,
    max_drain: int | None,
    max_drain_percent: float | None,
    window: str,
    acting: Acting,
) -> None:
    """Drain NODES (in order) unless the circuit breaker is open; a held drain is logged as held, with why.

    The verdict comes from --verdict and --action, or from a check report (--report). A node drained by
    someone else is left with its reason. With --max-node-actions, a node already taken out that often for
    the verdict in the node window is drained for a hardware ticket instead (its reason says the count).
    Prints one line per node: what was done.
    """
    from nightowl.fleet.scheduler_actions import drain_nodes, read_report, verdict_from_report

    caps = caps_or_exit(max_drain, max_drain_percent, window)
    node_cap = acting.node_cap()
    note = None
    if report is not None:
        loaded = read_report(report.read())
        try:
            verdict, verdict_action, bundle = verdict_from_report(loaded, verdict, verdict_action, bundle)
        except ValueError as exc:
            fail(str(exc))
        note = check_node_or_exit(loaded, nodes, "drain", acting, report_for_other_node)
    if not verdict or not verdict_action:
        fail("--verdict and --action (or a --report with a verdict) are required")
    done = drain_nodes(
        nodes,
        verdict,
        verdict_action,
        caps,
        acting.log,
        bundle=bundle,
        dry_run=acting.dry_run,
        lock=acting.lock,
        note=note,
        node_cap=node_cap,
    )
    print_actions(done, acting.fmt)


@slurm.command(epilog=ACTIONS_EXIT_HELP)
@click.argument("nodes", nargs=-1, required=True)
@acting_options
def resume(nodes: tuple[str, ...], acting: Acting) -> None:
    """Resume NODES that nightowl drained (their reason is exactly the one it wrote); others stay drained.

    With --max-node-actions (an automatic resume), a node drained for a hardware ticket by its cap, or
    counted over the cap, is held (exit 4); without it, a person's resume returns it.
    """
    from nightowl.fleet.scheduler_actions import resume_nodes

    log, cap = acting.log, acting.node_cap()
    # a node someone else drained stays drained: a resume asked of it was refused
    done = resume_nodes(nodes, log, dry_run=acting.dry_run, lock=acting.lock, node_cap=cap)
    print_actions(done, acting.fmt, refused=frozenset({"not-ours"}))


@slurm.command(epilog=EXIT_HELP)
@TEXT_JSON_OPTION
def reasons(fmt: str) -> None:
    """Every node reason Slurm holds (`sinfo -R`): who set it, when, and whether it is nightowl's drain.

    Others' drains are facts nightowl never changes (`resume` leaves them); this lists them, so a
    person sees a maintenance drain next to nightowl's before acting.
    """
    import subprocess

    from nightowl.fleet.slurm_actions import Slurm, SlurmError

    try:
        facts = Slurm().reasons()
    except (SlurmError, OSError, subprocess.TimeoutExpired) as exc:
        fail(f"sinfo -R: {exc}")
    if fmt == "json":
        click.echo(json.dumps({"reasons": facts}, indent=2))
        return
    for fact in facts:
        whose = "nightowl" if fact["ours"] else (fact["user"] or "someone else")
        ticket = " [held for a hardware ticket by the node's cap]" if fact.get("node_cap") else ""
        click.echo(f"{fact['node']}: {fact['state']} since {fact['since'] or '?'} by {whose}: {fact['reason']}{ticket}")
