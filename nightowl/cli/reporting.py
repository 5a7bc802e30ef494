"""A command's run and its report: the verdicts printed, then (``triage --follow``) the runbooks they name
next, then (``--status-update``) the status update, and the exit status. For triage and demo."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from nightowl.cli.exit import ExitStatus, status_for
from nightowl.cli.running import report_bundle_problems, run_or_exit
from nightowl.paths import default_out_dir


def run_and_report(
    loaded: Any,
    transports: dict[str, Any],
    params: dict[str, Any],
    fmt: str,
    out_dir: Path | None,
    allow_invasive: bool,
    limits: dict[str, float | None] | None = None,
    follow: bool = False,
    print_status: bool = False,
    verbose: bool = False,
) -> ExitStatus:
    """The run and its report, then (``follow``, triage --follow) the runbooks its verdicts name next, then
    (``print_status``, --status-update) the status update. A bundle that could not be written fails the
    command (exit 2) after the verdict is printed: there is nothing to follow from or to update with."""
    from nightowl.cli.follow import follow as run_next  # lazy: it reads the bundle layout of the engine
    from nightowl.cli.render import json_report, text_report

    result = run_or_exit(loaded, transports, params, out_dir or default_out_dir(), allow_invasive, limits)
    summary = result.summary
    if result.bundle_error:
        click.echo(json_report(summary) if fmt == "json" else text_report(summary, verbose=verbose))
        report_bundle_problems(result)
        return ExitStatus.USAGE
    followed = run_next(summary, transports, allow_invasive, limits or {}) if follow else []
    if fmt == "json":
        click.echo(json_report({**summary, "followed": followed} if follow else summary))
    else:
        click.echo(text_report(summary, verbose=verbose))
        for step in followed:
            click.echo("\nfollowed: " + text_report(step, verbose=verbose))
    if print_status and result.status_update is not None:
        click.echo("\n" + result.status_update.read_text().rstrip())
    elif print_status or not follow:  # a status update that could not be written is said
        report_bundle_problems(result)
    return status_for([host for run in (summary, *followed) for host in run["hosts"]])
