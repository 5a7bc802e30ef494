"""The `nightowl` command group: it only assembles the commands, one per module, each imported when asked for.

Heavy modules (engine, paramiko, jinja2, networkx, pydantic) are imported inside the commands so
`nightowl --help` answers at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from nightowl import __version__
from nightowl.cli.exit import EXIT_HELP, GuardedGroup

# The commands, in the order `--help` used to add them. Each command's module is imported the first time
# the command is asked for, so `nightowl check` (run every minute on every node) imports check_cmd's
# dependencies and not those of twenty other commands.
COMMAND_NAMES = (
    "triage",
    "demo",
    "plan",
    "parse",
    "xid",
    "runbook",
    "sweep",
    "check",
    "kv-size",
    "floor",
    "bench",
    "postmortem",
    "serve",
    "bundles",
    "slurm",
    "npd-result",
    "k8s",
    "mcp",
    "history",
    "watch",
    "verify",
)


def _command(name: str) -> click.Command:  # noqa: C901, PLR0911, PLR0912 - one branch per command
    """The command ``name``, its module imported now (plain imports, so the import graph sees them)."""
    if name == "triage":
        from nightowl.cli.triage_cmd import triage as command
    elif name == "demo":
        from nightowl.cli.demo_cmd import demo as command
    elif name == "plan":
        from nightowl.cli.plan_cmd import plan as command
    elif name == "parse":
        from nightowl.cli.parse_cmd import parse_cmd as command
    elif name == "xid":
        from nightowl.cli.xid_cmd import xid as command
    elif name == "runbook":
        from nightowl.cli.runbook_cmd import runbook_group as command
    elif name == "sweep":
        from nightowl.cli.sweep_cmd import sweep as command
    elif name == "check":
        from nightowl.cli.check_cmd import check as command
    elif name == "kv-size":
        from nightowl.cli.kv_size_cmd import kv_size as command
    elif name == "floor":
        from nightowl.cli.floor_cmd import floor as command
    elif name == "bench":
        from nightowl.cli.bench_cmd import bench as command
    elif name == "postmortem":
        from nightowl.cli.postmortem_cmd import postmortem as command
    elif name == "serve":
        from nightowl.cli.serve_cmd import serve as command
    elif name == "bundles":
        from nightowl.cli.bundles_cmd import bundles as command
    elif name == "slurm":
        from nightowl.cli.slurm_cmd import slurm as command
    elif name == "npd-result":
        from nightowl.cli.npd_cmd import npd_result as command
    elif name == "k8s":
        from nightowl.cli.npd_cmd import k8s as command
    elif name == "mcp":
        from nightowl.cli.mcp_cmd import mcp as command
    elif name == "history":
        from nightowl.cli.history_cmd import history as command
    elif name == "watch":
        from nightowl.cli.watch_cmd import watch as command
    elif name == "verify":
        from nightowl.cli.verify_cmd import verify as command
    else:
        raise KeyError(name)
    return command


class LazyCommands(dict):  # type: ignore[type-arg]
    """The group's ``commands``: name -> command, a command's module imported when it is first read
    (click reads ``commands`` by ``get`` and ``[]``, and lists it by its keys)."""

    def __getitem__(self, name: str) -> click.Command:
        value = super().__getitem__(name)
        if value is None:
            value = _command(name)
            super().__setitem__(name, value)
        return value  # type: ignore[no-any-return]

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        """The command ``name`` (imported now if need be), or ``default``."""
        return self[name] if name in self else default  # noqa: SIM401 - dict.get would skip the import

    def items(self) -> list[tuple[str, click.Command]]:  # type: ignore[override]
        """Every command, each imported."""
        return [(name, self[name]) for name in self]

    def values(self) -> list[click.Command]:  # type: ignore[override]
        """Every command, each imported."""
        return [self[name] for name in self]


@click.group(cls=GuardedGroup, context_settings={"help_option_names": ["-h", "--help"]}, epilog=EXIT_HELP)
@click.version_option(__version__, prog_name="nightowl")
@click.option(
    "--runbook-path",
    "runbook_path",
    multiple=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="a folder of site runbooks (NAME.yaml), searched before $NIGHTOWL_RUNBOOK_PATH, "
    "$XDG_CONFIG_HOME/nightowl/runbooks, /etc/nightowl/runbooks and the built-ins; repeatable",
)
@click.pass_context
def main(ctx: click.Context, runbook_path: tuple[Path, ...]) -> None:
    """nightowl: incident runbooks for GPU servers and LLM-serving fleets.

    Runs read-only collectors (nvidia-smi, kernel log, engine metrics, NCCL logs) on hosts,
    walks a decision tree, prints the verdict with its evidence and the first action,
    and saves an evidence bundle before anyone restarts anything.
    """
    if runbook_path:  # kept in this invocation's context, for its command to hand down (cli/common.py)
        from nightowl.cli.common import choices

        choices(ctx).runbook_dirs = tuple(runbook_path)


main.commands = LazyCommands(dict.fromkeys(COMMAND_NAMES))


if __name__ == "__main__":  # `python -m nightowl.cli.main`, as MCP clients may spawn it
    main()
