"""The one way nightowl runs a runbook and saves its bundle: every caller goes through ``run_and_save``.

``triage`` (and ``--follow``), ``check`` and ``sweep``, ``serve`` captures, ``triage --alert`` and
``runbook test`` used to wire a run each by themselves, each with a subset of the steps (an alert skipped
the parameter checks ``triage`` made, so an unreadable site policy silently changed the verdict). Here
are the steps once, in order: resolve the parameters and let every collector of the runbook check them,
build the run options (command and host timeouts, invasive collectors, the program's stop), run with
secrets scrubbed from the bundle, render the
drafts and write the status update. No click: Python callers get a :class:`RunResult` or an exception.

Usable from Python::

    result = run_and_save(runbooks.load("xid"), {"gpu-17": lambda: open_transport("gpu-17")}, Path("out"))
    print(result.summary["hosts"][0]["verdict"])

    # a sweep's settings, and the history store the command chose (engine/context.py: RunContext)
    result = run_and_save(loaded, transports, out, settings=RunSettings(forks=64, host_timeout=60),
                          context=history.run_context())

The options are two value objects: :class:`RunSettings` (timeouts, forks, invasive collectors, what to
write) and :class:`RunHooks` (the caller's hooks into the run: a per-host callback, the start order, the
collector lookup, the engine and bundle writer a sweep's workers stand in, read positions, manifest keys).
State is handed in as a ``RunContext`` (the history store and its readers, the caller's stop), never read
from module globals; each run gets its own parse results there, which travel with its :class:`RunResult`
to the history writer and the postmortem draft, and the bundle keeps those of outputs it stored scrubbed
(``parsed/``), so every reader sees what the verdict saw.
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
from nightowl.engine.context import RunContext
from nightowl.engine.incremental import CursorBook
from nightowl.engine.parse_memo import ParsedOutputs
from nightowl.engine.runner import CollectorLike, HostRun, RunOptions
from nightowl.engine.session import Interrupted, Terminated, close_live_transports, run_runbook
from nightowl.engine.validate import LoadedRunbook
from nightowl.outcome import Outcome
from nightowl.transports.base import Transport

__all__ = [
    "Interrupted",
    "RunContext",
    "RunHooks",
    "RunRefused",
    "RunResult",
    "RunSettings",
    "parameter_problems",
    "resolve_params",
    "run_and_save",
]


class RunRefused(ValueError):
    """The run was refused before anything ran: a parameter the runbook does not declare or cannot
    convert, or one a collector cannot use (an unreadable ``xid_policy``). The message names it (and the
    file); callers report it as an input error (exit 2, a capture "not captured")."""


@dataclass(frozen=True)
class RunSettings:
    """How a run goes: ``allow_invasive`` collectors, ``command_timeout`` (caps each collector's own) and
    ``host_timeout`` (one host's whole walk), ``forks`` (hosts at once), and what is written: ``drafts``
    (``postmortem.md``), ``status_update`` (``status-update.md``), ``history`` (the bundle recorded in the
    context's store; a failure there is a warning, never the run's), ``redact`` (secrets scrubbed from
    everything written). ``origin`` is what started the run (nightowl/outcome.py ``ORIGINS``: ``alert`` for
    serve and ``triage --alert``, ``watch``, ``schedule`` for check and sweep, ``hand`` otherwise), told by
    the run's Outcome."""

    allow_invasive: bool = False
    command_timeout: float | None = None
    host_timeout: float | None = None
    forks: int = 16
    drafts: bool = True
    status_update: bool = True
    history: bool = True
    redact: bool = True
    origin: str = "hand"


@dataclass(frozen=True)
class RunHooks:
    """The caller's hooks into a run. ``on_host_done`` is called as each host ends; ``start_order`` is the
    order hosts start in (a sweep's dialer's); ``lookup`` gives the collector of a kind; ``engine`` stands in
    for ``engine.session.run_runbook`` (same arguments and result) and ``writer`` for the bundle writer it
    makes (a sweep over worker processes, nightowl/fleet/workers.py); ``cursors`` are read positions
    (engine/incremental.py, saved by ``_record_history``); ``extra_manifest`` adds manifest keys (the
    receiver's alert); ``describe`` gives, from the finished hosts' runs, what the caller knows of the run for
    its Outcome (``outcome_from_run``'s keywords: the alert's title, labels and incident, a storm's common
    cause), so the Outcome in the bundle is the one the caller tells; ``flow`` carries the hosts in flight
    from one run to the next of a caller that repeats (engine/flow.FlowMemory)."""

    on_host_done: Callable[[HostRun], None] | None = None
    start_order: Iterable[str] | None = None
    lookup: Callable[[str], CollectorLike] | None = None
    engine: Callable[..., tuple[list[HostRun], Path]] | None = None
    writer: BundleWriter | None = None
    cursors: CursorBook | None = None
    extra_manifest: dict[str, Any] | None = None
    describe: Callable[[list[HostRun]], Mapping[str, Any]] | None = None
    flow: Any = None  # engine/flow.FlowMemory: a repeating caller's pace, carried from one run to the next


@dataclass
class RunResult:
    """What a run produced: the runs per host, the bundle and the summary printed and served.

    ``summary`` is the shape of docs/reference.md#verdicts (``runbook``, ``run_id``, ``bundle``,
    ``hosts``). ``bundle`` is None when the bundle could not be written (``bundle_error`` says why:
    the verdicts stand, the evidence is missing). ``status_update`` is the written
    ``status-update.md``, None when not asked for or not written (``status_update_error``). ``outcome`` is
    the run's one :class:`~nightowl.outcome.Outcome` (also the bundle's ``outcome.json``): its readers
    (serve, watch, the MCP server) take it and add only what they know."""

    runbook: str
    runs: list[HostRun]
    summary: dict[str, Any]
    bundle: Path | None
    bundle_error: str | None = None
    status_update: Path | None = None
    status_update_error: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    # What the run parsed (engine/parse_memo.py): the history writer and the postmortem read these, not the
    # scrubbed bundle parsed again.
    parsed: ParsedOutputs = field(default_factory=ParsedOutputs, repr=False)
    outcome: Outcome | None = None

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
    settings: RunSettings = RunSettings(),  # noqa: B008 - frozen: one shared default is safe
    hooks: RunHooks = RunHooks(),  # noqa: B008 - frozen
    context: RunContext | None = None,
) -> RunResult:
    """Run ``loaded`` on ``transports`` (host name -> function opening its transport) into one bundle
    under ``out_dir``; return the :class:`RunResult`.

    Raises :class:`RunRefused` before anything runs when the parameters cannot be used, and
    :class:`Interrupted` (``terminated`` for SIGTERM) after the partial bundle was saved when the run was
    interrupted. In the main thread SIGINT and SIGTERM stop the run (running commands are killed and
    recorded as interrupted); a later signal never cuts the partial bundle's save. ``context.stop`` is the
    caller's own stop (a receiver shutting down): a command that dies of a signal while it is set makes
    the run partial instead of being judged. ``context`` gives the history store and the readers collectors
    may use (None: the one the command's options chose, ``nightowl.history.run_context``: none for a Python
    caller that chose none); the run gets parse results of its own in it.
    """
    from nightowl import history
    from nightowl.collectors.base import to_jsonable
    from nightowl.history.extract import KINDS_READ
    from nightowl.postmortem.outputs import KINDS_READ as DRAFT_KINDS

    lookup = hooks.lookup or _default_lookup()
    values = resolve_params(loaded, params, lookup)
    # The history and the postmortem read the bundle's outputs back: what the run parsed is kept for them.
    kinds = (KINDS_READ if settings.history else frozenset()) | (DRAFT_KINDS if settings.drafts else frozenset())
    context = context or history.run_context()  # kinds the caller asks for too (a sweep worker's parent's)
    context = context.for_run(kinds | context.parsed.kinds, to_jsonable)
    stop = threading.Event()
    options = RunOptions(
        params=values,
        allow_invasive=settings.allow_invasive,
        command_timeout=settings.command_timeout,
        host_timeout=settings.host_timeout,
        stop=stop,
        # A command dying of a signal may have been sent it with ours (a cgroup's TERM reaches both): it
        # waits a moment for our own handler to set ``stop`` before it is judged an ordinary failure.
        stopping=context.stop or stop,
        cursors=hooks.cursors,
        flow_memory=hooks.flow,
        parsed=context.parsed,
        readers=context.readers,
    )
    saved = _run(loaded, transports, out_dir, options, settings, hooks, lookup, context)
    if isinstance(saved, RunResult):
        saved.params = values
        saved.parsed = context.parsed
        saved.outcome = _outcome(saved, settings, hooks)
        return saved
    runs, bundle = saved
    result = RunResult(loaded.id, runs, {}, bundle, params=values, parsed=context.parsed)
    _summarise(result, settings, hooks)
    if settings.history:
        _record_history(bundle, hooks.cursors, context)
    return result


def _record_history(bundle: Path, cursors: CursorBook | None, context: RunContext) -> None:
    """The run's one write into the context's history store, of what the run parsed, and the read positions
    its bundle now cites (``cursors``: engine/incremental.py; saved only once the bundle is written, with its
    id and sha256)."""
    from nightowl.history import cursors as positions
    from nightowl.history import record_bundle

    record_bundle(bundle, context.history, parsed=context.parsed)
    positions.commit(cursors, bundle, context.history, lambda text: print(text, file=sys.stderr))


def _run(
    loaded: LoadedRunbook,
    transports: Mapping[str, Callable[[], Transport]],
    out_dir: Path,
    options: RunOptions,
    settings: RunSettings,
    hooks: RunHooks,
    lookup: Callable[[str], CollectorLike],
    context: RunContext,
) -> tuple[list[HostRun], Path] | RunResult:
    """The engine's run under the signal handlers; a bundle that could not be written is a RunResult
    with its reason (the verdicts stand)."""
    from nightowl.engine.bundle_summary import triage_summary
    from nightowl.engine.bundle_writer import BundleNotWritten

    scrub = _redaction() if settings.redact else None
    engine = hooks.engine or run_runbook
    try:
        with interruptible(options) as taken:
            saved = engine(
                loaded,
                transports,
                lookup,
                options,
                out_dir,
                forks=settings.forks,
                on_host_done=hooks.on_host_done,
                render_postmortem=_drafts(context.parsed, context.history) if settings.drafts else None,
                redact=scrub,
                extra_manifest=hooks.extra_manifest,
                start_order=hooks.start_order,
                writer=hooks.writer,
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


def _summarise(result: RunResult, settings: RunSettings, hooks: RunHooks) -> None:
    """The summary of the saved bundle, the run's Outcome, the status update rendered from it (a failure to
    write it costs only it), and the Outcome kept in the bundle as ``outcome.json``."""
    from nightowl.engine.bundle_summary import triage_summary
    from nightowl.reports import status_update

    assert result.bundle is not None
    result.summary = triage_summary(result.runbook, result.bundle.name, result.bundle, result.runs)
    outcome = _outcome(result, settings, hooks)
    if settings.status_update:
        try:
            result.status_update = status_update.write(result.bundle, result.summary, outcome)
        except Exception as exc:  # noqa: BLE001 - the evidence is saved; the message is a convenience
            result.status_update_error = f"status update not written: {type(exc).__name__}: {exc}"
    result.outcome = outcome.with_status_update(result.status_update)
    if hooks.writer is None:  # a sweep worker writes into its parent's bundle, whose own run keeps the outcome
        _write_outcome(result.bundle, result.outcome, settings.redact)


def _outcome(result: RunResult, settings: RunSettings, hooks: RunHooks) -> Outcome:
    """The run's one Outcome (nightowl/outcome.py), with what the caller knows of it (``hooks.describe``)."""
    from nightowl.outcome import outcome_from_run

    described = dict(hooks.describe(result.runs)) if hooks.describe is not None else {}
    return outcome_from_run(result, settings.origin, **described)


def _write_outcome(bundle: Path, outcome: Outcome, redact: bool) -> None:
    """``outcome.json``: after the manifest, whose sha256 it names, every string scrubbed as the bundle's own
    documents are (a host's error may quote a command); a failure to write it costs only it."""
    import json

    from nightowl.engine import layout
    from nightowl.engine.bundle_writer import _scrub
    from nightowl.engine.private_files import write_private

    record = _scrub(outcome.as_json(), _redaction()) if redact else outcome.as_json()
    try:
        write_private(bundle / layout.OUTCOME, json.dumps(record, indent=2, sort_keys=True) + "\n")
    except OSError as exc:
        print(f"nightowl: {layout.OUTCOME} not written: {exc.strerror or exc}", file=sys.stderr)


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


def _redaction() -> Callable[[str], str]:
    from nightowl.redact import scrub_secrets

    return scrub_secrets


def _drafts(parsed: ParsedOutputs, history: Path | None) -> Callable[[Path], str]:
    """The draft renderer, reading what the run parsed (``parsed``) rather than parsing the bundle again, and
    the run's history store (``history``) for the hosts' earlier incidents."""
    import functools

    from nightowl.postmortem.render import render_drafts

    return functools.partial(render_drafts, parsed=parsed, history=history)


def _default_lookup() -> Callable[[str], CollectorLike]:
    from nightowl.collectors import get_collector

    return get_collector  # type: ignore[return-value]
