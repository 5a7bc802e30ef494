"""What the commands that act on nodes share (`slurm drain|resume`, `k8s condition`, `verify --resume`): their
options, the caps read from them, and printing the per-node outcomes (nightowl/fleet/scheduler_actions.py)
with the exit status they add up to."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import click

from nightowl.cli.common import TEXT_JSON_OPTION, parse_age
from nightowl.cli.exit import fail

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
REPORT_FOR_OTHER_NODE_OPTION = click.option(
    "--report-for-other-node",
    is_flag=True,
    help="apply a report whose node (its hosts, NODE_NAME, host name, or its bundle's hosts) is not NODE; "
    "recorded in actions.jsonl [default: refused, exit 2]",
)

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


@dataclass(frozen=True)
class Acting:
    """How a command acts on nodes, from the options every such command takes (``acting_options``): the node's
    cap as given, the actions log, the lock the checks deciding at once share, a dry run, the output format."""

    max_node_actions: int | None
    node_actions_window: str
    actions_log: Path | None
    lock: Path | None
    dry_run: bool
    fmt: str

    def node_cap(self) -> Any:
        """The node's cap (``node_cap_or_exit``): read when the command asks, so its own checks keep their order."""
        return node_cap_or_exit(self.max_node_actions, self.node_actions_window)

    @property
    def log(self) -> Path:
        """--actions-log, else the default ($NIGHTOWL_ACTIONS_LOG, else actions.jsonl in the state dir)."""
        return self.actions_log or default_actions_log()


def acting_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The node's cap options, --actions-log, --lock, --dry-run and --format, handed to ``command`` as one
    ``acting`` (``Acting``), so the commands that act on nodes share one signature for them."""

    @functools.wraps(command)
    def with_acting(
        *args: Any,
        max_node_actions: int | None,
        node_actions_window: str,
        actions_log: Path | None,
        lock: Path | None,
        dry_run: bool,
        fmt: str,
        **kwargs: Any,
    ) -> Any:
        acting = Acting(max_node_actions, node_actions_window, actions_log, lock, dry_run, fmt)
        return command(*args, acting=acting, **kwargs)

    decorated: Callable[..., Any] = with_acting
    for option in reversed((*NODE_CAP_OPTIONS, ACTIONS_LOG_OPTION, LOCK_OPTION, DRY_RUN_OPTION, TEXT_JSON_OPTION)):
        decorated = option(decorated)
    return decorated


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


def default_actions_log() -> Path:
    from nightowl.fleet.actions_log import default_path

    return default_path()


def check_node_or_exit(
    report: dict[str, Any] | None, nodes: tuple[str, ...], what: str, acting: Acting, for_other_node: bool
) -> str | None:
    """A report belongs to its node (``scheduler_actions.check_node``): the refusals printed and exit 2, naming
    both nodes; else the note every line logged carries."""
    from nightowl.fleet.scheduler_actions import check_node

    note, refused = check_node(report, nodes, what, acting.log, acting.dry_run, for_other_node)
    if refused:
        print_actions(refused, acting.fmt, status=2)
    return note


def print_actions(
    done: list[dict[str, Any]], fmt: str, refused: frozenset[str] = frozenset(), status: int | None = None
) -> NoReturn:
    """Print each node's outcome and exit with what happened (``action_status``, unless ``status``)."""
    import sys

    from nightowl.fleet.scheduler_actions import action_status

    if fmt == "json":
        click.echo(json.dumps({"actions": done}, indent=2))
    else:
        for entry in done:
            click.echo(f"{entry['node']}: {entry['what']} {entry['result']}: {entry['why']}")
    sys.exit(action_status(done, refused) if status is None else status)
