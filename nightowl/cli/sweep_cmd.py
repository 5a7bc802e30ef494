"""`nightowl sweep`: one runbook (default node-health) over every inventory host."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from nightowl.cli.exit import EXIT_HELP, ExitStatus, status_for


@click.command(epilog=EXIT_HELP)
@click.option(
    "--inventory",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="YAML host list or an Ansible INI/YAML inventory",
)
@click.option(
    "--local", "local_only", is_flag=True, help="run on this node only (for a DaemonSet/cron/Slurm)"
)
@click.option("--runbook", default="node-health", show_default=True)
@click.option("--limit", help="host name pattern (fnmatch) or label=value")
@click.option("--forks", default=32, show_default=True, help="hosts run at once")
@click.option("--param", "params", multiple=True, metavar="KEY=VALUE", help="runbook parameter")
@click.option("--since", help='kernel-log evidence only since then (journalctl --since: "-2h", "2024-06-01")')
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "text", "json", "prometheus"]),
    default="table",
    show_default=True,
)
@click.option(
    "--textfile",
    type=click.Path(dir_okay=False, path_type=Path),
    help="also write the Prometheus textfile here (node-exporter textfile collector)",
)
@click.option("--known-hosts", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--ssh-config", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--accept-new", is_flag=True, help="accept and record unknown host keys")
@click.option("--allow-invasive", is_flag=True)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="where the sweep bundle goes",
)
def sweep(
    inventory: Path | None,
    local_only: bool,
    runbook: str,
    limit: str | None,
    forks: int,
    params: tuple[str, ...],
    since: str | None,
    fmt: str,
    textfile: Path | None,
    known_hosts: Path | None,
    ssh_config: Path | None,
    accept_new: bool,
    allow_invasive: bool,
    out_dir: Path | None,
) -> None:
    """Run a runbook on every host of an inventory, concurrently, into one bundle.

    Prints one row per host (verdict, action, GPUs, duration), JSON, or a Prometheus
    textfile; exit status tells a cron job whether any node needs action.
    """
    from nightowl.cli.main import (
        DEFAULT_OUT,
        _opener,
        fail,
        load_runbook_or_exit,
        parse_params,
        ssh_options_from,
    )

    if not inventory and not local_only:
        fail("give --inventory FILE or --local")
    loaded = load_runbook_or_exit(runbook)
    transports: dict[str, Any] = {}
    if local_only:
        transports["local"] = _opener("local", None)
    else:
        from nightowl.inventory import limit as limit_hosts
        from nightowl.inventory import load_inventory

        try:
            hosts = load_inventory(inventory)
        except (ValueError, OSError) as exc:
            fail(str(exc))
        if limit:
            hosts = limit_hosts(hosts, limit)
        options = ssh_options_from(known_hosts, ssh_config, accept_new)
        for host in hosts:
            transports[host.name] = _spec_opener(host, options)
    values = parse_params(params)
    if since:
        values["since"] = since
    summary = _run(loaded, transports, values, out_dir or DEFAULT_OUT, allow_invasive, forks, fmt)
    if textfile:
        from nightowl.cli.render_fleet import prometheus_textfile

        tmp = textfile.with_suffix(textfile.suffix + ".tmp")
        tmp.write_text(prometheus_textfile(summary))
        tmp.replace(textfile)  # node-exporter must never read a half-written file
    sys.exit(int(status_for(summary["hosts"])))


def _spec_opener(host: Any, options: Any) -> Any:
    def open_host() -> Any:
        if getattr(host, "kind", "ssh") == "local":
            from nightowl.transports.local import LocalTransport

            return LocalTransport(host.name)
        from nightowl.transports.ssh import SSHTransport

        return SSHTransport(host, options)

    return open_host


def _run(
    loaded: Any,
    transports: dict[str, Any],
    params: dict[str, Any],
    out_dir: Path,
    allow_invasive: bool,
    forks: int,
    fmt: str,
) -> dict[str, Any]:
    from nightowl.cli.render import json_report, text_report
    from nightowl.cli.render_fleet import fleet_table, prometheus_textfile
    from nightowl.collectors import get_collector
    from nightowl.engine.bundle import triage_summary
    from nightowl.engine.runner import RunOptions
    from nightowl.engine.session import Interrupted, run_runbook

    defaults = {k: p.default for k, p in loaded.runbook.parameters.items()}
    options = RunOptions(params={**defaults, **params}, allow_invasive=allow_invasive)
    progress, advance = _progress(len(transports), fmt)
    try:
        with progress:
            runs, bundle = run_runbook(
                loaded, transports, get_collector, options, out_dir, forks=forks, on_host_done=advance
            )
    except Interrupted as exc:
        click.echo(f"nightowl: interrupted; partial bundle saved at {exc.bundle}", err=True)
        sys.exit(int(ExitStatus.INTERRUPTED))
    summary = triage_summary(loaded.id, bundle.name, bundle, runs)
    render = {
        "json": json_report,
        "prometheus": prometheus_textfile,
        "text": text_report,
        "table": fleet_table,
    }
    click.echo(render[fmt](summary), nl=fmt != "prometheus")
    return summary


def _progress(total: int, fmt: str) -> tuple[Any, Any]:
    """A rich progress bar on a terminal's stderr; nothing when piped."""
    import contextlib

    if not sys.stderr.isatty() or fmt == "prometheus":
        return contextlib.nullcontext(), None
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    progress = Progress(
        "sweep",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    task = progress.add_task("hosts", total=total)
    return progress, (lambda _run: progress.advance(task))


@click.command(epilog=EXIT_HELP)
@click.option("--runbook", default="node-health", show_default=True)
@click.option("--param", "params", multiple=True, metavar="KEY=VALUE", help="runbook parameter")
@click.option("--since", help="kernel-log evidence only since then (journalctl --since)")
@click.option("--format", "fmt", type=click.Choice(["table", "text", "json", "prometheus"]), default="table",
              show_default=True)
@click.option("--textfile", type=click.Path(dir_okay=False, path_type=Path),
              help="also write the Prometheus textfile here (node-exporter textfile collector)")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None)
@click.pass_context
def check(ctx: click.Context, runbook: str, params: tuple[str, ...], since: str | None, fmt: str,
          textfile: Path | None, out_dir: Path | None) -> None:
    """Check this node only (`sweep --local`): for a DaemonSet, a cron job or Slurm's HealthCheckProgram."""
    ctx.invoke(sweep, inventory=None, local_only=True, runbook=runbook, limit=None, forks=1, params=params,
               since=since, fmt=fmt, textfile=textfile, known_hosts=None, ssh_config=None, accept_new=False,
               allow_invasive=False, out_dir=out_dir)
