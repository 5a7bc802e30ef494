"""Running a runbook for a command: the bundle, the summary, the report and the exit status."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from nightowl.cli.common import fail
from nightowl.cli.exit import ExitStatus, status_for
from nightowl.paths import default_out_dir


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
    start_order: Any = None,
) -> dict[str, Any]:
    """Run a runbook (secrets scrubbed from the bundle) and return the summary of docs/reference.md#verdicts.

    An interrupt exits 130 after the partial bundle is saved.
    """
    from nightowl.collectors import get_collector
    from nightowl.engine.bundle import BundleNotWritten, triage_summary
    from nightowl.engine.runner import RunOptions
    from nightowl.engine.session import Interrupted, run_runbook
    from nightowl.postmortem.render import render_drafts
    from nightowl.redact import might_hold_secrets, scrub_secrets

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
        with interruptible():
            runs, bundle = run_runbook(
                loaded,
                transports,
                get_collector,
                options,
                out_dir,
                forks=forks,
                on_host_done=on_host_done,
                render_postmortem=render_drafts if postmortem else None,
                redact=scrub_secrets,
                redact_prefilter=might_hold_secrets,
                start_order=start_order,
            )
    except BundleNotWritten as exc:
        summary = triage_summary(loaded.id, exc.run_id, None, exc.runs)
        summary["bundle_error"] = exc.reason
        summary["_runs"] = exc.runs
        return summary
    except Interrupted as exc:
        what = "terminated" if exc.terminated else "interrupted"
        click.echo(f"nightowl: {what}; partial bundle saved at {exc.bundle}", err=True)
        exit_now(ExitStatus.TERMINATED if exc.terminated else ExitStatus.INTERRUPTED)
    from nightowl import status_update

    summary, _ = status_update.write_for_runs(loaded.id, bundle, runs)
    from nightowl.history import record_bundle  # the run's one write into the history store (a warning at worst)

    record_bundle(bundle)
    summary["_runs"] = runs
    return summary


@contextmanager
def interruptible() -> Iterator[None]:
    """SIGINT and SIGTERM end the run now: running commands are killed (their transports closed) and the
    engine saves the partial bundle. Only the main thread can take signals; elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    from nightowl.engine.session import Terminated, close_live_transports

    def on_signal(signum: int, frame: Any) -> None:
        close_live_transports()
        raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()

    previous = {number: signal.signal(number, on_signal) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


# Threads the engine starts (concurrent.futures pools); a collector still running in one of them after an
# interrupt must not hold the exit (interpreter shutdown joins pool threads).
_ENGINE_THREADS = ("host", "collect", "connect", "member")


def exit_now(status: ExitStatus) -> None:
    """Exit with ``status`` at once, not after the engine's threads finish what they were doing."""
    if any(t.name.startswith(_ENGINE_THREADS) and t.is_alive() for t in threading.enumerate()):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(int(status))
    sys.exit(int(status))


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

    summary = run_to_summary(loaded, transports, params, out_dir or default_out_dir(), allow_invasive, limits=limits)
    summary.pop("_runs")
    click.echo(json_report(summary) if fmt == "json" else text_report(summary, verbose=verbose))
    if summary.get("bundle_error"):  # the verdict is printed; the missing evidence is a failure
        click.echo(f"nightowl: {summary['bundle_error']}", err=True)
        return ExitStatus.USAGE
    return status_for(summary["hosts"])


def opener(spec: str, ssh_options: Any) -> Any:
    from nightowl.transports import open_transport

    return lambda: open_transport(spec, ssh_options)


def replay_transports(replays: tuple[Path, ...]) -> dict[str, Any]:
    """Recorded hosts: a host directory, or a bundle (every host in its hosts/, and the hosts its
    verdicts.json records as unreachable, which have no folder).

    Two recordings with the same name are two hosts, never one: the second is named by its path.
    """
    from nightowl.engine.bundle import host_from_dirname
    from nightowl.transports.base import Unreachable
    from nightowl.transports.replay import ReplayTransport, unreachable_in_bundle

    transports: dict[str, Any] = {}

    def add(name: str, where: Path, make: Any) -> None:
        if name in transports:
            name = str(where)
        suffix = 2
        while name in transports:
            name, suffix = f"{where}#{suffix}", suffix + 1
        transports[name] = lambda n=name: make(n)

    for directory in replays:
        in_bundle = (directory / "hosts").is_dir() or (directory / "verdicts.json").is_file()
        hosts = directory / "hosts"
        host_dirs = sorted(p for p in hosts.iterdir() if p.is_dir()) if hosts.is_dir() else []
        for host_dir in host_dirs if in_bundle else [directory]:
            name = host_from_dirname(host_dir.name) if in_bundle else host_dir.name
            add(name, host_dir, lambda n, d=host_dir: ReplayTransport(d, n))
        if not in_bundle:
            continue
        try:
            unreachable = unreachable_in_bundle(directory)
        except ValueError as exc:
            fail(str(exc))
        recorded = {host_from_dirname(d.name) for d in host_dirs}
        for host, reason in unreachable.items():
            if host not in recorded:
                add(host, hosts / host, lambda n, r=reason: Unreachable(n, r, recorded=True))
    return transports
