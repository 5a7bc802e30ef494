"""A sweep for `nightowl sweep` and `nightowl check`: the use case (nightowl/fleet/sweep.py) called with a
progress bar, its result printed in the chosen format, `check`'s log lines, and the exit status.

Each output format is declared once here (``RENDERERS``), with the ``--format`` option both commands take.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from nightowl.cli.common import format_option
from nightowl.cli.exit import ExitStatus, status_for
from nightowl.paths import default_out_dir

if TYPE_CHECKING:
    from nightowl.fleet.sweep import SweepResult
    from nightowl.transports.dial import Dialer

# Each output format once: what renders a sweep summary ("module:function", imported when used) and whether
# the output is a file format (printed as it is, with no progress bar on stderr). The first is the default.
RENDERERS: dict[str, tuple[str, bool]] = {
    "table": ("nightowl.fleet.table:fleet_table", False),
    "text": ("nightowl.cli.render:text_report", False),
    "json": ("nightowl.cli.render:json_report", False),
    "prometheus": ("nightowl.fleet.textfile:prometheus_textfile", True),
    "html": ("nightowl.fleet.sweep_page:sweep_html", True),
}
SWEEP_FORMAT_OPTION = format_option(
    *RENDERERS,
    help="table or text for people, json for scripts (indented; one line past 16 hosts: docs/reference.md#run-json), "
    "html: one self-contained page of the hosts by failure domain (docs/reference.md#sweep-html)",
)


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
    full_every: float = 24.0,
    annotate: Callable[[dict[str, Any]], None] | None = None,
    flow: Any = None,
) -> ExitStatus:
    """Sweep a loaded runbook over the hosts of ``transports`` (name -> function opening its transport) into
    one bundle under ``out_dir`` (the default folder when None), print the report as ``fmt``, write the
    textfile if asked, and return the exit status; the caller exits with it.

    ``params`` are the runbook's values (`param_values`), ``limits`` its command and host timeouts.
    ``log_format`` is `check`'s --log-format: one log line per host on stderr when it resolves to json;
    None (sweep) never logs. The dialer, when given, orders the hosts' starts and is closed after the run.
    ``domains`` maps a host to its failure domains (``HostSpec.domains``) for the report's `domains`.
    ``engine`` runs the hosts in place of the one-process engine (worker processes: nightowl/fleet/workers.py).
    With a history store each host's kernel log is read from where the last read stopped (``full_read``: whole),
    and its nvidia-smi and fabric cheap first, whole after ``full_every`` hours.
    ``annotate`` adds to the summary before it is printed and ``flow`` carries the pace from one round to the
    next (a repeated sweep's: cli/sweep_every.py).
    A refused parameter exits 2 and an interrupt 130 or 143 once the partial bundle is saved (``run_or_exit``).
    """
    from nightowl.cli.common import history_path
    from nightowl.cli.running import run_or_exit
    from nightowl.fleet.sweep import sweep
    from nightowl.history import cursors as positions

    progress, advance = _progress(len(transports), fmt)
    with progress:
        result = sweep(
            loaded,
            transports,
            out_dir or default_out_dir(),
            params=params,
            limits=limits,
            allow_invasive=allow_invasive,
            forks=forks,
            dialer=dialer,
            domains=domains,
            textfile=textfile,
            run=run_or_exit,
            on_host_done=advance,
            engine=engine,
            history_store=history_path(),
            cursors=positions.book(history_path(), full=full_read, full_every=full_every * 3600),
            flow=flow,
        )
    if annotate is not None:
        annotate(result.summary)
    render: Callable[..., str] = renderer(fmt)
    if fmt == "prometheus":  # its GPU incidents come from the history store this command chose
        render = functools.partial(render, history=history_path())
    click.echo(render(result.summary), nl=not RENDERERS[fmt][1])
    return _finish(result, log_format)


def _finish(result: SweepResult, log_format: str | None) -> ExitStatus:
    """The report is printed; evidence or a textfile that could not be written is a failure (exit 2,
    with the reason on stderr), never a traceback and never a half-written file."""
    from nightowl.logline import resolve_format

    problems = list(result.problems)
    if log_format is not None and resolve_format(log_format, sys.stderr) == "json":
        _log_hosts(result.summary, problems)
    else:  # on a terminal the report itself is the log
        for problem in problems:
            click.echo(f"nightowl: {problem}", err=True)
    return ExitStatus.USAGE if problems else status_for(result.hosts)


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
