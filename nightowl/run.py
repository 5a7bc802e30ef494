"""The one way nightowl runs a runbook and saves its bundle: every caller goes through ``run_and_save``.

``triage`` (and ``--follow``), ``check`` and ``sweep``, ``serve`` captures, ``triage --alert`` and
``runbook test`` used to wire a run each by themselves, each with a subset of the steps (an alert skipped
the parameter checks ``triage`` made, so an unreadable site policy silently changed the verdict). Here
are the steps once, in order: resolve the parameters and let every collector of the runbook check them,
build the run options (command and host timeouts, invasive collectors, the program's stop), run with
secrets scrubbed from the bundle (the prefilter skipping documents that cannot hold one), render the
drafts and write the status update. No click: Python callers get a :class:`RunResult` or an exception.

Usable from Python::

    result = run_and_save(runbooks.load("xid"), {"gpu-17": lambda: open_transport("gpu-17")}, Path("out"))
    print(result.summary["hosts"][0]["verdict"])
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nightowl.engine.bundle_writer import BundleWriter
from nightowl.engine.incremental import CursorBook
from nightowl.engine.runner import CollectorLike, HostRun, RunOptions
from nightowl.engine.session import Interrupted, Terminated, close_live_transports, run_runbook
from nightowl.engine.validate import LoadedRunbook
from nightowl.transports.base import Transport

__all__ = ["Interrupted", "RunRefused", "RunResult", "parameter_problems", "resolve_params", "run_and_save"]


class RunRefused(ValueError):
    """The run was refused before anything ran: a parameter the runbook does not declare or cannot
    convert, or one a collector cannot use (an unreadable ``xid_policy``). The message names it (and the
    file); callers report it as an input error (exit 2, a capture "not captured")."""


@dataclass
class RunResult:
    """What a run produced: the runs per host, the bundle and the summary printed and served.

    ``summary`` is the shape of docs/reference.md#verdicts (``runbook``, ``run_id``, ``bundle``,
    ``hosts``). ``bundle`` is None when the bundle could not be written (``bundle_error`` says why:
    the verdicts stand, the evidence is missing). ``status_update`` is the written
    ``status-update.md``, None when not asked for or not written (``status_update_error``)."""

    runbook: str
    runs: list[HostRun]
    summary: dict[str, Any]
    bundle: Path | None
    bundle_error: str | None = None
    status_update: Path | None = None
    status_update_error: str | None = None
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def hosts(self) -> list[dict[str, Any]]:
        """The per-host entries of the summary (host, status, verdict, path)."""
        return list(self.summary["hosts"])


def resolve_params(
    loaded: LoadedRunbook, params: Mapping[str, Any] | None, lookup: Callable[[str], CollectorLike] | None = None
) -> dict[str, Any]:
    """The runbook's parameter values (defaults overlaid with ``params``), checked by every collector
    the runbook names; raises :class:`RunRefused` with every problem found."""
    try:
        values = loaded.resolve_params(dict(params or {}))
    except ValueError as exc:
        raise RunRefused(str(exc)) from None
    problems = parameter_problems(loaded, values, lookup)
    if problems:
        raise RunRefused("; ".join(problems))
    return values


def parameter_problems(
    loaded: LoadedRunbook, values: Mapping[str, Any], lookup: Callable[[str], CollectorLike] | None = None
) -> list[str]:
    """What the runbook's collectors say about the parameters (an unreadable policy file), before any run."""
    from nightowl.engine.runbook_data import split_entry

    lookup = lookup or _default_lookup()
    kinds = {split_entry(e)[0] for node in loaded.runbook.nodes.values() for e in node.collect or []}
    problems: list[str] = []
    for kind in sorted(kinds):
        check = getattr(lookup(kind), "check_params", None)
        if check is not None:
            problems += [p for p in check(values) if p not in problems]
    return problems


def run_and_save(
    loaded: LoadedRunbook,
    transports: Mapping[str, Callable[[], Transport]],
    out_dir: Path,
    *,
    params: Mapping[str, Any] | None = None,
    allow_invasive: bool = False,
    command_timeout: float | None = None,
    host_timeout: float | None = None,
    forks: int = 16,
    drafts: bool = True,
    status_update: bool = True,
    history: bool = True,
    redact: bool = True,
    extra_manifest: dict[str, Any] | None = None,
    on_host_done: Callable[[HostRun], None] | None = None,
    start_order: Iterable[str] | None = None,
    stopping: threading.Event | None = None,
    lookup: Callable[[str], CollectorLike] | None = None,
    engine: Callable[..., tuple[list[HostRun], Path]] | None = None,
    writer: BundleWriter | None = None,
    cursors: CursorBook | None = None,  # read positions (engine/incremental.py), saved by _record_history
) -> RunResult:
    """Run ``loaded`` on ``transports`` (host name -> function opening its transport) into one bundle
    under ``out_dir``; return the :class:`RunResult`.

    Raises :class:`RunRefused` before anything runs when the parameters cannot be used, and
    :class:`Interrupted` (``terminated`` for SIGTERM) after the partial bundle was saved when the run was
    interrupted. In the main thread SIGINT and SIGTERM stop the run (running commands are killed and
    recorded as interrupted); a later signal never cuts the partial bundle's save. ``stopping`` is the
    caller's own stop (a receiver shutting down): a command that dies of a signal while it is set makes
    the run partial instead of being judged. ``drafts`` renders ``postmortem.md``, ``status_update``
    writes ``status-update.md``; ``history`` records the bundle in the history store (when a command
    activated it; a failure there is a warning, never the run's); ``redact`` scrubs secrets from
    everything written. ``engine`` stands in for ``engine.session.run_runbook`` (same arguments and result)
    and ``writer`` for the bundle writer it makes: a sweep over worker processes (nightowl/fleet/workers.py).
    """
    values = resolve_params(loaded, params, lookup)
    stop = threading.Event()
    options = RunOptions(
        params=values,
        allow_invasive=allow_invasive,
        command_timeout=command_timeout,
        host_timeout=host_timeout,
        stop=stop,
        # A command dying of a signal may have been sent it with ours (a cgroup's TERM reaches both): it
        # waits a moment for our own handler to set ``stop`` before it is judged an ordinary failure.
        stopping=stopping or stop,
        cursors=cursors,
    )
    from nightowl.engine import parse_memo
    from nightowl.history.extract import KINDS_READ

    # The history reads the bundle's outputs back: what the run parsed is kept for it (engine/parse_memo.py).
    with parse_memo.keeping(KINDS_READ if history else frozenset()):
        saved = _run(
            loaded,
            transports,
            out_dir,
            options,
            forks,
            drafts,
            redact,
            extra_manifest,
            on_host_done,
            start_order,
            lookup,
            engine or run_runbook,
            writer,
        )
        if isinstance(saved, RunResult):
            saved.params = values
            return saved
        runs, bundle = saved
        result = RunResult(loaded.id, runs, {}, bundle, params=values)
        _summarise(result, status_update)
        if history:
            _record_history(bundle, cursors)
    return result


def _record_history(bundle: Path, cursors: CursorBook | None) -> None:
    """The run's one write into the history store, and the read positions its bundle now cites
    (``cursors``: engine/incremental.py; saved only once the bundle is written, with its id and sha256)."""
    from nightowl.history import active_path, record_bundle
    from nightowl.history import cursors as positions

    record_bundle(bundle)
    positions.commit(cursors, bundle, active_path(), lambda text: print(text, file=sys.stderr))


def _run(
    loaded: LoadedRunbook,
    transports: Mapping[str, Callable[[], Transport]],
    out_dir: Path,
    options: RunOptions,
    forks: int,
    drafts: bool,
    redact: bool,
    extra_manifest: dict[str, Any] | None,
    on_host_done: Callable[[HostRun], None] | None,
    start_order: Iterable[str] | None,
    lookup: Callable[[str], CollectorLike] | None,
    engine: Callable[..., tuple[list[HostRun], Path]],
    writer: BundleWriter | None,
) -> tuple[list[HostRun], Path] | RunResult:
    """The engine's run under the signal handlers; a bundle that could not be written is a RunResult
    with its reason (the verdicts stand)."""
    from nightowl.engine.bundle_summary import triage_summary
    from nightowl.engine.bundle_writer import BundleNotWritten

    scrub, prefilter = _redaction() if redact else (None, None)
    try:
        with interruptible(options) as taken:
            saved = engine(
                loaded,
                transports,
                lookup or _default_lookup(),
                options,
                out_dir,
                forks=forks,
                on_host_done=on_host_done,
                render_postmortem=_drafts() if drafts else None,
                redact=scrub,
                redact_prefilter=prefilter,
                extra_manifest=extra_manifest,
                start_order=start_order,
                writer=writer,
            )
    except BundleNotWritten as exc:
        summary = triage_summary(loaded.id, exc.run_id, None, exc.runs)
        summary["bundle_error"] = exc.reason
        return RunResult(loaded.id, exc.runs, summary, None, bundle_error=exc.reason)
    except Interrupted:
        raise
    except KeyboardInterrupt as exc:  # before the engine had a bundle to save
        raise Interrupted([], None, isinstance(exc, Terminated)) from None
    if taken:  # a signal came while the complete bundle was being saved: it is saved; now stop
        raise Interrupted(saved[0], saved[1], taken[0] == signal.SIGTERM)
    return saved


def _summarise(result: RunResult, with_status_update: bool) -> None:
    """The summary of the saved bundle, and its status update (a failure to write it costs only it)."""
    from nightowl.engine.bundle_summary import triage_summary
    from nightowl.reports import status_update

    assert result.bundle is not None
    result.summary = triage_summary(result.runbook, result.bundle.name, result.bundle, result.runs)
    if not with_status_update:
        return
    try:
        result.status_update = status_update.write(result.bundle, result.summary)
    except Exception as exc:  # noqa: BLE001 - the evidence is saved; the message is a convenience
        result.status_update_error = f"status update not written: {type(exc).__name__}: {exc}"


@contextmanager
def interruptible(options: RunOptions) -> Iterator[list[int]]:
    """SIGINT and SIGTERM stop the run now: every running command is killed (its transport closed) and
    the engine saves the partial bundle. Yields the signals taken.

    The first signal is the one obeyed; any later one (a double Ctrl-C, coreutils ``timeout`` sending TERM
    twice) is noted and ignored, so it can never cut the partial bundle's save short or turn the exit into
    click's "Aborted!". A signal that comes while the complete bundle is being saved waits for the save.
    After a signal the handlers stay in place: the process is on its way out (exit 130 or 143). Only the
    main thread takes signals; elsewhere this does nothing (the caller's ``stopping`` event stops it)."""
    taken: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield taken
        return

    def on_signal(signum: int, _frame: Any) -> None:
        taken.append(signum)
        if len(taken) > 1:
            return
        close_live_transports()
        if not options.saving.is_set():
            raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()

    previous = {number: signal.signal(number, on_signal) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield taken
    finally:
        if not taken:
            for number, handler in previous.items():
                signal.signal(number, handler)


def _redaction() -> tuple[Callable[[str], str], Callable[[str], bool]]:
    from nightowl.redact import might_hold_secrets, scrub_secrets

    return scrub_secrets, might_hold_secrets


def _drafts() -> Callable[[Path], str]:
    from nightowl.postmortem.render import render_drafts

    return render_drafts


def _default_lookup() -> Callable[[str], CollectorLike]:
    from nightowl.collectors import get_collector

    return get_collector  # type: ignore[return-value]
