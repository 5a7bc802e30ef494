"""The `nightowl` command group: it only assembles the commands, one per module.

Heavy modules (engine, paramiko, jinja2, networkx, pydantic) are imported inside the commands so
`nightowl --help` answers at once.
"""

from __future__ import annotations

from pathlib import Path

import click

from nightowl import __version__
from nightowl.cli.bench_cmd import bench
from nightowl.cli.bundles_cmd import bundles
from nightowl.cli.check_cmd import check
from nightowl.cli.demo_cmd import demo
from nightowl.cli.exit import EXIT_HELP, GuardedGroup
from nightowl.cli.floor_cmd import floor
from nightowl.cli.history_cmd import history
from nightowl.cli.kv_size_cmd import kv_size
from nightowl.cli.mcp_cmd import mcp
from nightowl.cli.npd_cmd import k8s, npd_result
from nightowl.cli.parse_cmd import parse_cmd
from nightowl.cli.plan_cmd import plan
from nightowl.cli.postmortem_cmd import postmortem
from nightowl.cli.runbook_cmd import runbook_group
from nightowl.cli.serve_cmd import serve
from nightowl.cli.slurm_cmd import slurm
from nightowl.cli.sweep_cmd import sweep
from nightowl.cli.triage_cmd import triage
from nightowl.cli.watch_cmd import watch
from nightowl.cli.xid_cmd import xid


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
def main(runbook_path: tuple[Path, ...]) -> None:
    """nightowl: incident runbooks for GPU servers and LLM-serving fleets.

    Runs read-only collectors (nvidia-smi, kernel log, engine metrics, NCCL logs) on hosts,
    walks a decision tree, prints the verdict with its evidence and the first action,
    and saves an evidence bundle before anyone restarts anything.
    """
    if runbook_path:
        from nightowl.library import runbooks

        runbooks.EXTRA_DIRS[:] = list(runbook_path)


for command in (
    triage,
    demo,
    plan,
    parse_cmd,
    xid,
    runbook_group,
    sweep,
    check,
    kv_size,
    floor,
    bench,
    postmortem,
    serve,
    bundles,
    slurm,
    npd_result,
    k8s,
    mcp,
    history,
    watch,
):
    main.add_command(command)


if __name__ == "__main__":  # `python -m nightowl.cli.main`, as MCP clients may spawn it
    main()
