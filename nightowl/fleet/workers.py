"""A sweep spread over worker processes (`nightowl sweep --workers N`): past the one core a process gets.

One process reads its hosts' outputs, parses and scrubs them on one core (the GIL), so a sweep of
real-size hosts is CPU-bound long before the network is. Here the hosts are dealt round-robin to
``N`` worker processes (nightowl/fleet/shard.py), each with its own connections, its own flow control
(engine/flow.py) and its share of ``--forks``; each runs its hosts through the very code a one-process
sweep runs (``nightowl.run.run_and_save``) and writes their raw outputs into the sweep's one bundle
folder. The parent merges what they report in inventory order and writes the bundle's documents, so
the report, the textfile, the bundle and the exit status are what ``--workers 1`` gives.

The workers are forked from one fresh interpreter (``python -m nightowl.fleet.shard``, started as the
sweep begins, as multiprocessing's ``forkserver`` is): never a fork of the sweeping process, which holds
threads and connections, never a re-run of the caller's main module, and the imports paid once, not once
per worker. A worker that dies (killed, out of memory) costs only the hosts it had not finished: they
are "cannot judge" with the reason, never healthy and never a verdict about the node.
SIGINT/SIGTERM to the parent stop the workers; what they finished is saved, marked partial, as in one
process (exit 130/143).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pickle
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from nightowl.engine import layout
from nightowl.engine.bundle_writer import BundleWriter
from nightowl.engine.runner import HostRun
from nightowl.engine.session import DRAIN_SECONDS, Interrupted, Terminated
from nightowl.engine.validate import LoadedRunbook
from nightowl.fleet.shard import HostReport, ShardJob, exit_reason

# Test hook, hidden: "W:N" makes worker W SIGKILL itself as it opens its Nth host (tests/fleet/test_sweep_workers.py).
KILL_ENV = "NIGHTOWL_TEST_KILL_WORKER"
STOP_GRACE_SECONDS = DRAIN_SECONDS + 5.0  # a stopped worker's time to report what it had in progress


# A second worker costs about 0.25 to 0.3 s of CPU and 45 to 65 MB (bench/README.md, twelfth session: 16 real-size
# hosts took 8% less wall time over two workers, for 16% more CPU): below this many hosts for each, one more
# process costs more than it spreads.
HOSTS_PER_WORKER = 16


def default_workers(hosts: int | None = None) -> int:
    """One worker per core this process may run on (its CPU affinity, as a container or Slurm sets it),
    and no more than one per ``HOSTS_PER_WORKER`` of ``hosts`` when the count is known."""
    try:
        cores = max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        cores = max(1, os.cpu_count() or 1)
    return cores if hosts is None else max(1, min(cores, hosts // HOSTS_PER_WORKER))


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
    """How to spread a run: ``workers`` processes (or the pool started for them), the run's raw values (each
    worker resolves them as the parent did) and the connect timeout its dialer uses (None: no dialing ahead)."""

    workers: int | WorkerPool
    params: Mapping[str, Any]
    connect_timeout: float | None = None


class SweepWriter(BundleWriter):
    """The sweep's bundle writer in the parent: it writes the documents; the workers' reports bring what
    they wrote (``adopt``), as if this writer had recorded their commands itself."""

    cursors: Any = None  # the run's read positions (engine/incremental.py): the workers stage theirs here

    def adopt(self, report: HostReport) -> None:
        if report.cursors and self.cursors is not None:
            self.cursors.adopt(report.cursors)
        with self._lock:
            self.commands.extend(report.commands)
            self._stored.update(report.stored)  # their size and sha256: the manifest need not hash them again
        self.renamed.update(report.renamed)
        if report.write_error and self.write_error is None:
            self.write_error = report.write_error
        if self.parsed is not None:  # what the workers parsed, for this run's history and draft
            self.parsed.adopt(report.parsed)

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
        **run: Any,
    ) -> tuple[list[HostRun], Path]:
        """``run``: the keyword arguments ``run_and_save`` gives the engine, read by name (``forks``,
        ``on_host_done``, ``render_postmortem``, ``redact``, ``extra_manifest``), not
        a copy of its signature."""
        assert run.get("writer") is None, "the parent writes the bundle itself"
        redact = run.get("redact")
        writer = SweepWriter(out_dir, loaded.id, redact=redact)
        writer.add_file(layout.RUNBOOK, loaded.as_ran())  # with any fragments' nodes written in
        writer.cursors = getattr(options, "cursors", None)
        writer.keep_for(getattr(options, "parsed", None))
        names = list(transports)
        pool = self.plan.workers if isinstance(self.plan.workers, WorkerPool) else WorkerPool(self.plan.workers)
        jobs = self._jobs(loaded, transports, options, writer, run.get("forks", 16), pool.count, redact is not None)
        sweep = _Sweep(pool, jobs, writer, run.get("on_host_done"))
        try:
            return self._sweep(sweep, names, writer, options, run.get("render_postmortem"), run.get("extra_manifest"))
        finally:
            pool.close()

    def _sweep(
        self,
        sweep: _Sweep,
        names: list[str],
        writer: SweepWriter,
        options: Any,
        render_postmortem: Callable[[Path], str] | None,
        extra_manifest: dict[str, Any] | None,
    ) -> tuple[list[HostRun], Path]:
        """The workers' run, then the bundle; partial (and Interrupted) on a signal, as run_runbook does."""
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
        if writer.cursors is not None:  # what the workers' incremental reads carried (carried.json)
            writer.cursors.add_to(writer)
        bundle = writer.finish(_ordered(runs, names, writer), render_postmortem=render_postmortem, extra=extra_manifest)
        return runs, bundle

    def _jobs(
        self,
        loaded: LoadedRunbook,
        transports: Mapping[str, Callable[[], Any]],
        options: Any,
        writer: BundleWriter,
        forks: int,
        workers: int,
        redact: bool,
    ) -> list[ShardJob]:
        """The hosts dealt round-robin (a block of dead hosts in the inventory is shared out too)."""
        from nightowl.run import RunSettings

        names = list(transports)
        count = max(1, min(workers, len(names), forks))  # no worker without a host, nor one with no fork
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
                    settings=RunSettings(
                        allow_invasive=options.allow_invasive,
                        command_timeout=options.command_timeout,
                        host_timeout=options.host_timeout,
                        forks=share,
                        redact=redact,
                    ),
                    parsed_kinds=getattr(getattr(options, "parsed", None), "kinds", frozenset()),
                    connect_timeout=self.plan.connect_timeout,
                    kill_at=kill.get(number),
                    cursors=getattr(getattr(writer, "cursors", None), "origin", None),
                    full_read=bool(getattr(getattr(writer, "cursors", None), "full", False)),
                    full_every=getattr(getattr(writer, "cursors", None), "full_every", None),
                )
            )
        return jobs


class WorkerFailed(RuntimeError):
    """A worker process hit a bug (its traceback is the message): the run fails as one process would (exit 70)."""


class WorkerPool:
    """The worker processes' parent (nightowl/fleet/shard.py ``main``), started ahead: a fresh interpreter
    that loads what a worker needs while this process reads the runbook and the inventory, then forks
    one worker per job (so the loading is paid once, not once per worker). Pipes: the jobs down, each
    worker's reports up (one pipe each), and the workers' pids and exit statuses up."""

    def __init__(self, count: int) -> None:
        self.count = count
        job_read, job_write = os.pipe()
        status_read, status_write = os.pipe()
        pipes = [os.pipe() for _ in range(count)]
        theirs = (job_read, status_write, *(write for _, write in pipes))
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "nightowl.fleet.shard", *map(str, theirs)],
                pass_fds=theirs,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,  # stdout is the report's; its stderr is ours (a warning is seen)
            )
        finally:
            for fd in theirs:
                os.close(fd)  # only the pool holds them: a worker's exit is our end-of-file
        self.feed = Connection(job_write, readable=False)
        self.status = Connection(status_read, writable=False)
        self.reports = {number: Connection(read, writable=False) for number, (read, _) in enumerate(pipes, start=1)}
        self.pids: dict[int, int] = {}
        self.exits: dict[int, int] = {}

    def start(self, jobs: list[ShardJob]) -> dict[Connection, int]:
        """Hand the jobs over (after ``sys.path``, so a worker unpickles what this process can: a test's
        openers); returns the report pipes of the workers started, by worker number."""
        with self.feed:
            self.feed.send(sys.path)
            self.feed.send(jobs)
        numbers = {job.number for job in jobs}
        for number, conn in list(self.reports.items()):
            if number not in numbers:
                conn.close()
                del self.reports[number]
        return {conn: number for number, conn in self.reports.items()}

    def _read_status(self, timeout: float) -> bool:
        if not self.status.poll(timeout):
            return False
        try:
            message = self.status.recv()
        except (EOFError, OSError):
            return False
        if message[0] == "pids":
            self.pids.update(message[1])
        elif message[0] == "exit":
            self.exits[message[1]] = message[2]
        return True

    def exit_status(self, number: int, timeout: float = 5.0) -> int | None:
        """Worker ``number``'s ``os.waitpid`` status once it exited (None: not known within ``timeout``)."""
        deadline = time.monotonic() + timeout
        while number not in self.exits and self._read_status(max(0.0, deadline - time.monotonic())):
            pass
        return self.exits.get(number)

    def pid(self, number: int) -> int | None:
        while not self.pids and self._read_status(5.0):
            pass
        return self.pids.get(number)

    def signal(self, numbers: list[int], signum: int) -> None:
        for number in numbers:
            pid = self.pid(number)
            if pid is not None and number not in self.exits:
                with contextlib.suppress(OSError):
                    os.kill(pid, signum)

    def close(self) -> None:
        """No more jobs: a pool never given any exits; one whose workers ran is reaped."""
        self.feed.close()
        for conn in self.reports.values():
            conn.close()
        try:
            self.process.wait(timeout=STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            self.signal([n for n in self.pids if n not in self.exits], signal.SIGKILL)
            self.process.kill()
            self.process.wait()
        self.status.close()


class _Sweep:
    """The parent's side: hand the jobs to the pool, take the reports as they come, notice workers that die."""

    def __init__(
        self,
        pool: WorkerPool,
        jobs: list[ShardJob],
        writer: SweepWriter,
        on_host_done: Callable[[HostRun], None] | None,
    ) -> None:
        self.pool, self.jobs, self.writer, self.on_host_done = pool, jobs, writer, on_host_done
        self.results: dict[str, HostRun] = {}
        self.conns: dict[Connection, int] = {}  # open report pipe -> worker number
        self.ended: set[int] = set()  # workers that said they were done (or stopped)

    def run(self) -> None:
        self.conns = self.pool.start(self.jobs)
        while self.conns:
            self._take(wait(list(self.conns)))

    def _take(self, ready: list[Any]) -> None:
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

    def _gone(self, conn: Connection, number: int) -> None:
        """A worker's pipe closed: if it had not said it was done, it died; its unfinished hosts cannot be judged."""
        del self.conns[conn]
        conn.close()
        if number in self.ended:
            return
        how = exit_reason(self.pool.exit_status(number))
        pid = self.pool.pid(number)
        reason = f"cannot judge: worker process {number} (pid {pid}) {how} before judging this host"
        job = next(j for j in self.jobs if j.number == number)
        for name in job.openers:
            if name not in self.results:
                self._add(HostReport(HostRun(host=name, status="incomplete", error=reason), [], {}, None))

    def stop(self, signum: int) -> None:
        """Stop every worker still running and take what it reports, for a few seconds at most."""
        self.pool.signal([n for n in self.conns.values() if n not in self.ended], signum)
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        while self.conns and (left := deadline - time.monotonic()) > 0:
            with contextlib.suppress(WorkerFailed):
                self._take(wait(list(self.conns), timeout=left))
        self.pool.signal([n for n in self.pool.pids if n not in self.pool.exits], signal.SIGKILL)


def _ordered(runs: list[HostRun], names: list[str], writer: SweepWriter) -> list[HostRun]:
    """``runs`` for ``finish``, the manifest's commands put in inventory order first."""
    writer.in_inventory_order(names)
    return runs


def _picklable(transports: Mapping[str, Callable[[], Any]]) -> bool:
    try:
        pickle.dumps(dict(transports))
    except (pickle.PicklingError, AttributeError, TypeError):
        return False
    return True


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
    workers: int | WorkerPool | None,
    params: Mapping[str, Any],
    connect_timeout: float | None = None,
) -> WorkerEngine | None:
    """The engine spreading ``transports`` over ``workers`` processes (a count, or the pool `start_pool`
    started), or None for the one-process run: one worker asked, a single host, a ``scope: job`` runbook
    (its members are judged together, in one walk), or openers a worker process cannot be sent (a Python
    caller's lambdas: the same run, in this process). A pool not used is closed here."""
    count = workers.count if isinstance(workers, WorkerPool) else workers or 1
    if count <= 1 or len(transports) <= 1 or loaded.runbook.scope == "job" or not _picklable(transports):
        if isinstance(workers, WorkerPool):
            workers.close()
        return None
    return WorkerEngine(WorkerPlan(workers or 1, dict(params), connect_timeout))


def start_pool(workers: int) -> WorkerPool | None:
    """The workers' pool started now, for ``workers`` > 1 (its interpreter loads while this one reads the
    runbook and the inventory); None for one worker (the run stays in this process)."""
    return WorkerPool(workers) if workers > 1 else None
