"""Run one runbook over many hosts and write the bundle: the engine's front door.

Usable from Python without the CLI::

    runs, bundle = run_runbook(loaded, {"gpu-17": transport}, get_collector, RunOptions(), Path("bundles"))
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from nightowl.engine import layout
from nightowl.engine.bundle_writer import BundleWriter
from nightowl.engine.flow import AdaptiveLimit, FlowMemory, LagSampler
from nightowl.engine.runbook_data import split_entry
from nightowl.engine.runner import CollectorLike, HostRun, HostRunner, RunOptions, is_derived
from nightowl.engine.validate import LoadedRunbook
from nightowl.transports.base import Transport, Unreachable


class Terminated(KeyboardInterrupt):
    """SIGTERM (Kubernetes, Slurm, systemd stopping the program): handled as an interrupt, told apart."""


class Interrupted(Exception):
    """Raised after a partial bundle was saved because the run was interrupted.

    ``bundle`` is None only when the interrupt came before the bundle's folder existed."""

    def __init__(self, runs: list[HostRun], bundle: Path | None, terminated: bool = False) -> None:
        super().__init__(f"interrupted; partial bundle at {bundle}")
        self.runs = runs
        self.bundle = bundle
        self.terminated = terminated


# How long an interrupt waits for the collectors a signal cut to record what they ran (their transports
# are closed, so they return at once unless a connection ignores the close).
DRAIN_SECONDS = 3.0
INTERRUPTED_REASON = "interrupted before a verdict: nightowl was stopped"


# Transports of runs in progress, so an interrupt can end their running commands in every thread at once.
_live: weakref.WeakSet[Any] = weakref.WeakSet()
_live_lock = threading.Lock()
# The stop events of runs in progress (RunOptions.stop): set on an interrupt so that `wait:` pauses end.
_live_stops: weakref.WeakSet[threading.Event] = weakref.WeakSet()


def close_live_transports() -> None:
    """Close every open transport (kills local commands, drops SSH channels): called on SIGINT/SIGTERM so
    that no collector or thread keeps the run alive past the interrupt."""
    with _live_lock:
        live = list(_live)
        stops = list(_live_stops)
    for stop in stops:
        stop.set()
    for transport in live:
        with contextlib.suppress(Exception):
            _end(transport)


def _end(transport: Any) -> None:
    """Close ``transport`` for good: ``end`` where it has one (a connection a repeated sweep keeps between
    rounds, whose ``close`` only hands it back: transports/kept.py), else ``close``."""
    end = getattr(transport, "end", None)
    (end if callable(end) else transport.close)()


def _starting(writer: BundleWriter, options: RunOptions) -> None:
    """A run starts: its stop is one a signal sets (``close_live_transports``), and its writer notes the
    outputs it stores scrubbed with the run's parse results (engine/parse_memo.py)."""
    with _live_lock:
        _live_stops.add(options.stop)
    writer.keep_for(options.parsed)


def run_runbook(
    loaded: LoadedRunbook,
    transports: Mapping[str, Callable[[], Transport]],
    lookup: Callable[[str], CollectorLike],
    options: RunOptions,
    out_dir: Path,
    forks: int = 16,
    on_host_done: Callable[[HostRun], None] | None = None,
    render_postmortem: Callable[[Path], str] | None = None,
    redact: Callable[[str], str] | None = None,
    extra_manifest: dict[str, Any] | None = None,
    start_order: Iterable[str] | None = None,
    writer: BundleWriter | None = None,
) -> tuple[list[HostRun], Path]:
    """Run on every host (bounded concurrency), in the order given; write one bundle.

    ``transports`` maps each host to a function that opens its transport (a bad host spec makes that host
    unreachable, not the run fail); ``lookup`` gives the collector of a kind. Returns the runs in the order
    of ``transports`` and the bundle's folder, which appears only complete; on Ctrl-C a partial bundle is
    saved and :class:`Interrupted` raised. ``redact`` scrubs every string written; ``render_postmortem`` adds
    ``postmortem.md``; ``extra_manifest`` adds manifest keys; ``start_order`` is the order hosts start in (a
    sweep's dialer's).
    """
    writer = writer or BundleWriter(out_dir, loaded.id, redact=redact)
    _starting(writer, options)
    writer.add_file(layout.RUNBOOK, loaded.as_ran())  # with any fragments' nodes written in
    names = list(transports)
    results: dict[str, HostRun] = {}
    opened: list[Transport] = []

    def one(name: str) -> HostRun:
        with flow.slot(options.stop) as admitted:
            if not admitted:
                raise KeyboardInterrupt  # stopped while waiting for a slot: this host never started
            return _one(name)

    def _one(name: str) -> HostRun:
        with options.inflight:
            transport = _open(name, transports[name])
            opened.append(transport)
            runner = HostRunner(loaded, transport, lookup, writer, options)
            try:
                run = runner.execute()
            except KeyboardInterrupt:
                # The very object: collectors still draining after the stop add to it before the save.
                results[name] = _interrupted_run(runner.run)
                raise
            run = results[name] = without_outputs(run)
        if on_host_done:
            on_host_done(run)
        return run

    if loaded.runbook.scope == "job":
        return _run_job(loaded, transports, lookup, options, writer, render_postmortem, extra_manifest)
    workers = max(1, min(forks, len(names) or 1))
    flow = AdaptiveLimit(workers, memory=options.flow_memory)  # hosts in flight: what this process keeps up with
    sampler = LagSampler(flow) if workers > 1 else contextlib.nullcontext()
    memory = options.flow_memory
    pool, collectors, collect_threads = _pools(workers, _collect_threads(loaded, lookup, options), memory)
    options = dataclasses.replace(options, collect_pool=collectors)
    finished = functools.partial(_in_order, results, names)
    try:
        start_workers(pool, workers)
        start_workers(collectors, collect_threads)
        with sampler:
            list(pool.map(one, _each_once(start_order, names)))
    except KeyboardInterrupt as exc:
        _drop_kept(memory)
        stopped = _Stopped(options, opened, (pool, collectors), isinstance(exc, Terminated))
        raise stopped.save(writer, finished, render_postmortem, extra_manifest) from None
    except Exception as exc:
        _drop_kept(memory, pool, collectors)
        _save_partial(exc, writer, finished())
        raise
    _release(memory, options, pool, collectors)
    runs = [results[n] for n in names]
    options.saving.set()
    if options.cursors is not None:  # what incremental reads carried, and why others were full (carried.json)
        options.cursors.add_to(writer)
    return runs, writer.finish(runs, render_postmortem=render_postmortem, extra=extra_manifest)


def _pools(
    workers: int, per_host: int, memory: FlowMemory | None
) -> tuple[ThreadPoolExecutor, ThreadPoolExecutor, int]:
    """The pool of hosts in flight, the pool their collectors run in, and that pool's size: new, or the ones a
    repeating caller's last run left idle (``memory``: engine/flow.FlowMemory)."""
    collect_threads = workers * per_host
    if memory is not None:
        return memory.pool("host", workers), memory.pool("collect", collect_threads), collect_threads
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="host")
    return pool, ThreadPoolExecutor(max_workers=collect_threads, thread_name_prefix="collect"), collect_threads


def _drop_kept(memory: FlowMemory | None, *pools: ThreadPoolExecutor) -> None:
    """End the pools (a run that failed or was stopped), the ones a repeating caller kept for its next run too."""
    if memory is not None:
        memory.drop_pools()
    _shut_down(*pools, wait=False)


def _release(memory: FlowMemory | None, options: RunOptions, *pools: ThreadPoolExecutor) -> None:
    """At a run's end its pools stay for a repeating caller's next run (``memory``), idle; without one, or with
    a collector still running (not the next run's to wait for), they end."""
    if memory is None or not options.inflight.wait_idle(0):
        _drop_kept(memory)
        _shut_down(*pools, wait=True)


def _in_order(results: Mapping[str, HostRun], names: Iterable[str]) -> list[HostRun]:
    """The runs that finished, in the order of the hosts given."""
    return [results[n] for n in names if n in results]


@dataclasses.dataclass(frozen=True)
class _Stopped:
    """A run (or a job) stopped by Ctrl-C or SIGTERM: what was opened and started, to stop before saving."""

    options: RunOptions
    opened: list[Transport]
    pools: tuple[ThreadPoolExecutor, ...]  # none for a job: its members run in the job runner's own threads
    terminated: bool

    def save(
        self,
        writer: BundleWriter,
        finished: Callable[[], list[HostRun]],
        render_postmortem: Callable[[Path], str] | None,
        extra_manifest: dict[str, Any] | None,
    ) -> Interrupted:
        """Stop the commands in flight, give them DRAIN_SECONDS, and save the hosts that finished by then
        as a partial bundle; the :class:`Interrupted` to raise."""
        _stop_own(self.options, self.opened)
        _shut_down(*self.pools, wait=False)
        self.options.inflight.wait_idle(DRAIN_SECONDS)
        done = finished()
        bundle = _finish_partial(writer, done, self.options, render_postmortem, extra_manifest)
        return Interrupted(done, bundle, self.terminated)


def _collect_threads(loaded: LoadedRunbook, lookup: Callable[[str], CollectorLike], options: RunOptions) -> int:
    """Collector threads per host: no host runs more commands at a time than its widest node has (derived
    collectors run no command), nor more than ``options.concurrency``."""
    widest = max((_commands_in(node.collect or [], lookup) for node in loaded.runbook.nodes.values()), default=1)
    return max(1, min(options.concurrency, widest))


def _shut_down(*pools: ThreadPoolExecutor, wait: bool) -> None:
    """Shut the pools down: waiting for their work, or cancelling what has not started."""
    for pool in pools:
        pool.shutdown(wait=wait, cancel_futures=not wait)


def _stop_own(options: RunOptions, opened: Iterable[Any]) -> None:
    """End this run only: its `wait:` pauses and its running commands (other runs in the process, a
    receiver's other captures, keep theirs; a signal handler closes every run's)."""
    options.stop.set()
    for transport in list(opened):
        with contextlib.suppress(Exception):
            _end(transport)


def _finish_partial(
    writer: BundleWriter,
    runs: list[HostRun],
    options: RunOptions,
    render_postmortem: Callable[[Path], str] | None,
    extra_manifest: dict[str, Any] | None,
) -> Path:
    """The partial bundle: its manifest written and the folder renamed into place, marked partial."""
    options.saving.set()
    return writer.finish(runs, partial=True, render_postmortem=render_postmortem, extra=extra_manifest)


def without_outputs(run: HostRun) -> HostRun:
    """The run as kept once its host is done: facts, path, verdict, argv and exit codes, not the raw
    outputs (they are in the bundle, written as each command returned). A sweep holds every host's run
    until its end; with the outputs that was 2.5 MB per real-size host, the largest share of its memory."""
    collections = {
        entry: dataclasses.replace(
            c, text="", attempts=[dataclasses.replace(a, stdout="", stderr="") for a in c.attempts]
        )
        for entry, c in run.collections.items()
    }
    return dataclasses.replace(run, collections=collections)


def _interrupted_run(run: HostRun) -> HostRun:
    """A host's walk cut by an interrupt: what it collected stays in the bundle, with no verdict."""
    run.status, run.verdict = "incomplete", None
    run.error = INTERRUPTED_REASON + (f" ({run.error})" if run.error else "")
    return run


def _commands_in(entries: list[str], lookup: Callable[[str], CollectorLike]) -> int:
    return sum(1 for entry in dict.fromkeys(entries) if not is_derived(lookup, entry))


def start_workers(pool: ThreadPoolExecutor, count: int) -> None:
    """Start the pool's threads now, before any host runs.

    A pool starts a thread per task as tasks come, and a starting thread must get the GIL to run; once
    the first hosts' SSH key exchanges hold it, each start waits its turn, and the last hosts of a wide
    sweep began seconds late. Each of ``count`` tasks holds its thread until all have started."""
    gate = threading.Barrier(count)

    def hold() -> None:
        with contextlib.suppress(threading.BrokenBarrierError):
            gate.wait(timeout=5)

    for future in [pool.submit(hold) for _ in range(count)]:
        future.result()


def _each_once(order: Iterable[str] | None, names: list[str]) -> Iterator[str]:
    """Every name exactly once: first in ``order`` (names it does not know are ignored), then the rest."""
    if order is None:
        yield from names
        return
    left = dict.fromkeys(names)
    for name in order:
        if name in left:
            del left[name]
            yield name
    yield from left


def _save_partial(exc: Exception, writer: BundleWriter, runs: list[HostRun]) -> None:
    """A bug mid-run still leaves the evidence collected so far; the caller says where (exit 70)."""
    with contextlib.suppress(Exception):  # the original error is the one to report
        exc.partial_bundle = writer.finish(runs, partial=True)  # type: ignore[attr-defined]


def _open(name: str, opener: Callable[[], Transport]) -> Transport:
    """The host's transport, named as the caller named it; a bad spec is that host's problem only."""
    try:
        transport = opener()
    except Exception as exc:  # noqa: BLE001
        return Unreachable(name, f"cannot open transport: {exc}")
    transport.host = name
    with _live_lock:
        _live.add(transport)
    return transport


def _run_job(
    loaded: LoadedRunbook,
    transports: Mapping[str, Callable[[], Transport]],
    lookup: Callable[[str], CollectorLike],
    options: RunOptions,
    writer: BundleWriter,
    render_postmortem: Callable[[Path], str] | None,
    extra_manifest: dict[str, Any] | None,
) -> tuple[list[HostRun], Path]:
    from nightowl.engine.job import JobRunner

    members = [_open(name, opener) for name, opener in transports.items()]
    runner = JobRunner(loaded, members, lookup, writer, options)

    def finished() -> list[HostRun]:
        return list(runner.member_runs.values())

    try:
        runs = runner.execute_job()
    except KeyboardInterrupt as exc:
        stopped = _Stopped(options, members, (), isinstance(exc, Terminated))
        raise stopped.save(writer, finished, render_postmortem, extra_manifest) from None
    except Exception as exc:
        _save_partial(exc, writer, finished())
        raise
    options.saving.set()
    return runs, writer.finish(runs, render_postmortem=render_postmortem, extra=extra_manifest)


def plan(
    loaded: LoadedRunbook,
    lookup: Callable[[str], CollectorLike],
    allow_invasive: bool,
    params: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Every command the runbook may run, per collect node, parameters filled in; connects to nothing."""
    from nightowl.engine.runner import resolve_argv

    values = loaded.resolve_params(params)
    steps = []
    for node_id, node in loaded.runbook.nodes.items():
        for entry in node.collect or []:
            kind = split_entry(entry)[0]
            collector = lookup(kind)
            commands = [list(argv) for t in collector.commands if (argv := resolve_argv(t, values))]
            derived_from = list(getattr(collector, "inputs", ()))
            steps.append(
                {
                    "node": node_id,
                    "collector": entry,
                    "invasive": collector.invasive,
                    "skipped": (collector.invasive and not allow_invasive) or not (commands or derived_from),
                    "derived_from": derived_from,
                    "timeout": collector.timeout,
                    "commands": commands,
                    "declared": [list(argv) for argv in collector.commands],
                }
            )
    return steps
