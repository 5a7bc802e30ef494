"""Running a runbook for a command: the bundle, the summary, the report and the exit status."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from nightowl.cli.common import DEFAULT_OUT, fail
from nightowl.cli.exit import ExitStatus, status_for


def run_to_summary(
    loaded: Any,
    transports: dict[str, Any],
    params: dict[str, Any],
    out_dir: Path,
    allow_invasive: bool,
    forks: int = 16,
    limits: dict[str, float | None] | None = None,
    postmortem: bool = True,
    on_host_done: Any = None,
) -> dict[str, Any]:
    """Run a runbook (secrets scrubbed from the bundle) and return the summary of docs/reference.md#verdicts.

    An interrupt exits 130 after the partial bundle is saved.
    """
    from nightowl.collectors import get_collector
    from nightowl.engine.bundle import triage_summary
    from nightowl.engine.runner import RunOptions
    from nightowl.engine.session import Interrupted, run_runbook
    from nightowl.postmortem import render_bundle
    from nightowl.redact import scrub_secrets

    try:
        values = loaded.resolve_params(params)
    except ValueError as exc:
        fail(str(exc))
    problems = parameter_problems(loaded, values)
    if problems:
        fail("; ".join(problems))
    limits = limits or {}
    options = RunOptions(
        params=values,
        allow_invasive=allow_invasive,
        command_timeout=limits.get("command_timeout"),
        host_timeout=limits.get("host_timeout"),
    )
    try:
        runs, bundle = run_runbook(
            loaded,
            transports,
            get_collector,
            options,
            out_dir,
            forks=forks,
            on_host_done=on_host_done,
            render_postmortem=render_bundle if postmortem else None,
            redact=scrub_secrets,
        )
    except Interrupted as exc:
        click.echo(f"nightowl: interrupted; partial bundle saved at {exc.bundle}", err=True)
        sys.exit(int(ExitStatus.INTERRUPTED))
    summary = triage_summary(loaded.id, bundle.name, bundle, runs)
    from nightowl import status_update

    status_update.write(bundle, summary)
    summary["_runs"] = runs
    return summary


def parameter_problems(loaded: Any, values: dict[str, Any]) -> list[str]:
    """What the runbook's collectors say about the parameters (an unreadable policy file), before any run."""
    from nightowl.collectors import get_collector
    from nightowl.engine.model import split_entry

    kinds = {split_entry(e)[0] for node in loaded.runbook.nodes.values() for e in node.collect or []}
    problems: list[str] = []
    for kind in sorted(kinds):
        check = getattr(get_collector(kind), "check_params", None)
        if check is not None:
            problems += [p for p in check(values) if p not in problems]
    return problems


def run_and_report(
    loaded: Any,
    transports: dict[str, Any],
    params: dict[str, Any],
    fmt: str,
    out_dir: Path | None,
    allow_invasive: bool,
    limits: dict[str, float | None] | None = None,
    verbose: bool = False,
) -> ExitStatus:
    from nightowl.cli.render import json_report, text_report

    summary = run_to_summary(loaded, transports, params, out_dir or DEFAULT_OUT, allow_invasive, limits=limits)
    summary.pop("_runs")
    click.echo(json_report(summary) if fmt == "json" else text_report(summary, verbose=verbose))
    return status_for(summary["hosts"])


def opener(spec: str, ssh_options: Any) -> Any:
    from nightowl.transports import open_transport

    return lambda: open_transport(spec, ssh_options)


def replay_transports(replays: tuple[Path, ...]) -> dict[str, Any]:
    """Recorded hosts: a host directory, or a bundle (every host in its hosts/)."""
    from nightowl.transports.replay import ReplayTransport

    transports: dict[str, Any] = {}
    for directory in replays:
        host_dirs = (
            sorted(p for p in (directory / "hosts").iterdir() if p.is_dir())
            if (directory / "hosts").is_dir()
            else [directory]
        )
        for host_dir in host_dirs:
            transports[host_dir.name] = lambda d=host_dir: ReplayTransport(d, d.name)
    return transports
