"""`nightowl sweep`: one runbook (default node-health) over many hosts, into one bundle.

The options `nightowl check` shares with it are declared here once, and so is the run both commands
make (`run_sweep`); the fleet logic (inventory, outliers, table and textfile views) lives in nightowl/fleet.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from nightowl.cli.common import (
    DEFAULT_OUT_HELP,
    HISTORY_OPTION,
    INVASIVE_OPTION,
    PARAM_OPTION,
    SSHArgs,
    format_option,
    limit_options,
    out_option,
    ssh_options,
)
from nightowl.cli.exit import EXIT_HELP, ExitStatus, fail, status_for
from nightowl.paths import default_out_dir

if TYPE_CHECKING:
    from nightowl.transports.dial import Dialer

RUNBOOK_OPTION = click.option("--runbook", default="node-health", show_default=True)
SINCE_OPTION = click.option(
    "--since", help='kernel-log evidence only since then (journalctl --since: "-2h", "2024-06-01")'
)
# Each output format once: what renders a sweep summary ("module:function", imported when used) and whether
# the output is a file format (printed as it is, with no progress bar on stderr). The first is the default.
RENDERERS: dict[str, tuple[str, bool]] = {
    "table": ("nightowl.fleet.table:fleet_table", False),
    "text": ("nightowl.cli.render:text_report", False),
    "json": ("nightowl.cli.render:json_report", False),
    "prometheus": ("nightowl.fleet.textfile:prometheus_textfile", True),
}
SWEEP_FORMAT_OPTION = format_option(
    *RENDERERS,
    help="table or text for people, json for scripts (indented; one line past 16 hosts: docs/reference.md#run-json)",
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
    help="read each host's kernel log whole, not from its last read's cursor (docs/reference.md#incremental-reads)",
)


@click.command(epilog=EXIT_HELP)
@click.option(
    "--inventory",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="YAML host list, an Ansible INI/YAML inventory as it is, or `ansible-inventory --list` JSON",
)
@click.option("--local", "local_only", is_flag=True, help="run on this node only (as `nightowl check`)")
@RUNBOOK_OPTION
@click.option("--limit", help="hosts by name glob, label=value, group=NAME; commas for or, ! to exclude")
@click.option(
    "--forks",
    default=32,
    show_default=True,
    help="hosts run at once at most; fewer while this process lags behind reading them (flow control)",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    help="worker processes the hosts are spread over, --forks shared among them "
    "[default: one per core, at most one per 16 hosts; 1: all in this process]",
)
@PARAM_OPTION
@SINCE_OPTION
@FULL_OPTION
@SWEEP_FORMAT_OPTION
@TEXTFILE_OPTION
@INVASIVE_OPTION
@ssh_options
@limit_options
@SWEEP_OUT_OPTION
@HISTORY_OPTION
def sweep(
    inventory: Path | None,
    local_only: bool,
    runbook: str,
    limit: str | None,
    forks: int,
    workers: int | None,
    params: tuple[str, ...],
    since: str | None,
    full_read: bool,
    fmt: str,
    textfile: Path | None,
    allow_invasive: bool,
    ssh: SSHArgs,
    limits: dict[str, float | None],
    out_dir: Path | None,
) -> None:
    """Run a runbook on every host of an inventory, concurrently, into one bundle.

    Prints one row per host (verdict, action, GPUs, duration) with the hosts that share a
    verdict and the ones that differ from the rest, JSON (docs/reference.md#verdicts, hosts in inventory
    order), or a node-exporter textfile. The exit status tells a cron job whether any node
    needs action. Connections are opened ahead (up to twice --forks waiting) and the hosts that answer
    start first. Host keys are checked strictly against known_hosts unless --accept-new. The hosts are
    spread over worker processes (--workers), the report and bundle being what one process gives.
    """
    from nightowl.cli.common import load_runbook_or_exit
    from nightowl.fleet.workers import default_workers, engine_for, start_pool

    if not inventory and not local_only:
        fail("give --inventory FILE or --local")
    hosts = [] if local_only else _inventory_hosts(inventory, limit, ssh)
    workers = 1 if local_only else workers or default_workers(len(hosts))
    pool = start_pool(workers)  # loads while this process reads the runbook
    loaded = load_runbook_or_exit(runbook)
    dialer = None
    domains: dict[str, dict[str, str]] = {}
    if local_only:
        transports = local_transports()
    else:
        transports, dialer, domains = _inventory_transports(hosts, ssh, forks, dial=workers == 1)
    if not transports:
        fail(f"no host left in {inventory} after --limit {limit}")
    values = param_values(params, since)
    if "tenancy" in loaded.runbook.parameters and "tenancy" not in values:
        from nightowl.fleet.inventory import declared_tenancies

        values["tenancy"] = declared_tenancies(hosts) or None  # each host's inventory label
    status = run_sweep(
        loaded,
        transports,
        values,
        limits,
        fmt=fmt,
        textfile=textfile,
        log_format=None,  # no log lines: a problem is one plain `nightowl: ...` line on stderr
        out_dir=out_dir,
        forks=forks,
        allow_invasive=allow_invasive,
        dialer=dialer,
        domains=domains,
        engine=engine_for(loaded, transports, pool, values, ssh.connect_timeout),
        full_read=full_read,
    )
    sys.exit(int(status))


def run_sweep(
    loaded: Any,
    transports: dict[str, Any],
    params: dict[str, Any],
    limits: dict[str, float | None],
    *,
    fmt: str,
    textfile: Path | None,
    log_format: str | None,
    out_dir: Path | None,
    forks: int,
    allow_invasive: bool = False,
    dialer: Dialer | None = None,
    domains: dict[str, dict[str, str]] | None = None,
    engine: Any = None,
    full_read: bool = False,
) -> ExitStatus:
    """Run a loaded runbook on the hosts of ``transports`` (name -> function opening its transport) into
    one bundle under ``out_dir`` (the default folder when None), print the report as ``fmt``, write the
    textfile if asked, and return the exit status; the caller exits with it.

    ``params`` are the runbook's values (`param_values`), ``limits`` its command and host timeouts.
    ``log_format`` is `check`'s --log-format: one log line per host on stderr when it resolves to json;
    None (sweep) never logs. The dialer, when given, orders the hosts' starts and is closed here.
    ``domains`` maps a host to its failure domains (``HostSpec.domains``) for the report's `domains`.
    ``engine`` runs the hosts in place of the one-process engine (worker processes: nightowl/fleet/workers.py).
    With a history store each host's kernel log is read from where the last read stopped (``full_read``: whole).
    """
    from nightowl.history import active_path
    from nightowl.history import cursors as positions

    try:
        summary = _run(
            loaded,
            transports,
            params,
            out_dir or default_out_dir(),
            allow_invasive,
            forks,
            fmt,
            limits,
            dialer,
            domains,
            engine,
            positions.book(active_path(), full=full_read),
        )
    finally:
        if dialer is not None:
            dialer.close()
    return _finish(summary, textfile, log_format)


def param_values(params: tuple[str, ...], since: str | None) -> dict[str, Any]:
    """The runbook's values from --param KEY=VALUE pairs, --since winning over a `since` among them."""
    from nightowl.cli.common import parse_params

    values = parse_params(params)
    if since:
        values["since"] = since
    return values


def _finish(summary: dict[str, Any], textfile: Path | None, log_format: str | None) -> ExitStatus:
    """The report is printed; evidence or a textfile that could not be written is a failure (exit 2,
    with the reason on stderr), never a traceback and never a half-written file."""
    problems = [summary["bundle_error"]] if summary.get("bundle_error") else []
    if textfile:
        from nightowl.fleet.textfile import write_textfile

        try:
            write_textfile(textfile, summary)  # atomic: node-exporter never reads a half-written file
        except OSError as exc:
            problems.append(f"cannot write the textfile {textfile}: {exc.strerror or exc}")
    from nightowl.logline import resolve_format

    if log_format is not None and resolve_format(log_format, sys.stderr) == "json":
        _log_hosts(summary, problems)
    else:  # on a terminal the report itself is the log
        for problem in problems:
            click.echo(f"nightowl: {problem}", err=True)
    return ExitStatus.USAGE if problems else status_for(summary["hosts"])


def _log_hosts(summary: dict[str, Any], problems: list[str]) -> None:
    """`check`'s log: one line per node (its verdict, or why there is none), then what failed."""
    from nightowl.cli.common import stderr_logger
    from nightowl.logline import LogLine, verdict_level

    log = stderr_logger("json", "nightowl.check")
    runbook = summary["runbook"]
    for host in summary["hosts"]:
        verdict = host.get("verdict") or {}
        said = f"{verdict.get('id')} -> {verdict.get('action')}" if verdict else f"no verdict: {host.get('error')}"
        fields = {"node": host["host"], "runbook": runbook, "status": host["status"], "bundle": summary["bundle"]}
        fields.update(verdict=verdict.get("id"), action=verdict.get("action"), reason=host.get("error"))
        log(LogLine(f"{host['host']} {runbook}: {said}", level=verdict_level(host["status"], verdict), **fields))
    for problem in problems:
        log(LogLine(f"nightowl: {problem}", level="error", runbook=runbook))


def local_transports() -> dict[str, Any]:
    """This node under its own name (nightowl/fleet/identity.py), so a fleet of textfiles stays apart."""
    from nightowl.fleet.identity import node_name
    from nightowl.transports.local import LocalTransport

    try:
        name = node_name()
    except ValueError as exc:
        fail(str(exc))
    return {name: lambda: LocalTransport(name)}


def _inventory_hosts(inventory: Path | None, limit: str | None, ssh: SSHArgs) -> list[Any]:
    """The inventory's hosts after ``--limit`` (a bad host is that host's problem, not the sweep's)."""
    from nightowl.fleet.inventory import limit as limit_hosts
    from nightowl.fleet.inventory import load_inventory

    assert inventory is not None
    try:
        hosts = load_inventory(inventory, ssh.ssh_config, lenient=True)
        return limit_hosts(hosts, limit) if limit else hosts
    except (ValueError, OSError) as exc:
        fail(str(exc))


def _inventory_transports(
    hosts: list[Any], ssh: SSHArgs, forks: int, dial: bool = True
) -> tuple[dict[str, Any], Any, dict[str, dict[str, str]]]:
    """Each host with the function that opens its transport, the dialer that opens their TCP
    connections ahead of their sessions (nightowl/transports/dial.py; None when not ``dial``: worker
    processes dial their own), and their failure domains."""
    from nightowl.fleet.workers import HostOpener
    from nightowl.transports.dial import Dialer

    options = ssh.options()
    openers = {host.name: HostOpener(host, options) for host in hosts}
    domains = {host.name: host.domains for host in hosts if host.domains}
    if not dial:
        return openers, None, domains
    # Hosts behind a jump host are reached through it, one gate per jump host (transports/ssh.py): not dialed.
    direct = {name: target for name, opener in openers.items() if (target := opener.target) is not None}
    dialer = Dialer(direct, options.connect_timeout, window=2 * max(1, forks))
    return {n: o.dialing(dialer.taker(n)) for n, o in openers.items()}, dialer, domains


def _run(
    loaded: Any,
    transports: dict[str, Any],
    params: dict[str, Any],
    out_dir: Path,
    allow_invasive: bool,
    forks: int,
    fmt: str,
    limits: dict[str, float | None],
    dialer: Dialer | None = None,
    domains: dict[str, dict[str, str]] | None = None,
    engine: Any = None,
    cursors: Any = None,
) -> dict[str, Any]:
    from nightowl.cli.running import run_or_exit
    from nightowl.fleet.outliers import fleet_facts

    progress, advance = _progress(len(transports), fmt)
    with progress:
        # A fleet's bundle gets no postmortem draft: drafts are per incident (`nightowl postmortem`).
        result = run_or_exit(
            loaded,
            transports,
            params,
            out_dir,
            allow_invasive,
            limits,
            forks=forks,
            drafts=False,
            on_host_done=advance,
            start_order=dialer.start_order(transports) if dialer is not None else None,
            engine=engine,
            cursors=cursors,
        )
    summary = result.summary
    summary["fleet"] = fleet_facts(result.runs)
    from nightowl.fleet.domains import fleet_domains, with_fact_domains

    memberships = with_fact_domains(domains or {}, summary["fleet"])
    summary["domains"] = fleet_domains(summary["hosts"], memberships, summary["fleet"]["xid_events"])
    from nightowl.fleet.actions_log import breaker_state, watched_path

    breaker = breaker_state(watched_path())  # held scheduler actions (slurm, k8s): None when nightowl never acted
    if breaker is not None:
        summary["breaker"] = breaker
    click.echo(renderer(fmt)(summary), nl=not RENDERERS[fmt][1])
    return summary


def renderer(fmt: str) -> Callable[[dict[str, Any]], str]:
    """The function that renders a sweep summary in ``fmt`` (a key of ``RENDERERS``)."""
    import importlib

    module, _, name = RENDERERS[fmt][0].partition(":")
    render: Callable[[dict[str, Any]], str] = getattr(importlib.import_module(module), name)
    return render


def _progress(total: int, fmt: str) -> tuple[Any, Any]:
    """A rich progress bar on a terminal's stderr; nothing when piped."""
    import contextlib

    if not sys.stderr.isatty() or RENDERERS[fmt][1]:
        return contextlib.nullcontext(), None
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    progress = Progress(
        "sweep", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=Console(stderr=True), transient=True
    )
    task = progress.add_task("hosts", total=total)
    return progress, (lambda _run: progress.advance(task))
