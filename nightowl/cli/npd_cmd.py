"""`nightowl npd-result`: a `check` report as node-problem-detector's custom-plugin answer; `nightowl k8s
condition`: the same report as the NightowlGPUHealthy condition, patched with kubectl (fleet/k8s_condition.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import click

from nightowl.cli.exit import EXIT_HELP
from nightowl.cli.node_actions import (
    ACTIONS_EXIT_HELP,
    REPORT_FOR_OTHER_NODE_OPTION,
    Acting,
    acting_options,
    caps_options,
    caps_or_exit,
    check_node_or_exit,
    print_actions,
)
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


@click.group("k8s", epilog=EXIT_HELP)
def k8s() -> None:
    """Kubernetes node conditions without node-problem-detector, opt-in, behind the circuit breaker."""


@k8s.command("condition", epilog=ACTIONS_EXIT_HELP)
@click.argument("node")
@click.option("--check-status", type=int, required=True, help="the exit status of `nightowl check`")
@REPORT_FOR_OTHER_NODE_OPTION
@caps_options("turned unhealthy (False) by nightowl")
@acting_options
def condition(
    node: str,
    check_status: int,
    report_for_other_node: bool,
    max_drain: int | None,
    max_drain_percent: float | None,
    window: str,
    acting: Acting,
) -> None:
    """Read `nightowl check --format json` on stdin; set NODE's NightowlGPUHealthy condition with kubectl.

    \b
    status True (check exit 0), False (exit 1: the node needs action), Unknown (anything else);
    reason the verdict id, message its summary and the bundle id. Only `kubectl get nodes -o json`
    and `kubectl patch node NODE --subresource=status --type=strategic -p BODY` (this one condition)
    ever run. Turning a node False is capped: the breaker counts the nodes already False in the
    window; a held node is set Unknown saying why, and logged as held in actions.jsonl. A report
    about another node than NODE is refused (exit 2) unless --report-for-other-node. With
    --max-node-actions, a node turned False for one verdict that often in the node window is turned False for
    a hardware ticket (the message says the count) and no later True or Unknown replaces it (held, exit 4).
    """
    from nightowl.fleet.k8s_condition import Kubectl, KubectlError, set_condition
    from nightowl.fleet.scheduler_actions import read_report, record_failure

    caps = caps_or_exit(max_drain, max_drain_percent, window)
    node_cap = acting.node_cap()
    text = sys.stdin.read()
    report = read_report(text)
    if report is None and text.strip() not in ("", "null"):
        check_status = -1  # an unreadable report is no verdict: Unknown
    log, dry_run = acting.log, acting.dry_run
    # gpu-17's report never sets gpu-03's condition
    note = check_node_or_exit(report, (node,), "condition", acting, report_for_other_node)
    try:
        entry = set_condition(
            Kubectl(),
            node,
            report,
            check_status,
            caps,
            log,
            dry_run=dry_run,
            note=note,
            lock=acting.lock,
            node_cap=node_cap,
        )
    except (KubectlError, OSError, subprocess.TimeoutExpired) as exc:
        entry = record_failure(log, node, "condition", str(exc), dry_run)
    print_actions([entry], acting.fmt)
