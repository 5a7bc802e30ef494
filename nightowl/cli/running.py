"""Running a runbook for a command: the bundle, the summary, the report and the exit status."""

from __future__ import annotations

import functools
import inspect
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, ParamSpec

import click

from nightowl.cli.common import fail
from nightowl.cli.exit import ExitStatus
from nightowl.fleet.sweep import run_and_save

if TYPE_CHECKING:
    from nightowl.run import RunResult


P = ParamSpec("P")


def exiting(run: Callable[P, RunResult]) -> Callable[P, RunResult]:
    """``run`` for a command, with ``run``'s own signature (so an option is declared once, where ``run`` takes
    it, and mypy checks every caller against it): parameters it refuses exit 2 with the reason, an interrupt
    exits 130 (143 for SIGTERM) once the partial bundle is saved. A ``context`` not handed in (None) is the one
    this command's options chose (cli/common.run_context); a caller in another thread hands its own."""
    signature = inspect.signature(run)
    call: Callable[..., RunResult] = run  # the arguments as bound below: the ones P describes

    @functools.wraps(run)
    def run_or_exit(*args: P.args, **kwargs: P.kwargs) -> RunResult:
        from nightowl.cli.common import run_context
        from nightowl.run import Interrupted, RunRefused

        bound = signature.bind(*args, **kwargs)
        try:
            if "context" in signature.parameters and bound.arguments.get("context") is None:
                bound.arguments["context"] = run_context()  # the store and readers this command's options chose
            return call(*bound.args, **bound.kwargs)
        except RunRefused as exc:
            fail(str(exc))
        except Interrupted as exc:
            what = "terminated" if exc.terminated else "interrupted"
            saved = f"partial bundle saved at {exc.bundle}" if exc.bundle else "nothing was collected yet"
            click.echo(f"nightowl: {what}; {saved}", err=True)
            _ignore_stop_signals()
            exit_now(ExitStatus.TERMINATED if exc.terminated else ExitStatus.INTERRUPTED)
        raise AssertionError("unreachable")  # fail and exit_now do not return

    return run_or_exit


# ``nightowl.run.run_and_save`` in the shape every command and ``fleet.sweep.sweep`` call it (fleet/sweep.py's
# ``run_and_save``: the runbook, hosts, parameters, folder, invasive switch, timeouts, context, then settings and
# hooks by name), exiting as a command does. Its signature is that function's, not a copy of it.
run_or_exit = exiting(run_and_save)


# Threads the engine starts (concurrent.futures pools); a collector still running in one of them after an
# interrupt must not hold the exit (interpreter shutdown joins pool threads).
_ENGINE_THREADS = ("host", "collect", "connect", "member")


def _ignore_stop_signals() -> None:
    """The bundle is saved and the exit status chosen: a later SIGINT or SIGTERM changes nothing now.

    Ignored outright, because interpreter shutdown puts back the default action of every signal that has
    a Python handler (CPython's signal module finalisation): a second TERM arriving then (coreutils
    ``timeout`` sends two) would kill the process by the signal instead of letting it exit 143, and a
    parent reading the wait status would see "killed" where nightowl had finished. A handler of SIG_IGN
    is left as it is."""
    if threading.current_thread() is threading.main_thread():
        for number in (signal.SIGINT, signal.SIGTERM):
            signal.signal(number, signal.SIG_IGN)


def exit_now(status: ExitStatus) -> NoReturn:
    """Exit with ``status`` at once, not after the engine's threads finish what they were doing."""
    if any(t.name.startswith(_ENGINE_THREADS) and t.is_alive() for t in threading.enumerate()):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(int(status))
    sys.exit(int(status))


def report_bundle_problems(result: RunResult) -> bool:
    """Say on stderr what was not written (the bundle, the status update); True when the bundle is
    missing, which fails the command (exit 2) after the verdict is printed."""
    if result.status_update_error:
        click.echo(f"nightowl: {result.status_update_error}", err=True)
    if result.bundle_error:
        click.echo(f"nightowl: {result.bundle_error}", err=True)
        return True
    return False


def opener(spec: str, ssh_options: Any) -> Any:
    from nightowl.transports import open_transport

    return lambda: open_transport(spec, ssh_options)


def replay_transports(replays: tuple[Path, ...]) -> dict[str, Any]:
    """Recorded hosts: a host directory, or a bundle (every host in its hosts/, and the hosts its
    verdicts.json records as unreachable, which have no folder).

    Two recordings with the same name are two hosts, never one: the second is named by its path.
    """
    from nightowl.engine import layout
    from nightowl.engine.bundle_summary import unreachable_in_bundle
    from nightowl.transports.base import Unreachable
    from nightowl.transports.replay import ReplayTransport

    transports: dict[str, Any] = {}

    def add(name: str, where: Path, make: Any) -> None:
        if name in transports:
            name = str(where)
        suffix = 2
        while name in transports:
            name, suffix = f"{where}#{suffix}", suffix + 1
        transports[name] = lambda n=name: make(n)

    for directory in replays:
        in_bundle = (directory / layout.HOSTS).is_dir() or (directory / layout.VERDICTS).is_file()
        hosts = directory / layout.HOSTS
        host_dirs = sorted(p for p in hosts.iterdir() if p.is_dir()) if hosts.is_dir() else []
        for host_dir in host_dirs if in_bundle else [directory]:
            name = layout.host_from_dirname(host_dir.name) if in_bundle else host_dir.name
            add(name, host_dir, lambda n, d=host_dir: ReplayTransport(d, n))
        if not in_bundle:
            continue
        try:
            unreachable = unreachable_in_bundle(directory)
        except ValueError as exc:
            fail(str(exc))
        recorded = {layout.host_from_dirname(d.name) for d in host_dirs}
        for host, reason in unreachable.items():
            if host not in recorded:
                add(host, hosts / host, lambda n, r=reason: Unreachable(n, r, recorded=True))
    return transports
