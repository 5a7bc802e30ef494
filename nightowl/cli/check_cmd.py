"""`nightowl check`: `nightowl sweep --local`, for a DaemonSet, a cron job or Slurm's HealthCheckProgram."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from nightowl.cli.common import (
    FULL_EVERY_OPTION,
    FULL_OPTION,
    HISTORY_FROM_OPTION,
    HISTORY_OPTION,
    LOG_FORMAT_OPTION,
    PARAM_OPTION,
    RUNBOOK_OPTION,
    SINCE_OPTION,
    SWEEP_OUT_OPTION,
    TEXTFILE_OPTION,
    limit_options,
    load_runbook_or_exit,
    local_transports,
    param_values,
)
from nightowl.cli.exit import EXIT_HELP
from nightowl.cli.sweep_report import SWEEP_FORMAT_OPTION, run_sweep


@click.command(epilog=EXIT_HELP)
@RUNBOOK_OPTION
@PARAM_OPTION
@SINCE_OPTION
@FULL_OPTION
@FULL_EVERY_OPTION
@SWEEP_FORMAT_OPTION
@TEXTFILE_OPTION
@limit_options
@SWEEP_OUT_OPTION
@LOG_FORMAT_OPTION
@HISTORY_OPTION
@HISTORY_FROM_OPTION
def check(
    runbook: str,
    params: tuple[str, ...],
    since: str | None,
    full_read: bool,
    full_every: float,
    fmt: str,
    textfile: Path | None,
    limits: dict[str, float | None],
    out_dir: Path | None,
    log_format: str,
) -> None:
    """Check this node only (`sweep --local`): for a DaemonSet, a cron job or Slurm's HealthCheckProgram.

    The node is named by $NODE_NAME when set (the Kubernetes downward API's spec.nodeName; the
    Slurm script exports Slurm's node name), else the host name, in the JSON, the textfile and the
    bundle; an invalid $NODE_NAME is an error. The textfile (--textfile) holds
    nightowl_host_verdict_info{host,runbook,status,verdict,severity,action} (renamed from
    nightowl_host_verdict), nightowl_host_needs_action and nightowl_xid_events. The bundle keeps the
    page --format html prints as sweep.html; each check reads the kernel log from where the last one stopped
    (--full: whole), and nvidia-smi and the fabric whole every --full-every hours (cheap reads between).

    Logs one line per check to stderr: JSON lines (level, node, runbook, verdict) unless stderr
    is a terminal or --log-format text (then the report itself is the log).
    """
    # The order of sweep --local: an unknown runbook is reported before an invalid $NODE_NAME,
    # and both before a malformed --param.
    loaded = load_runbook_or_exit(runbook)
    transports = local_transports()
    status = run_sweep(
        loaded,
        transports,
        param_values(params, since),
        limits,
        fmt=fmt,
        textfile=textfile,
        log_format=log_format,
        out_dir=out_dir,
        forks=1,
        full_read=full_read,
        full_every=full_every,
    )
    sys.exit(int(status))
