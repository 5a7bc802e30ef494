"""One worker process of a sweep spread over processes (nightowl/fleet/workers.py): its share of the hosts.

A worker runs its hosts through ``nightowl.run.run_and_save`` exactly as a one-process sweep runs all of
them (its own connections, its own flow control, its share of ``--forks``), with one difference: its
bundle writer (:class:`ShardWriter`) writes each host's raw outputs straight into the sweep's bundle
folder and never finishes a bundle of its own. The moment a host is judged, the worker sends the parent
that host's run and manifest entries, so a worker that dies later (killed, out of memory) has lost
nothing it finished: the outputs are on disk and the verdict is with the parent.

Messages to the parent (one pipe per worker): ``("host", HostReport)`` per host judged, then one of
``("end", None)``, ``("stopped", [HostReport, ...])`` (a signal stopped it; the hosts it had in progress)
or ``("crash", traceback text)`` (a bug).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import gc
import os
import shutil
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nightowl.engine import layout
from nightowl.engine.bundle_writer import BundleWriter
from nightowl.engine.parse_memo import HandedOver
from nightowl.engine.runner import HostRun
from nightowl.engine.session import without_outputs
from nightowl.engine.validate import LoadedRunbook

if TYPE_CHECKING:
    from nightowl.run import RunSettings  # run.py imports no fleet module: no cycle


@dataclass(frozen=True)
class HostReport:
    """What the parent needs of one host a worker ran: its run (raw outputs left out: they are in the
    bundle), the manifest entries of its commands, the first takes a second take renamed, the size and
    sha256 of each file written (so the parent need not hash them again), the worker's write error if its
    disk refused a write, and the parse results the parent's readers will ask for (engine/parse_memo.py: the
    parent's history and draft read the bundle back, and would parse every output again)."""

    run: HostRun
    commands: list[dict[str, Any]]
    renamed: dict[str, str]
    write_error: str | None
    stored: dict[str, tuple[int, str]] = field(default_factory=dict)
    parsed: HandedOver = field(default_factory=HandedOver)
    cursors: list[dict[str, Any]] = field(default_factory=list)  # read positions staged (engine/incremental.py)


@dataclass(frozen=True)
class ShardJob:
    """Everything a worker needs, sent to it once (pickled): the runbook, its hosts in inventory order
    (name -> picklable function opening the transport), the run's values and where the bundle is."""

    number: int  # 1-based, as the report names it
    runbook: LoadedRunbook
    openers: dict[str, Callable[[], Any]]
    bundle_tmp: Path  # the sweep's bundle folder while it is written (BundleWriter.tmp_path)
    run_id: str
    params: dict[str, Any]
    settings: RunSettings  # the parent's, with this worker's share of --forks
    parsed_kinds: frozenset[str] = frozenset()  # what the parent's readers read back (its RunContext's)
    connect_timeout: float | None = None  # set: the worker dials its direct hosts ahead (transports/dial.py)
    kill_at: int | None = None  # test hook: SIGKILL itself when opening its Nth host (workers.KILL_ENV)
    cursors: Path | None = None  # the history store whose read positions the hosts start from (None: full reads)
    full_read: bool = False  # --full: every read is full (positions are still staged)
    full_every: float | None = None  # --full-every, in seconds: cheap-first sources read whole after it


class ShardWriter(BundleWriter):
    """A bundle writer whose folder is the sweep's own (being written by the parent): raw outputs go there
    as they arrive; the JSON documents and the rename are the parent's (``finish`` writes nothing)."""

    def __init__(
        self,
        bundle_tmp: Path,
        runbook_id: str,
        run_id: str,
        number: int,
        redact: Callable[[str], str] | None = None,
    ) -> None:
        # The base class makes a folder of its own (named per worker, so workers never race for it): unused.
        scratch = f"{run_id}.worker-{number}"
        super().__init__(bundle_tmp, runbook_id, run_id=scratch, redact=redact)
        shutil.rmtree(self.tmp_path, ignore_errors=True)
        self.run_id, self.tmp_path, self.final_path = run_id, bundle_tmp, bundle_tmp
        self._cursor = 0  # commands[:_cursor] are sorted into _by_host already
        self._by_host: dict[str, list[dict[str, Any]]] = {}

    def take(self, run: HostRun) -> HostReport:
        """The report of a host whose walk ended: its manifest entries (each once) and renamed first takes."""
        with self._lock:
            for entry in self.commands[self._cursor :]:
                self._by_host.setdefault(entry["host"], []).append(entry)
            self._cursor = len(self.commands)
            commands = self._by_host.pop(run.host, [])
            folder = layout.host_folder(run.host) + "/"
            # Taken out: what is left is the files of hosts still running (a few), not the whole sweep's.
            stored = {rel: self._stored.pop(rel) for rel in [r for r in self._stored if r.startswith(folder)]}
        renamed = {first: then for first, then in self.renamed.items() if first.startswith(folder)}
        handed = self.parsed.hand_over() if self.parsed is not None else HandedOver()
        report = HostReport(without_outputs(run), commands, renamed, self.write_error, stored, handed)
        return report

    def add_file(self, name: str, text: str) -> None:
        """The bundle's top-level files (``runbook.yaml``) are the parent's: written once, by it."""

    def finish(self, runs: list[HostRun], partial: bool = False, *_drafts: Any, **_manifest: Any) -> Path:
        """Nothing to write: the parent writes the bundle's documents once every worker reported."""
        with self._lock:
            self._finished = True
        return self.tmp_path


# What a worker needs loaded before its first host: imported once, in the process the workers fork from.
# paramiko is imported, not used: no connection, no thread exists before the forks.
PRELOAD = (
    "nightowl.run",
    "nightowl.collectors",
    "nightowl.history.extract",
    "nightowl.history.cursors",
    "nightowl.redact",
    "nightowl.transports.ssh",
    "nightowl.transports.dial",
    "nightowl.transports.paramiko_import",
)


def main(argv: list[str]) -> None:
    """``python -m nightowl.fleet.shard JOB_FD STATUS_FD REPORT_FD...``: the process workers fork from.

    A fresh interpreter (never a fork of the caller, which holds threads and connections) that loads what a
    worker needs while the caller reads its runbook and inventory, then waits for the jobs (after the
    caller's ``sys.path``) on JOB_FD. It forks one worker per job while it is itself one thread with no
    connection open (as multiprocessing's forkserver does), worker N reporting on the Nth REPORT_FD; it
    tells the caller on STATUS_FD each worker's pid, then how each ended (``os.waitpid`` status), and
    exits when they all have. No job (the caller ran in one process after all, or is gone): it exits."""
    import importlib
    from multiprocessing.connection import Connection

    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    feed, status = Connection(int(argv[0]), writable=False), Connection(int(argv[1]), readable=False)
    reports = [int(fd) for fd in argv[2:]]
    try:
        sys.path[:] = feed.recv()
        jobs: list[ShardJob] = feed.recv()
    except (EOFError, OSError):
        os._exit(0)
    feed.close()
    if jobs:  # every collector the runbook names loaded (and its parameters checked) once, not per worker
        from nightowl.run import resolve_params

        with contextlib.suppress(Exception):  # each worker checks again and reports what is wrong
            resolve_params(jobs[0].runbook, jobs[0].params)
    # The loaded modules and runbook are shared with every worker: frozen out of the collector's sight, a
    # collection in a worker does not write to (and so copy) each of their pages (copy-on-write).
    gc.collect()
    gc.freeze()
    pids = {}
    for job in jobs:
        pid = os.fork()
        if pid == 0:  # the worker: only its own report pipe stays open
            signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the run's handlers take it (nightowl.run)
            status.close()
            for fd in reports:
                if fd != reports[job.number - 1]:
                    os.close(fd)
            shard_main(Connection(reports[job.number - 1], readable=False), job)
        pids[pid] = job.number
    for fd in reports:
        os.close(fd)  # only the workers hold them now: a worker's exit is the caller's end-of-file
    with contextlib.suppress(OSError):
        status.send(("pids", {number: pid for pid, number in pids.items()}))
    while pids:
        pid, code = os.waitpid(-1, 0)
        with contextlib.suppress(OSError):
            status.send(("exit", pids.pop(pid, 0), code))
    os._exit(0)


def shard_main(conn: Any, job: ShardJob) -> None:
    """The worker process: run ``job``'s hosts, reporting each to the parent as it ends (``conn``)."""
    from nightowl.engine.context import RunContext
    from nightowl.history import cursors as positions
    from nightowl.run import Interrupted, RunHooks, run_and_save

    scrub = _redaction() if job.settings.redact else None
    writer = ShardWriter(job.bundle_tmp, job.runbook.id, job.run_id, job.number, scrub)
    sending = threading.Lock()
    sent: set[str] = set()

    def send(message: tuple[str, Any]) -> None:
        with sending:
            conn.send(message)

    book = positions.book(job.cursors, job.full_read, job.full_every)

    def host_done(run: HostRun) -> None:
        report = writer.take(run)
        if book is not None:  # the parent saves them once the bundle is written
            report = dataclasses.replace(report, cursors=book.entries_for(run.host))
        send(("host", report))
        sent.add(run.host)

    transports, dialer = _transports(job)
    try:
        run_and_save(
            job.runbook,
            transports,
            job.bundle_tmp,
            params=job.params,
            # drafts, status update and history are the parent's; the parse results go to it (HostReport.parsed)
            settings=dataclasses.replace(job.settings, drafts=False, status_update=False, history=False),
            hooks=RunHooks(
                on_host_done=host_done,
                start_order=dialer.start_order(transports) if dialer is not None else None,
                writer=writer,
                cursors=book,
            ),
            context=RunContext().for_run(job.parsed_kinds),
        )
    except Interrupted as exc:
        with contextlib.suppress(OSError):
            send(("stopped", [writer.take(run) for run in exc.runs if run.host not in sent]))
    except BaseException as exc:  # noqa: BLE001 - a bug here is the parent's to report (exit 70), with the traceback
        if not isinstance(exc, OSError) or exc.errno != errno.EPIPE:  # the parent is gone: nobody to tell
            with contextlib.suppress(OSError):
                send(("crash", traceback.format_exc()))
    else:
        with contextlib.suppress(OSError):
            send(("end", None))
    finally:
        if dialer is not None:
            dialer.close()
        conn.close()
    os._exit(0)  # at once: a collector thread still running after a stop must not hold the exit


def exit_reason(status: int | None) -> str:
    """How a worker ended, from its ``os.waitpid`` status (None: not known)."""
    if status is None:
        return "exited"
    if os.WIFSIGNALED(status):
        return f"exited with signal {os.WTERMSIG(status)}"
    return f"exited with status {os.waitstatus_to_exitcode(status)}"


def _transports(job: ShardJob) -> tuple[dict[str, Callable[[], Any]], Any]:
    """The worker's transports: each opener as given, with the TCP connection this worker's own dialer
    opened ahead for the hosts it reaches directly; the test hook's kill at the Nth host opened."""
    dialer = None
    targets = {name: t for name, o in job.openers.items() if (t := getattr(o, "target", None)) is not None}
    openers: Mapping[str, Callable[[], Any]] = job.openers
    if targets and job.connect_timeout is not None:
        from nightowl.transports.dial import Dialer

        dialer = Dialer(targets, job.connect_timeout, window=2 * max(1, job.settings.forks))
        openers = {n: o.dialing(dialer.taker(n)) if n in targets else o for n, o in job.openers.items()}  # type: ignore[attr-defined]
    if job.kill_at is None:
        return dict(openers), dialer
    opened = iter(range(1, len(openers) + 1))
    lock = threading.Lock()

    def killing(opener: Callable[[], Any]) -> Callable[[], Any]:
        def open_it() -> Any:
            with lock:
                if next(opened) == job.kill_at:
                    os.kill(os.getpid(), signal.SIGKILL)
            return opener()

        return open_it

    return {name: killing(opener) for name, opener in openers.items()}, dialer


def _redaction() -> Callable[[str], str]:
    from nightowl.redact import scrub_secrets

    return scrub_secrets


if __name__ == "__main__":
    # The sweep decides when its workers stop (a Ctrl-C or a cgroup's SIGTERM reaches this process too): this
    # one stays to report how each worker ended; a worker's own run handles both signals (nightowl.run).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    from nightowl.fleet import shard  # the module by its name, so what it sends unpickles as nightowl's

    shard.main(sys.argv[1:])
