"""What every command shares, declared once: the output, parameter, invasive, SSH and deadline options,
the default bundle folder, and loading a runbook or ``--param`` values with a usage error on failure."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from nightowl.cli.exit import fail
from nightowl.logline import LOG_FORMATS

if TYPE_CHECKING:
    from nightowl.engine.context import RunContext
    from nightowl.library.runbooks import RunbookLibrary


@dataclass
class CommandChoices:
    """What the group's and the command's options chose, held in click's context object (``ctx.obj`` of the
    outermost context) for the command to hand down, never in a module global: ``--runbook-path``'s
    folders, the history store (``--history``; None: off or not asked) and ``--history-from``'s URL."""

    runbook_dirs: tuple[Path, ...] = ()
    history: Path | None = None
    history_chosen: bool = False  # by the group (`nightowl history --history X import`): its subcommand keeps it
    prometheus: str | None = None


def choices(ctx: click.Context | None = None) -> CommandChoices:
    """This command's choices (defaults outside a command: a Python caller chose nothing)."""
    ctx = ctx or click.get_current_context(silent=True)
    if ctx is None:
        return CommandChoices()
    return ctx.find_root().ensure_object(CommandChoices)


def runbook_library() -> RunbookLibrary:
    """The runbooks this command reaches (``--runbook-path`` first), to resolve names and hand down."""
    from nightowl.library.runbooks import RunbookLibrary

    return RunbookLibrary(choices().runbook_dirs)


def history_path() -> Path | None:
    """The history store this command chose (None: off, or a command without ``--history``)."""
    return choices().history


def run_context() -> RunContext:
    """The context this command's runs get: its history store and the readers of it (nightowl.history)."""
    from nightowl import history

    chosen = choices()
    return history.run_context(chosen.history, chosen.prometheus)


@dataclass(frozen=True)
class SSHArgs:
    known_hosts: Path | None
    ssh_config: Path | None
    accept_new: bool
    identities: tuple[Path, ...]
    connect_timeout: float

    def options(self) -> Any:
        from nightowl.transports.ssh import SSHOptions

        return SSHOptions(
            known_hosts=self.known_hosts,
            ssh_config=self.ssh_config,
            host_key_policy="accept-new" if self.accept_new else "strict",
            identity_files=self.identities,
            connect_timeout=self.connect_timeout,
            banner_timeout=self.connect_timeout,
            auth_timeout=self.connect_timeout,
        )


def ssh_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Adds the SSH options and hands the command one ``ssh: SSHArgs``."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["ssh"] = SSHArgs(
            kwargs.pop("known_hosts"),
            kwargs.pop("ssh_config"),
            kwargs.pop("accept_new"),
            tuple(kwargs.pop("identities")),
            kwargs.pop("connect_timeout"),
        )
        return command(*args, **kwargs)

    decorators = [
        click.option(
            "--known-hosts",
            type=click.Path(dir_okay=False, path_type=Path),
            help="known_hosts to check host keys against (default ~/.ssh/known_hosts)",
        ),
        click.option(
            "--ssh-config",
            type=click.Path(dir_okay=False, path_type=Path),
            help="ssh_config that resolves host names (default ~/.ssh/config)",
        ),
        click.option(
            "--accept-new", is_flag=True, help="accept and record unknown host keys (a changed key is always refused)"
        ),
        click.option(
            "--identity",
            "identities",
            multiple=True,
            type=click.Path(dir_okay=False, path_type=Path),
            help="private key file (as ssh -i); agent and ~/.ssh keys are tried too",
        ),
        click.option(
            "--connect-timeout",
            type=float,
            default=10.0,
            show_default=True,
            help="seconds for TCP connect, SSH banner and authentication each",
        ),
    ]
    for decorate in reversed(decorators):
        wrapper = decorate(wrapper)
    return wrapper


def limit_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--command-timeout and --host-timeout: a run never waits longer than the user allows. The command gets
    both as one ``limits: {"command_timeout": seconds or None, "host_timeout": seconds or None}``."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["limits"] = {key: kwargs.pop(key) for key in ("command_timeout", "host_timeout")}
        return command(*args, **kwargs)

    wrapper = click.option(
        "--command-timeout", type=float, default=None, help="cap on every command's own deadline, seconds"
    )(wrapper)
    return click.option(
        "--host-timeout",
        type=float,
        default=None,
        help="deadline for one host's whole run, seconds; later collectors are skipped",
    )(wrapper)


Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]
# The default folder as users read it (paths.default_out_dir() is resolved only when a command runs).
DEFAULT_OUT_HELP = "$NIGHTOWL_OUT, else ~/.local/state/nightowl/bundles"


def format_option(*choices: str, default: str | None = None, help: str | None = None) -> Decorator:
    """``--format`` (parameter ``fmt``) with these choices; the first is the default unless told."""
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(list(choices)),
        default=default or choices[0],
        show_default=True,
        help=help,
    )


def out_option(help: str) -> Decorator:
    """``--out`` (parameter ``out_dir``), a folder, ``None`` unless given: each command says what it defaults to."""
    return click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None, help=help)


def number_option(
    name: str, kind: click.ParamType | type[float], default: float | None, help: str | None = None
) -> Decorator:
    """A number option of ``kind`` (``click.IntRange``, ``click.FloatRange``, ``float``); its default, when it has
    one, shown in ``--help``."""
    return click.option(name, type=kind, default=default, show_default=True, help=help)


def config_file_option(help: str) -> Decorator:
    """``--config`` (parameter ``config_path``): an existing file the command cannot run without."""
    return click.option(
        "--config",
        "config_path",
        required=True,
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        help=help,
    )


# A run's JSON (triage, demo) is the one docs/reference.md#run-json describes; other commands print their own.
FORMAT_OPTION = format_option("text", "json", help="text for people, json for scripts (docs/reference.md#run-json)")
TEXT_JSON_OPTION = format_option("text", "json", help="text for people, json for scripts")
OUT_OPTION = out_option(f"where bundles go [default: {DEFAULT_OUT_HELP}; with --alert, the rules file's `out`]")
VERBOSE_OPTION = click.option(
    "-v", "--verbose", is_flag=True, help="also the path, every condition taken and every fact with its source"
)
PARAM_OPTION = click.option(
    "--param",
    "params",
    multiple=True,
    metavar="KEY=VALUE",
    help="runbook parameter (text, converted to the type the runbook declares)",
)
LOG_FORMAT_OPTION = click.option(
    "--log-format",
    type=click.Choice(LOG_FORMATS),
    default="auto",
    show_default=True,
    help="stderr log lines: JSON lines (level, node, runbook, verdict) or text; auto: text on a terminal",
)


def stderr_logger(choice: str, logger: str) -> Callable[[str], None]:
    """Log lines to stderr in the chosen format (nightowl/logline.py)."""
    import sys

    from nightowl.logline import render, resolve_format

    fmt = resolve_format(choice, sys.stderr)
    return lambda line: click.echo(render(line, fmt, logger), err=True)


INVASIVE_OPTION = click.option(
    "--allow-invasive", is_flag=True, help="also run collectors that load GPUs or the network"
)


def load_runbook_or_exit(name: str) -> Any:
    from nightowl.engine.validate import RunbookInvalid

    try:
        return runbook_library().load(name)
    except FileNotFoundError as exc:
        fail(str(exc))
    except RunbookInvalid as exc:
        fail(f"invalid runbook:\n{exc}")
    return None


def parse_age(text: str) -> float:
    """An age option's value (``--prune``, ``--window``): ``90m``, ``12h``, ``30d``, ``2w`` -> seconds; the unit
    is required (nightowl.ages reads a bare number as seconds, which an option never means)."""
    from nightowl.ages import parse_age as seconds_of

    seconds = seconds_of(text)
    if seconds is None or not text.strip()[-1:].isalpha():
        raise ValueError(f"age {text!r}: expected a number and a unit s, m, h, d or w (e.g. 30d)")
    return seconds


def parse_params(pairs: tuple[str, ...]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs as strings: the runbook's declared types convert them (``since=10:00`` stays
    "10:00", ``container=0755`` stays "0755"); ``KEY=null`` or ``KEY=`` means no value."""
    params: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            fail(f"--param expects KEY=VALUE, got {pair!r}")
        params[key] = None if value.strip() in ("", "null", "~") else value
    return params


def _activate_history(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    from nightowl import history

    chosen = choices(ctx)
    if value is None and chosen.history_chosen:  # given to the group: the subcommand keeps it
        return chosen.history
    chosen.history, chosen.history_chosen = history.resolve(value), True
    return chosen.history


# Every command that runs runbooks records into (and reads) the history store; the callback turns it on,
# so the command's own function takes no parameter for it.
HISTORY_OPTION = click.option(
    "--history",
    "history_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    expose_value=False,
    callback=_activate_history,
    help="the history store (SQLite) runs record into and read from; `off` for none "
    "[default: $NIGHTOWL_HISTORY, else ~/.local/state/nightowl/history.sqlite3]",
)


def _history_from(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None and not value.startswith(("http://", "https://")):
        raise click.BadParameter("needs an http:// or https:// URL of Prometheus", ctx, param)
    choices(ctx).prometheus = value or None
    return value


# Per-node checks with no shared disk: the node's earlier incidents as Prometheus kept them.
HISTORY_FROM_OPTION = click.option(
    "--history-from",
    "history_from",
    metavar="URL",
    default=None,
    expose_value=False,
    callback=_history_from,
    help="also read this node's incidents before this boot from Prometheus at URL "
    "(nightowl_gpu_incidents_total, the last 30 days; docs/reference.md#history)",
)


# What `sweep`, `check` and `watch` share: the runbook they run, its kernel-log window, the textfile, the bundle
# folder and whole or incremental reads (the sweep's --format is cli/sweep_report.py's, with its renderers).
RUNBOOK_OPTION = click.option("--runbook", default="node-health", show_default=True)
SINCE_OPTION = click.option(
    "--since", help='kernel-log evidence only since then (journalctl --since: "-2h", "2024-06-01")'
)
TEXTFILE_OPTION = click.option(
    "--textfile",
    type=click.Path(dir_okay=False, path_type=Path),
    help="also write the Prometheus textfile here (node-exporter textfile collector)",
)
SWEEP_OUT_OPTION = out_option(f"where the sweep bundle goes [default: {DEFAULT_OUT_HELP}]")
FULL_OPTION = click.option(
    "--full",
    "full_read",
    is_flag=True,
    help="read each host's kernel log, nvidia-smi and fabric whole, not from the last read's position "
    "(docs/reference.md#incremental-reads)",
)
FULL_EVERY_OPTION = click.option(
    "--full-every",
    "full_every",
    type=click.FloatRange(min=0),
    default=24.0,
    show_default=True,
    help="hours after which a host's nvidia-smi and fabric are read whole again (cheap --query-gpu reads between)",
)


def param_values(params: tuple[str, ...], since: str | None) -> dict[str, Any]:
    """The runbook's values from --param KEY=VALUE pairs, --since winning over a `since` among them."""
    values = parse_params(params)
    if since:
        values["since"] = since
    return values


def local_transports() -> dict[str, Any]:
    """This node under its own name (nightowl/fleet/sweep.py); an invalid $NODE_NAME exits 2."""
    from nightowl.fleet.sweep import local_transports as this_node

    try:
        return this_node()
    except ValueError as exc:
        fail(str(exc))
