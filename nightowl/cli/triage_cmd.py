"""`nightowl triage`: one runbook on live or recorded hosts, or what an alert maps to."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from nightowl.cli.common import (
    FORMAT_OPTION,
    HISTORY_FROM_OPTION,
    HISTORY_OPTION,
    INVASIVE_OPTION,
    OUT_OPTION,
    PARAM_OPTION,
    VERBOSE_OPTION,
    SSHArgs,
    fail,
    limit_options,
    load_runbook_or_exit,
    parse_params,
    ssh_options,
)
from nightowl.cli.exit import EXIT_HELP, ExitStatus, status_for
from nightowl.cli.reporting import run_and_report
from nightowl.cli.running import opener, replay_transports


@click.command(epilog=EXIT_HELP)
@click.argument("runbook", required=False)
@click.option(
    "--host",
    "hosts",
    multiple=True,
    metavar="SPEC",
    help="host to run on: `local`, `ssh://user@host:port?jump=bastion`, or a name from ~/.ssh/config",
)
@click.option(
    "--replay",
    "replays",
    multiple=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="recorded host directory to run on instead of a live host; a bundle works too "
    "(docs/reference.md#recorded-hosts-and-bundles)",
)
@click.option(
    "--replica",
    "replica_pairs",
    multiple=True,
    metavar="NAME=URL",
    help="a serving replica reached by its URL from here, no SSH (first-look): GET /health, /version, "
    "/v1/models and /metrics; what needs the node (container, engine log, GPUs) is reported not checked",
)
@click.option(
    "--replica-inventory",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="an inventory whose hosts carry a `url` label: each is a --replica; e.g. (Ansible YAML, with "
    "--replica-group serving) `serving: {hosts: {r1: {nightowl_labels: {url: 'http://10.0.0.5:8000'}}, "
    "r2: {nightowl_labels: {url: 'http://10.0.0.6:8000'}}}}`",
)
@click.option("--replica-group", metavar="GROUP", help="with --replica-inventory: only the hosts of this group")
@click.option(
    "--prometheus",
    "prometheus_url",
    metavar="URL",
    help="judge each --node from its dcgm-exporter series in this Prometheus alone, no SSH (query_range over "
    "--since); what needs the node (kernel log, nvidia-smi) is reported not read (docs/reference.md#dcgm-metrics)",
)
@click.option("--node", "prometheus_nodes", multiple=True, metavar="NAME", help="with --prometheus: a node to judge")
@click.option(
    "--dcgm",
    "dcgm_pairs",
    multiple=True,
    metavar="NAME=URL",
    help="a node judged from its dcgm-exporter's /metrics read from here, no SSH (e.g. "
    "gpu-17=http://10.0.0.17:9400/metrics); what needs the node is reported not read",
)
@click.option(
    "--node-label",
    metavar="LABEL",
    help="with --prometheus: the label naming the node (default: dcgm-exporter's Hostname or hostname)",
)
@click.option("--since", "prometheus_since", metavar="AGE", help="with --prometheus: the window read (default 1h)")
@click.option(
    "--scrape-interval",
    "prometheus_step",
    type=float,
    metavar="SECONDS",
    help="with --prometheus: the exporter's scrape interval, the window's step; a series older than two is "
    "stopped (default 30)",
)
@PARAM_OPTION
@INVASIVE_OPTION
@click.option(
    "--alert",
    "alert_file",
    type=click.File("r"),
    help="an Alertmanager or PagerDuty webhook payload (JSON): triage what its rules map it to",
)
@click.option(
    "--config",
    "alert_config",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="with --alert: the `nightowl serve` rules file (alert -> runbook and host)",
)
@click.option("--follow", is_flag=True, help="run the runbook a verdict names next, at once, into the same bundle")
@click.option("--status-update", "print_status", is_flag=True, help="print the status update (status-update.md)")
@ssh_options
@limit_options
@FORMAT_OPTION
@VERBOSE_OPTION
@OUT_OPTION
@HISTORY_OPTION
@HISTORY_FROM_OPTION
def triage(
    runbook: str | None,
    hosts: tuple[str, ...],
    replays: tuple[Path, ...],
    params: tuple[str, ...],
    allow_invasive: bool,
    alert_file: Any,
    alert_config: Path | None,
    ssh: SSHArgs,
    limits: dict[str, float | None],
    fmt: str,
    verbose: bool,
    out_dir: Path | None,
    follow: bool = False,
    print_status: bool = False,
    replica_pairs: tuple[str, ...] = (),
    replica_inventory: Path | None = None,
    replica_group: str | None = None,
    prometheus_url: str | None = None,
    prometheus_nodes: tuple[str, ...] = (),
    node_label: str | None = None,
    prometheus_since: str | None = None,
    prometheus_step: float | None = None,
    dcgm_pairs: tuple[str, ...] = (),
) -> None:
    """Run RUNBOOK on live hosts (--host), recorded ones (--replay), serving replicas by URL (--replica), or
    nodes by their DCGM series in Prometheus (--prometheus URL --node NAME).

    Only read-only collectors run unless --allow-invasive is given. The evidence
    bundle is written before the verdict is printed. With --alert FILE --config RULES,
    the alert payload names the runbook and hosts, as `nightowl serve` would.
    """
    if alert_file is not None:
        sys.exit(int(triage_alert(alert_file, alert_config, fmt, out_dir)))
    if runbook is None:
        fail("give a RUNBOOK (or --alert FILE --config RULES)")
    from nightowl.cli import prometheus_nodes as by_prometheus
    from nightowl.cli.replicas import replica_transports, replica_urls, with_base_urls

    urls = replica_urls(replica_pairs, replica_inventory, replica_group)
    nodes = by_prometheus.prometheus_nodes(
        prometheus_url, prometheus_nodes, node_label, prometheus_since, prometheus_step
    )
    exporters = by_prometheus.exporter_urls(dcgm_pairs)
    if not hosts and not replays and not urls and nodes is None and not exporters:
        fail("give at least one --host, --replay, --replica, --dcgm NAME=URL or --prometheus URL --node NAME")
    loaded = load_runbook_or_exit(runbook)
    transports = replay_transports(replays)
    ssh_settings = ssh.options() if hosts else None
    for spec in hosts:
        transports[spec] = opener(spec, ssh_settings)
    clash = sorted(set(transports) & set(urls))
    if clash:
        fail(f"--replica {clash[0]}: that name is also a --host or --replay")
    transports.update(replica_transports(urls))
    others = [n for n in transports if n not in urls]
    run_params = with_base_urls(parse_params(params), urls, others, loaded.runbook.parameters)
    run_params = by_prometheus.add_members(transports, run_params, nodes, exporters)
    sys.exit(
        int(
            run_and_report(
                loaded,
                transports,
                run_params,
                fmt,
                out_dir,
                allow_invasive,
                limits,
                follow=follow,
                print_status=print_status,
                verbose=verbose,
            )
        )
    )


def triage_alert(alert_file: Any, config_path: Path | None, fmt: str, out_dir: Path | None) -> ExitStatus:
    """`triage --alert`: what the receiver does with a delivery, done now, in the foreground."""
    from nightowl.cli.common import history_path, runbook_library
    from nightowl.receiver.capture import triage_alert_payload
    from nightowl.receiver.config import ConfigError, load_config

    if config_path is None:
        fail("--alert needs --config RULES (the `nightowl serve` rules file)")
    try:
        payload = json.load(alert_file)
        config = load_config(config_path, out_dir, False, runbook_library(), history_path())
    except (ValueError, ConfigError) as exc:
        fail(str(exc))
    results = [capture.to_json() for capture in triage_alert_payload(payload, config)]
    if fmt == "json":
        click.echo(json.dumps({"captures": results}, indent=2, default=str))
    else:
        for item in results:
            # The verdict, or the host and the error that prevented one (an unreachable host, a missing ssh config).
            click.echo(
                f"{item.get('alert') or '?'} -> {item.get('runbook') or '-'} on "
                f"{item.get('host') or '-'}: {item['outcome']}"
                + (f"\n  bundle: {item['bundle']}" if item.get("bundle") else "")
            )
    return alert_status(results)


def alert_status(results: list[dict[str, Any]]) -> ExitStatus:
    """1 when a capture needs action; else 2 when one was refused for its rule's parameters (as triage
    refuses them: an input error); else 3 when one failed or was refused, or nothing was captured at all
    (never a false OK); else from the verdicts. Alerts no rule matches judge nothing either way."""
    refused = [r for r in results if r.get("status") in ("failed", "not_captured")]
    for item in refused:
        click.echo(f"nightowl: {item.get('alert') or 'alert'}: {item['status']}: {item.get('reason')}", err=True)
    captured = [{"verdict": r.get("verdict")} for r in results if r.get("status") == "captured"]
    if not captured:
        click.echo("nightowl: no alert in the payload was captured: nothing was judged", err=True)
    status = status_for(captured)
    cut = [r for r in results if r.get("status") == "interrupted"]
    if cut:  # the partial bundle is in the report
        click.echo(f"nightowl: {cut[0].get('reason')}", err=True)
        terminated = str(cut[0].get("reason") or "").startswith("terminated")
        return ExitStatus.TERMINATED if terminated else ExitStatus.INTERRUPTED
    if status == ExitStatus.ACTION_NEEDED:
        return status
    if any(r.get("input_error") for r in refused):
        return ExitStatus.USAGE
    return ExitStatus.NO_VERDICT if refused or not captured else status
