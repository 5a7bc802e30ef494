"""`nightowl check`: `nightowl sweep --local`, for a DaemonSet, a cron job or Slurm's HealthCheckProgram."""

from __future__ import annotations

from pathlib import Path

import click

from nightowl.cli.common import LOG_FORMAT_OPTION, PARAM_OPTION, limit_options
from nightowl.cli.exit import EXIT_HELP
from nightowl.cli.sweep_cmd import (
    RUNBOOK_OPTION,
    SINCE_OPTION,
    SWEEP_FORMAT_OPTION,
    SWEEP_OUT_OPTION,
    TEXTFILE_OPTION,
    sweep,
)


@click.command(epilog=EXIT_HELP)
@RUNBOOK_OPTION
@PARAM_OPTION
@SINCE_OPTION
@SWEEP_FORMAT_OPTION
@TEXTFILE_OPTION
@limit_options
@SWEEP_OUT_OPTION
@LOG_FORMAT_OPTION
@click.pass_context
def check(
    ctx: click.Context,
    runbook: str,
    params: tuple[str, ...],
    since: str | None,
    fmt: str,
    textfile: Path | None,
    command_timeout: float | None,
    host_timeout: float | None,
    out_dir: Path | None,
    log_format: str,
) -> None:
    """Check this node only (`sweep --local`): for a DaemonSet, a cron job or Slurm's HealthCheckProgram.

    The node is named by $NODE_NAME when set (the Kubernetes downward API's spec.nodeName; the
    Slurm script exports Slurm's node name), else the host name, in the JSON, the textfile and the
    bundle; an invalid $NODE_NAME is an error. The textfile (--textfile) holds
    nightowl_host_verdict_info{host,runbook,status,verdict,severity,action} (renamed from
    nightowl_host_verdict), nightowl_host_needs_action and nightowl_xid_events.

    Logs one line per check to stderr: JSON lines (level, node, runbook, verdict) unless stderr
    is a terminal or --log-format text (then the report itself is the log).
    """
    ctx.invoke(
        sweep,
        inventory=None,
        local_only=True,
        runbook=runbook,
        limit=None,
        forks=1,
        params=params,
        since=since,
        fmt=fmt,
        textfile=textfile,
        allow_invasive=False,
        known_hosts=None,
        ssh_config=None,
        accept_new=False,
        identities=(),
        connect_timeout=10.0,
        command_timeout=command_timeout,
        host_timeout=host_timeout,
        out_dir=out_dir,
        log_format=log_format,
    )
