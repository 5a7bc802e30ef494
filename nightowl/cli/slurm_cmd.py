"""`nightowl slurm drain|resume`: scheduler actions behind the fleet circuit breaker (fleet/slurm_actions.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NoReturn

import click

from nightowl.cli.bundles_cmd import parse_age
from nightowl.cli.common import TEXT_JSON_OPTION
from nightowl.cli.exit import EXIT_HELP, fail

ACTIONS_LOG_OPTION = click.option(
    "--actions-log",
    type=click.Path(dir_okay=False, path_type=Path),
    help="the hash-chained log of actions taken and held [default: $NIGHTOWL_ACTIONS_LOG, else actions.jsonl in "
    "the state dir]",
)
LOCK_OPTION = click.option(
    "--lock",
    type=click.Path(dir_okay=False, path_type=Path),
    help="a lock file the checks deciding at once share (one node: serialises them)",
)
DRY_RUN_OPTION = click.option("--dry-run", is_flag=True, help="say what would be done; change and log nothing")


# What each action result means for the exit status (docs/reference.md#scheduler-actions): done or already
# so; held by the breaker or a node's cap; failed or refused (the node was not changed as asked).
HELD = frozenset({"held", "would-hold"})


def action_status(done: list[dict[str, Any]], refused: frozenset[str] = frozenset()) -> int:
    """0 every requested action done or already in place; 4 some held and none failed; 5 any failed or refused."""
    results = [entry["result"] for entry in done]
    if any(result == "failed" or result in refused for result in results):
        return ACTIONS_FAILED
    if any(result in HELD for result in results):
        return ACTIONS_HELD
    return 0


ACTIONS_HELD, ACTIONS_FAILED = 4, 5
ACTIONS_EXIT_HELP = """\b
Exit status:
  0    every requested action done, or the node already so
  2    usage or input error (bad option or caps)
  4    some actions held by the circuit breaker or a node's cap, none failed
  5    some action failed (the scheduler's error is logged) or was refused
       (a node someone else drained, a report about another node)"""


def caps_options(what: str) -> Any:
    """The circuit breaker's --max-drain, --max-drain-percent and --window; ``what``: the action capped."""

    def decorate(command: Any) -> Any:
        for option in reversed(
            (
                click.option("--max-drain", type=click.IntRange(min=0), help=f"at most N nodes {what} per window"),
                click.option(
                    "--max-drain-percent",
                    type=click.FloatRange(0, 100),
                    help="at most P percent of the cluster's nodes per window",
                ),
                click.option(
                    "--window", default="1h", show_default=True, help="the window the caps count in (90s, 30m, 1h, 1d)"
                ),
            )
        ):
            command = option(command)
        return command

    return decorate


def caps_or_exit(max_drain: int | None, max_drain_percent: float | None, window: str) -> Any:
    """The breaker's caps from the options (exit 2 naming --window when it cannot be read)."""
    from nightowl.fleet.breaker import Caps

    try:
        return Caps(max_drain, max_drain_percent, parse_age(window))
    except ValueError as exc:
        fail(f"--window: {exc}")


@click.group(epilog=EXIT_HELP)
def slurm() -> None:
    """Drain and resume Slurm nodes, opt-in, behind a fleet-wide circuit breaker.

    Drains carry the reason `nightowl: VERDICT (ACTION)`; the breaker counts the nodes Slurm shows
    drained with that prefix inside the window, so checks on different nodes respect one cap. Every
    action taken or held is appended to a hash-chained actions.jsonl.
    """


@slurm.command(epilog=ACTIONS_EXIT_HELP)
@click.argument("nodes", nargs=-1, required=True)
@click.option("--verdict", required=True, help="the verdict id that needs the node out of service")
@click.option("--action", "verdict_action", required=True, help="the verdict's action (e.g. reboot-node)")
@click.option("--bundle", type=click.Path(file_okay=False, path_type=Path), help="the evidence bundle behind it")
@caps_options("drained by nightowl")
@ACTIONS_LOG_OPTION
@LOCK_OPTION
@DRY_RUN_OPTION
@TEXT_JSON_OPTION
def drain(
    nodes: tuple[str, ...],
    verdict: str,
    verdict_action: str,
    bundle: Path | None,
    max_drain: int | None,
    max_drain_percent: float | None,
    window: str,
    actions_log: Path | None,
    lock: Path | None,
    dry_run: bool,
    fmt: str,
) -> None:
    """Drain NODES (in order) unless the circuit breaker is open; a held drain is logged as held, with why.

    A node drained by someone else is left with its reason. Prints one line per node: what was done.
    """
    from nightowl.fleet import slurm_actions

    caps = caps_or_exit(max_drain, max_drain_percent, window)
    log = actions_log or default_actions_log()
    planned: list[str] = []  # a dry run counts the drains it would already have made

    def act(client: Any, node: str) -> dict[str, Any]:
        entry = slurm_actions.drain(
            client,
            node,
            verdict,
            verdict_action,
            caps,
            log,
            bundle=bundle,
            dry_run=dry_run,
            lock=lock,
            planned=tuple(planned),
        )
        if entry["result"] == "would-drain":
            planned.append(node)
        return entry

    # a node drained by someone else is in the state asked for: done (its reason left as it is)
    print_actions(_each(nodes, act, "drain", log, dry_run), fmt)


@slurm.command(epilog=ACTIONS_EXIT_HELP)
@click.argument("nodes", nargs=-1, required=True)
@ACTIONS_LOG_OPTION
@LOCK_OPTION
@DRY_RUN_OPTION
@TEXT_JSON_OPTION
def resume(nodes: tuple[str, ...], actions_log: Path | None, lock: Path | None, dry_run: bool, fmt: str) -> None:
    """Resume NODES that nightowl drained (their reason is exactly the one it wrote); others stay drained."""
    from nightowl.fleet import slurm_actions

    log = actions_log or default_actions_log()
    # a node someone else drained stays drained: a resume asked of it was refused
    resume_one = lambda s, n: slurm_actions.resume(s, n, log, dry_run=dry_run, lock=lock)  # noqa: E731
    print_actions(_each(nodes, resume_one, "resume", log, dry_run), fmt, refused=frozenset({"not-ours"}))


@slurm.command(epilog=EXIT_HELP)
@TEXT_JSON_OPTION
def reasons(fmt: str) -> None:
    """Every node reason Slurm holds (`sinfo -R`): who set it, when, and whether it is nightowl's drain.

    Others' drains are facts nightowl never changes (`resume` leaves them); this lists them, so a
    person sees a maintenance drain next to nightowl's before acting.
    """
    from nightowl.fleet.slurm_actions import Slurm, SlurmError

    try:
        facts = Slurm().reasons()
    except (SlurmError, OSError, TimeoutError) as exc:
        fail(f"sinfo -R: {exc}")
    if fmt == "json":
        click.echo(json.dumps({"reasons": facts}, indent=2))
        return
    for fact in facts:
        whose = "nightowl" if fact["ours"] else (fact["user"] or "someone else")
        click.echo(f"{fact['node']}: {fact['state']} since {fact['since'] or '?'} by {whose}: {fact['reason']}")


def default_actions_log() -> Path:
    from nightowl.fleet.actions_log import default_path

    return default_path()


def _each(nodes: tuple[str, ...], act: Any, what: str, log: Path, dry_run: bool) -> list[dict[str, Any]]:
    """Every node of the list, in order: a node the scheduler fails on is logged as failed (with its error)
    and the list goes on, so one bad node never leaves the rest undone."""
    from nightowl.fleet.slurm_actions import Slurm, SlurmError

    slurm_client = Slurm()
    done = []
    for node in nodes:
        try:
            done.append(act(slurm_client, node))
        except (SlurmError, OSError, TimeoutError) as exc:
            done.append(record_failure(log, node, what, str(exc), dry_run))
    return done


def record_failure(log: Path, node: str, what: str, error: str, dry_run: bool) -> dict[str, Any]:
    """A failed attempt, as actions.jsonl keeps it (a dry run logs nothing)."""
    from nightowl.fleet import actions_log

    entry = {"node": node, "what": what, "why": error[:500], "result": "failed", "bundle": None, "bundle_sha256": None}
    return entry if dry_run else actions_log.append(log, entry)


def print_actions(done: list[dict[str, Any]], fmt: str, refused: frozenset[str] = frozenset()) -> NoReturn:
    """Print each node's outcome and exit with what happened (``action_status``)."""
    import sys

    if fmt == "json":
        click.echo(json.dumps({"actions": done}, indent=2))
    else:
        for entry in done:
            click.echo(f"{entry['node']}: {entry['what']} {entry['result']}: {entry['why']}")
    sys.exit(action_status(done, refused))
