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
    help="a lock file the checks deciding at once share, e.g. on shared storage: serialises their decisions, "
    "with a compare-and-set record of them in FILE.record/",
)
DRY_RUN_OPTION = click.option("--dry-run", is_flag=True, help="say what would be done; change and log nothing")


# What each action result means for the exit status (docs/reference.md#scheduler-actions): done or already
# so; held by the breaker or a node's cap; failed or refused (the node was not changed as asked).
HELD = frozenset({"held", "would-hold"})
# Acted on, but unconfirmed (the breaker's confirming read failed) or unlogged: the caller must look (exit 5).
UNSURE = frozenset({"failed", "drained-unconfirmed", "set-unconfirmed"})


def action_status(done: list[dict[str, Any]], refused: frozenset[str] = frozenset()) -> int:
    """0 every requested action done or already in place; 4 some held and none failed; 5 any failed or refused,
    left unconfirmed, or not logged."""
    results = [entry["result"] for entry in done]
    if any(result in UNSURE or result in refused for result in results) or any(
        entry.get("logged") is False for entry in done
    ):
        return ACTIONS_FAILED
    if any(result in HELD for result in results):
        return ACTIONS_HELD
    return 0


ACTIONS_HELD, ACTIONS_FAILED = 4, 5
ACTIONS_EXIT_HELP = """\b
Exit status:
  0    every requested action done, or the node already so
  2    usage or input error (bad option or caps, an unreadable report, a
       report about another node without --report-for-other-node)
  4    some actions held by the circuit breaker or a node's cap, none failed
  5    some action failed (the scheduler's error is logged), was refused
       (a node someone else drained), or is unconfirmed (the breaker's
       confirming read failed after acting) or could not be logged"""


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


NODE_CAP_OPTIONS = (
    click.option(
        "--max-node-actions",
        type=click.IntRange(min=1),
        help="a node's cap: after N drains (or failed verifies) of one node for one fault family in the node window, "
        "the next drain is for a hardware ticket and an automatic resume is held (docs/reference.md#node-cap) "
        "[default: no cap]",
    ),
    click.option(
        "--node-actions-window",
        default="7d",
        show_default=True,
        help="the window --max-node-actions counts in, from the actions log (90m, 12h, 7d, 2w)",
    ),
)


def node_cap_options(command: Any) -> Any:
    """--max-node-actions and --node-actions-window (the node's cap, nightowl/fleet/node_caps.py)."""
    for option in reversed(NODE_CAP_OPTIONS):
        command = option(command)
    return command


def node_cap_or_exit(max_node_actions: int | None, window: str) -> Any:
    """The node's cap from the options (None without --max-node-actions; exit 2 when the window cannot be read)."""
    from nightowl.fleet.node_caps import NodeCap

    try:
        seconds = parse_age(window)
    except ValueError as exc:
        fail(f"--node-actions-window: {exc}")
    return NodeCap(max_node_actions, seconds) if max_node_actions is not None else None


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


REPORT_FOR_OTHER_NODE_OPTION = click.option(
    "--report-for-other-node",
    is_flag=True,
    help="apply a report whose node (its hosts, NODE_NAME, host name, or its bundle's hosts) is not NODE; "
    "recorded in actions.jsonl [default: refused, exit 2]",
)


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
@node_cap_options
@ACTIONS_LOG_OPTION
@LOCK_OPTION
@DRY_RUN_OPTION
@TEXT_JSON_OPTION
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
    max_node_actions: int | None,
    node_actions_window: str,
    actions_log: Path | None,
    lock: Path | None,
    dry_run: bool,
    fmt: str,
) -> None:
    """Drain NODES (in order) unless the circuit breaker is open; a held drain is logged as held, with why.

    The verdict comes from --verdict and --action, or from a check report (--report). A node drained by
    someone else is left with its reason. With --max-node-actions, a node already taken out that often for
    the verdict in the node window is drained for a hardware ticket instead (its reason says the count).
    Prints one line per node: what was done.
    """
    from nightowl.fleet import slurm_actions

    caps = caps_or_exit(max_drain, max_drain_percent, window)
    node_cap = node_cap_or_exit(max_node_actions, node_actions_window)
    log = actions_log or default_actions_log()
    note = None
    if report is not None:
        loaded = read_report(report.read())
        verdict, verdict_action, bundle = _from_report(loaded, verdict, verdict_action, bundle)
        note = check_node(loaded, nodes, "drain", log, dry_run, fmt, report_for_other_node)
    if not verdict or not verdict_action:
        fail("--verdict and --action (or a --report with a verdict) are required")
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
            note=note,
            node_cap=node_cap,
        )
        if entry["result"] == "would-drain":
            planned.append(node)
        return entry

    # a node drained by someone else is in the state asked for: done (its reason left as it is)
    print_actions(_each(nodes, act, "drain", log, dry_run), fmt)


def read_report(text: str) -> dict[str, Any] | None:
    """A check report as JSON (None when it is not an object: no verdict)."""
    try:
        report = json.loads(text or "null")
    except ValueError:
        return None
    return report if isinstance(report, dict) else None


def _from_report(
    report: dict[str, Any] | None, verdict: str | None, action: str | None, bundle: Path | None
) -> tuple[str | None, str | None, Path | None]:
    hosts = (report or {}).get("hosts") or [{}]
    found = (hosts[0] if isinstance(hosts, list) and isinstance(hosts[0], dict) else {}).get("verdict") or {}
    if not isinstance(found, dict) or not found.get("id"):
        fail("--report: no verdict in the report (nightowl check --format json of the node)")
    given = (report or {}).get("bundle")
    return (
        verdict or str(found["id"]),
        action or str(found.get("action") or ""),
        bundle or (Path(given) if isinstance(given, str) and given else None),
    )


def check_node(
    report: dict[str, Any] | None,
    nodes: tuple[str, ...],
    what: str,
    log: Path,
    dry_run: bool,
    fmt: str,
    for_other_node: bool,
) -> str | None:
    """A report belongs to its node: refuse (log each node refused, exit 2, naming both) a report that names
    another node than NODES, unless ``for_other_node``; then the note every line logged carries."""
    from nightowl.fleet.identity import other_node

    mismatched = {node: why for node in nodes if (why := other_node(report, node))}
    if not mismatched:
        return None
    if for_other_node:
        return "; ".join(f"{why}: applied with --report-for-other-node" for why in dict.fromkeys(mismatched.values()))
    refused = [
        record_failure(log, node, what, f"{why}: refused (--report-for-other-node applies it)", dry_run, "refused")
        for node, why in mismatched.items()
    ]
    print_actions(refused, fmt, status=2)


@slurm.command(epilog=ACTIONS_EXIT_HELP)
@click.argument("nodes", nargs=-1, required=True)
@node_cap_options
@ACTIONS_LOG_OPTION
@LOCK_OPTION
@DRY_RUN_OPTION
@TEXT_JSON_OPTION
def resume(
    nodes: tuple[str, ...],
    max_node_actions: int | None,
    node_actions_window: str,
    actions_log: Path | None,
    lock: Path | None,
    dry_run: bool,
    fmt: str,
) -> None:
    """Resume NODES that nightowl drained (their reason is exactly the one it wrote); others stay drained.

    With --max-node-actions (an automatic resume), a node drained for a hardware ticket by its cap, or
    counted over the cap, is held (exit 4); without it, a person's resume returns it.
    """
    from nightowl.fleet import slurm_actions

    log = actions_log or default_actions_log()
    cap = node_cap_or_exit(max_node_actions, node_actions_window)
    # a node someone else drained stays drained: a resume asked of it was refused
    resume_one = lambda s, n: slurm_actions.resume(s, n, log, dry_run=dry_run, lock=lock, node_cap=cap)  # noqa: E731
    print_actions(_each(nodes, resume_one, "resume", log, dry_run), fmt, refused=frozenset({"not-ours"}))


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


def default_actions_log() -> Path:
    from nightowl.fleet.actions_log import default_path

    return default_path()


def _each(nodes: tuple[str, ...], act: Any, what: str, log: Path, dry_run: bool) -> list[dict[str, Any]]:
    """Every node of the list, in order: a node the scheduler fails on is logged as failed (with its error)
    and the list goes on, so one bad node never leaves the rest undone."""
    import subprocess

    from nightowl.fleet.slurm_actions import Slurm, SlurmError

    slurm_client = Slurm()
    done = []
    for node in nodes:
        try:
            done.append(act(slurm_client, node))
        except (SlurmError, OSError, subprocess.TimeoutExpired) as exc:
            done.append(record_failure(log, node, what, str(exc), dry_run))
    return done


def record_failure(
    log: Path, node: str, what: str, error: str, dry_run: bool, result: str = "failed"
) -> dict[str, Any]:
    """A failed (or refused) attempt, as actions.jsonl keeps it (a dry run logs nothing). A log that cannot
    take the line (the very failure, e.g. a full disk) leaves it unlogged, said in the entry: nothing was done."""
    from nightowl.fleet import actions_log

    entry = {"node": node, "what": what, "why": error[:500], "result": result, "bundle": None, "bundle_sha256": None}
    if dry_run:
        return entry
    try:
        return actions_log.append(log, entry)
    except OSError as exc:
        return {**entry, "why": f"{entry['why']}; not logged ({exc})", "logged": False}


def print_actions(
    done: list[dict[str, Any]], fmt: str, refused: frozenset[str] = frozenset(), status: int | None = None
) -> NoReturn:
    """Print each node's outcome and exit with what happened (``action_status``, unless ``status``)."""
    import sys

    if fmt == "json":
        click.echo(json.dumps({"actions": done}, indent=2))
    else:
        for entry in done:
            click.echo(f"{entry['node']}: {entry['what']} {entry['result']}: {entry['why']}")
    sys.exit(action_status(done, refused) if status is None else status)
