"""`nightowl npd-result`: a `check` report as node-problem-detector's custom-plugin answer."""

from __future__ import annotations

import json
import sys

import click

from nightowl.fleet.node_condition import NPD_DEFAULT_MAX_OUTPUT_LENGTH


@click.command("npd-result")
@click.option("--check-status", type=int, required=True, help="the exit status of `nightowl check`")
@click.option(
    "--max-output-length",
    type=click.IntRange(min=1),
    default=NPD_DEFAULT_MAX_OUTPUT_LENGTH,
    show_default=True,
    help="the monitor's pluginConfig.max_output_length (bytes)",
)
def npd_result(check_status: int, max_output_length: int) -> None:
    """Read `nightowl check --format json` on stdin; print the condition message and exit as NPD reads it.

    \b
    Exit status (node-problem-detector's custom-plugin protocol):
      0  OK: the check found nothing to act on
      1  NonOK: the node needs action (the condition turns True)
      2  Unknown: the check could not judge, or its report is unreadable
    The message (at most --max-output-length bytes) is `VERDICT [BUNDLE] summary`.
    """
    from nightowl.fleet.node_condition import PluginStatus, plugin_result

    try:
        report = json.loads(sys.stdin.read() or "null")
    except ValueError:
        report, check_status = None, -1
    status, message = plugin_result(report if isinstance(report, dict) else None, check_status, max_output_length)
    if report is None and status is PluginStatus.UNKNOWN:
        message = message.replace("[-]", "[no report]", 1)
    click.echo(message)
    sys.exit(int(status))
