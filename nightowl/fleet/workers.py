"""A sweep spread over worker processes (`nightowl sweep --workers N`): past the one core a process gets.

One process reads its hosts' outputs, parses and scrubs them on one core (the GIL), so a sweep of
real-size hosts is CPU-bound long before the network is. Here the hosts are dealt round-robin to
``N`` worker processes (nightowl/fleet/shard.py), each with its own connections, its own flow control
(engine/flow.py) and its share of ``--forks``; each runs its hosts through the very code a one-process
sweep runs (``nightowl.run.run_and_save``) and writes their raw outputs into the sweep's one bundle
folder. The parent merges what they report in inventory order and writes the bundle's documents, so
the report, the textfile, the bundle and the exit status are what ``--workers 1`` gives.

Each worker is a fresh interpreter (``python -m nightowl.fleet.shard``, as multiprocessing's ``spawn``):
never a fork of a process that holds threads or paramiko's state, and never a re-run of the caller's
main module. A worker that dies (killed, out of memory) costs only the hosts it had
not finished: they are "cannot judge" with the reason, never healthy and never a verdict about the node.
SIGINT/SIGTERM to the parent stop the workers; what they finished is saved, marked partial, as in one
process (exit 130/143).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from nightowl.engine import layout, parse_memo
from nightowl.engine.bundle_writer import BundleWriter
from nightowl.engine.runner import HostRun
from nightowl.engine.session import DRAIN_SECONDS, Interrupted, Terminated
from nightowl.engine.validate import LoadedRunbook
from nightowl.fleet.shard import HostReport, ShardJob

# Test hook, hidden: "W:N" makes worker W SIGKILL itself as it opens its Nth host (tests/fleet/test_sweep_workers.py).
KILL_ENV = "NIGHTOWL_TEST_KILL_WORKER"
STOP_GRACE_SECONDS = DRAIN_SECONDS + 5.0  # a stopped worker's time to report what it had in progress


def default_workers() -> int:
    """One worker per core this process may run on (its CPU affinity, as a container or Slurm sets it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def split(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` shares as even as can be, each at least 1 (``--forks`` over workers)."""
    base, extra = divmod(max(total, parts), parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


@dataclass(frozen=True)
class HostOpener:
    """Opens one inventory host's transport; picklable, so a worker process can open it itself.

    ``dial`` is the TCP connection a dialer opened ahead (transports/dial.py), set in the process that
    runs the host (``dialing``); ``target`` is the address a dialer may open for it (None: a jump host's
    targets, ``local``, a host whose entry could not be read, which connect as they always do)."""

    host: Any  # transports.hostspec.HostSpec
    options: Any  # transports.ssh.SSHOptions
    dial: Callable[[], Any] | None = None

    def __call__(self) -> Any:
        from nightowl.transports import transport_for

        return transport_for(self.host, self.options, self.dial)

    @property
    def target(self) -> tuple[str, int] | None:
        host = self.host
        if host.is_local or host.jump is not None or host.problem:
            return None
        return host.hostname, host.port

    def dialing(self, dial: Callable[[], Any] | None) -> HostOpener:
        return dataclasses.replace(self, dial=dial)


@dataclass(frozen=True)
class WorkerPlan:
    """How to spread a run: ``workers`` processes, the run's raw values (each worker resolves them as the
    parent did) and the connect timeout its dialer uses (None: no dialing ahead)."""

    workers: int
    params: Mapping[str, Any]
    connect_timeout: float | None = None


class SweepWriter(BundleWriter):
    """The sweep's bundle writer in the parent: it writes the documents; the workers' reports bring what
    they wrote (``adopt``), as if this writer had recorded their commands itself."""

    def adopt(self, report: HostReport) -> None:
        with self._lock:
            self.commands.extend(report.commands)
            self._stored.update(report.stored)  # their size and sha256: the manifest need not hash them again
        self.renamed.update(report.renamed)
        if report.write_error and self.write_error is None:
            self.write_error = report.write_error
        parse_memo.adopt(report.parsed)

    def in_inventory_order(self, names: list[str]) -> None:
        """The manifest's commands grouped by host in inventory order (each host's in the order it ran them),
        so the bundle does not depend on which worker answered first."""
        order = {name: i for i, name in enumerate(names)}
        with self._lock:
            self.commands.sort(key=lambda entry: order.get(entry["host"], len(order)))


class WorkerEngine:
    """``engine.session.run_runbook``'s stand-in for ``nightowl.run.run_and_save(engine=...)``: the same
    arguments and result (the runs in inventory order and the bundle), the hosts run in worker processes."""

    def __init__(self, plan: WorkerPlan) -> None:
        self.plan = plan

    def __call__(
        self,
        loaded: LoadedRunbook,
        transports: Mapping[str, Callable[[], Any]],
        lookup: Any,
        options: Any,
        out_dir: Path,
        forks: int = 16,
        on_host_done: Callable[[HostRun], None] | None = None,
        render_postmortem: Callable[[Path], str] | None = None,
        redact: Callable[[str], str] | None = None,
        redact_prefilter: Callable[[str], bool] | None = None,
        extra_manifest: dict[str, Any] | None = None,
        start_order: Any = None,
        writer: BundleWriter | None = None,
    ) -> tuple[list[HostRun], Path]:
        assert writer is None, "the parent writes the bundle itself"
        writer = SweepWriter(out_dir, loaded.id, redact=redact, redact_prefilter=redact_prefilter)
        writer.add_file(layout.RUNBOOK, loaded.path.read_text())
        names = list(transports)
        jobs = self._jobs(loaded, transports, options, writer, forks, redact is not None)
        sweep = _Sweep(jobs, writer, on_host_done)
        try:
            sweep.run()
        except KeyboardInterrupt as exc:
            sweep.stop(signal.SIGTERM)
            done = [sweep.results[n] for n in names if n in sweep.results]
            options.saving.set()
            bundle = writer.finish(
                _ordered(done, names, writer), partial=True, render_postmortem=render_postmortem, extra=extra_manifest
            )
            raise Interrupted(done, bundle, isinstance(exc, Terminated)) from None
        except WorkerFailed as exc:
            sweep.stop(signal.SIGTERM)
            with contextlib.suppress(Exception):  # the worker's error is the one to report (exit 70)
                done = [sweep.results[n] for n in names if n in sweep.results]
                exc.partial_bundle = writer.finish(_ordered(done, names, writer), partial=True)  # type: ignore[attr-defined]
            raise
        runs = [sweep.results[n] for n in names]
        options.saving.set()
        bundle = writer.finish(_ordered(runs, names, writer), render_postmortem=render_postmortem, extra=extra_manifest)
        return runs, bundle

    def _jobs(
        self,
        loaded: LoadedRunbook,
        transports: Mapping[str, Callable[[], Any]],
        options: Any,
        writer: BundleWriter,
        forks: int,
        redact: bool,
    ) -> list[ShardJob]:
        """The hosts dealt round-robin (a block of dead hosts in the inventory is shared out too)."""
        names = list(transports)
        count = max(1, min(self.plan.workers, len(names)))
        kill = _kill_hook()
        jobs = []
        for number, share in enumerate(split(forks, count), start=1):
            mine = names[number - 1 :: count]
            jobs.append(
                ShardJob(
                    number=number,
                    runbook=loaded,
                    openers={name: transports[name] for name in mine},
                    bundle_tmp=writer.tmp_path,
                    run_id=writer.run_id,
                    params=dict(self.plan.params),
                    allow_invasive=options.allow_invasive,
                    command_timeout=options.command_timeout,
                    host_timeout=options.host_timeout,
                    forks=share,
                    redact=redact,
                    connect_timeout=self.plan.connect_timeout,
                    kill_at=kill.get(number),
                )
            )
        return jobs


class WorkerFailed(RuntimeError):
    """A worker process hit a bug (its traceback is the message): the run fails as one process would (exit 70)."""


class _Sweep:
    """The parent's side: start the workers, take their reports as they come, notice the ones that die."""

    def __init__(self, jobs: list[ShardJob], writer: SweepWriter, on_host_done: Callable[[HostRun], None] | None):
        self.jobs, self.writer, self.on_host_done = jobs, writer, on_host_done
        self.results: dict[str, HostRun] = {}
        self.processes: dict[int, Any] = {}
        self.conns: dict[Any, int] = {}  # open pipe -> worker number
        self.ended: set[int] = set()  # workers that said they were done (or stopped)

    def run(self) -> None:
        feeds = []
        for job in self.jobs:
            feed, conn, process = _start(job.number)
            self.processes[job.number], self.conns[conn] = process, job.number
            feeds.append((feed, job))
        for feed, job in feeds:  # all started first: each reads its job while the next starts
            with feed:
                feed.send(sys.path)  # so the worker unpickles what this process can (a test's openers)
                feed.send(job)
        while self.conns:
            self._take(wait(list(self.conns)))

    def _take(self, ready: list[Any], deadline: float | None = None) -> None:
        for conn in ready:
            number = self.conns[conn]
            try:
                kind, body = conn.recv()
            except (EOFError, OSError):
                self._gone(conn, number)
                continue
            if kind == "host":
                self._add(body)
            elif kind == "stopped":
                for report in body:
                    self._add(report, progress=False)
                self.ended.add(number)
            elif kind == "end":
                self.ended.add(number)
            elif kind == "crash":
                self.ended.add(number)
                raise WorkerFailed(f"worker process {number} failed:\n{body}")

    def _add(self, report: HostReport, progress: bool = True) -> None:
        run = report.run
        self.writer.adopt(report)
        self.results[run.host] = run
        if progress and self.on_host_done is not None:
            self.on_host_done(run)

    def _gone(self, conn: Any, number: int) -> None:
        """A worker's pipe closed: if it had not said it was done, it died; its unfinished hosts cannot be judged."""
        del self.conns[conn]
        conn.close()
        process = self.processes[number]
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)
        if number in self.ended:
            return
        code = process.returncode
        how = f"exited with signal {-code}" if code is not None and code < 0 else f"exited with status {code}"
        reason = f"cannot judge: worker process {number} (pid {process.pid}) {how} before judging this host"
        job = next(j for j in self.jobs if j.number == number)
        for name in job.openers:
            if name not in self.results:
                self._add(HostReport(HostRun(host=name, status="incomplete", error=reason), [], {}, None))

    def stop(self, signum: int) -> None:
        """Stop every worker still running and take what it reports, for a few seconds at most."""
        for number, process in self.processes.items():
            if number not in self.ended and process.poll() is None:
                with contextlib.suppress(OSError):
                    process.send_signal(signum)
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        while self.conns and (left := deadline - time.monotonic()) > 0:
            with contextlib.suppress(WorkerFailed):
                self._take(wait(list(self.conns), timeout=left))
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=1)


def _ordered(runs: list[HostRun], names: list[str], writer: SweepWriter) -> list[HostRun]:
    """``runs`` for ``finish``, the manifest's commands put in inventory order first."""
    writer.in_inventory_order(names)
    return runs


def _start(number: int) -> tuple[Connection, Connection, subprocess.Popen[bytes]]:
    """Worker ``number`` started: the pipe its job goes down, the pipe its reports come up, its process.
    Its stdout is not ours (the report is); its stderr is (a warning reaches the operator)."""
    job_read, job_write = os.pipe()
    report_read, report_write = os.pipe()
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "nightowl.fleet.shard", str(job_read), str(report_write), str(number)],
            pass_fds=(job_read, report_write),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
    finally:
        os.close(job_read)
        os.close(report_write)  # only the worker holds the sending end: its exit is our end-of-file
    return Connection(job_write, readable=False), Connection(report_read, writable=False), process


def _kill_hook() -> dict[int, int]:
    """``NIGHTOWL_TEST_KILL_WORKER=W:N[,W:N]``: worker W kills itself at its Nth host (tests only)."""
    hook: dict[int, int] = {}
    for part in filter(None, os.environ.get(KILL_ENV, "").split(",")):
        worker, _, nth = part.partition(":")
        with contextlib.suppress(ValueError):
            hook[int(worker)] = int(nth)
    return hook


def engine_for(
    loaded: LoadedRunbook,
    transports: Mapping[str, Callable[[], Any]],
    workers: int,
    params: Mapping[str, Any],
    connect_timeout: float | None = None,
) -> WorkerEngine | None:
    """The engine spreading ``transports`` over ``workers`` processes, or None for the one-process run: one
    worker asked, a single host, or a ``scope: job`` runbook (its members are judged together, in one walk)."""
    if workers <= 1 or len(transports) <= 1 or loaded.runbook.scope == "job":
        return None
    return WorkerEngine(WorkerPlan(workers, dict(params), connect_timeout))
