"""`nightowl sweep`: one runbook (default node-health) over many hosts, into one bundle.

This module parses the options, calls the use case (nightowl/fleet/sweep.py, through cli/sweep_report.py,
which `nightowl check` shares) and exits; the fleet logic (inventory, outliers, table and textfile views)
lives in nightowl/fleet.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

import click

from nightowl.cli.common import (
    FULL_EVERY_OPTION,
    FULL_OPTION,
    HISTORY_OPTION,
    INVASIVE_OPTION,
    PARAM_OPTION,
    RUNBOOK_OPTION,
    SINCE_OPTION,
    SWEEP_OUT_OPTION,
    TEXTFILE_OPTION,
    SSHArgs,
    limit_options,
    local_transports,
    param_values,
    ssh_options,
)
from nightowl.cli.exit import EXIT_HELP, ExitStatus, fail
from nightowl.cli.sweep_report import SWEEP_FORMAT_OPTION, run_sweep


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
@click.option(
    "--every",
    type=click.FloatRange(min=1),
    metavar="SECONDS",
    help="sweep again every SECONDS (start to start), keeping each host's connection open between rounds, sending "
    "the reads it is asked every round together in one SSH session (in lanes side by side where one took long on "
    "the host) and linking unchanged output files to the "
    "last bundle's: each round its own bundle and report; the first over --workers, the later ones in this "
    "process (docs/reference.md#repeated-sweeps)",
)
@click.option(
    "--rounds",
    type=click.IntRange(min=0),
    default=0,
    help="with --every: stop after this many rounds, exiting with the last round's status [default: 0, until stopped]",
)
@PARAM_OPTION
@SINCE_OPTION
@FULL_OPTION
@FULL_EVERY_OPTION
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
    every: float | None,
    rounds: int,
    params: tuple[str, ...],
    since: str | None,
    full_read: bool,
    full_every: float,
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
    order), a node-exporter textfile, or a page of the hosts by failure domain (--format html; the bundle
    keeps that page as sweep.html, which `serve` links as the last sweep). The exit status tells a cron job
    whether any node needs action. Later sweeps read each host's kernel log from where the last stopped
    (its cursor in the history store; --full: whole). Connections are opened ahead (up to twice --forks
    waiting) and the hosts that answer start first. Host keys are checked strictly against known_hosts
    unless --accept-new. The hosts are spread over worker processes (--workers), the report and bundle
    being what one process gives. With --every the sweep repeats in this process, each host's connection
    kept open between rounds and the reads it is asked every round sent together (--rounds: how many; each
    round prints its report, and says on stderr how long it took, how many connections it reused, how many
    commands came in batches and how many bundle files are links to files holding the same bytes).
    """
    from nightowl.cli.common import load_runbook_or_exit
    from nightowl.fleet.workers import default_workers, engine_for, start_pool

    if not inventory and not local_only:
        fail("give --inventory FILE or --local")
    if rounds and every is None:
        fail("--rounds needs --every")
    hosts = [] if local_only else _inventory_hosts(inventory, limit, ssh.ssh_config)
    workers = 1 if local_only else workers or default_workers(len(hosts))
    pool = start_pool(workers)  # loads while this process reads the runbook
    loaded = load_runbook_or_exit(runbook)
    dialer = None
    domains: dict[str, dict[str, str]] = {}
    if local_only:
        transports = local_transports()
    else:
        from nightowl.fleet.sweep import inventory_transports

        dial = workers == 1 and every is None  # --every dials each round (cli/sweep_every.py)
        transports, dialer, domains = inventory_transports(hosts, ssh.options(), forks, dial=dial)
    if not transports:
        fail(f"no host left in {inventory} after --limit {limit}")
    values = param_values(params, since)
    if "tenancy" in loaded.runbook.parameters and "tenancy" not in values:
        from nightowl.fleet.inventory import declared_tenancies

        values["tenancy"] = declared_tenancies(hosts) or None  # each host's inventory label
    settings: dict[str, Any] = {
        "fmt": fmt,
        "textfile": textfile,
        "log_format": None,  # no log lines: a problem is one plain `nightowl: ...` line on stderr
        "out_dir": out_dir,
        "forks": forks,
        "allow_invasive": allow_invasive,
        "full_read": full_read,
        "full_every": full_every,
    }
    engine = engine_for(loaded, transports, pool, values, ssh.connect_timeout)  # None: this process runs the hosts
    if every is not None:
        from nightowl.cli.sweep_every import Rounds

        repeat = Rounds(every, rounds)  # the first round over `engine`, the later ones here
        sys.exit(int(_repeated(loaded, values, limits, settings, repeat, hosts, (transports, domains, engine), ssh)))
    status = run_sweep(loaded, transports, values, limits, dialer=dialer, domains=domains, engine=engine, **settings)
    sys.exit(int(status))


def _repeated(
    loaded: Any,
    values: dict[str, Any],
    limits: dict[str, float | None],
    settings: dict[str, Any],
    rounds: Any,  # cli/sweep_every.Rounds
    hosts: list[Any],
    first: tuple[dict[str, Any], dict[str, Any], Any],
    ssh: SSHArgs,
) -> ExitStatus:
    """--every: the sweep once per round over kept connections (cli/sweep_every.py); ``first``: the openers,
    failure domains and worker engine of a first round over worker processes (engine None: every round here)."""
    from nightowl.cli.sweep_every import batchable_kinds, kept_hosts, sweep_every

    def one_round(
        openers: dict[str, Any], dialer: Any, domains: dict[str, Any], annotate: Any, flow: Any = None, **engine: Any
    ) -> ExitStatus:
        return run_sweep(
            loaded, openers, values, limits, dialer=dialer, domains=domains, annotate=annotate, flow=flow,
            **engine, **settings,
        )  # fmt: skip

    transports, domains, engine = first
    over_workers = functools.partial(one_round, transports, None, domains, engine=engine) if engine else None
    batchable = batchable_kinds(loaded)
    if hosts:
        return sweep_every(
            rounds, kept_hosts(hosts, ssh.options(), settings["forks"]), one_round, over_workers, batchable
        )
    return sweep_every(rounds, lambda _keeper: (transports, None, {}), one_round, batchable=batchable)


def _inventory_hosts(inventory: Path | None, limit: str | None, ssh_config: Path | None) -> list[Any]:
    """The inventory's hosts after ``--limit``; an inventory that cannot be read exits 2."""
    from nightowl.fleet.sweep import inventory_hosts

    assert inventory is not None
    try:
        return inventory_hosts(inventory, limit, ssh_config)
    except (ValueError, OSError) as exc:
        fail(str(exc))
