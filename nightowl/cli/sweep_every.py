"""`nightowl sweep --every SECONDS`: the same sweep again and again in one process, its connections kept.

A sweep run from cron starts an interpreter, loads the runbook and dials every host each time; once only the
news is read (docs/reference.md#incremental-reads) that start and the SSH handshakes are most of a steady
round's cost. Repeated here, each round is an ordinary sweep (its own bundle, report, textfile, the one
history store) whose hosts are reached over the connections the last round left open
(nightowl/transports/kept.py); a host whose connection was lost is dialed again, and that round's report
says how many were kept and opened (``round`` in the JSON). A round also starts with as many hosts in flight
as the last one ended with (engine/flow.FlowMemory), not ramping up from a few again. The first round, which
reads every host in full, is an ordinary sweep over ``--workers`` processes; the later ones run in this process,
a worker process's connections ending with it.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import click

from nightowl.cli.exit import ExitStatus
from nightowl.engine import same_file, same_text
from nightowl.engine.flow import FlowMemory
from nightowl.transports.kept import KeptConnections


@dataclass(frozen=True)
class Rounds:
    """How often (``every`` seconds from one round's start to the next) and how many (0: until stopped)."""

    every: float
    count: int = 0

    def last(self, number: int) -> bool:
        return bool(self.count) and number >= self.count


def batchable_kinds(loaded: Any) -> frozenset[str]:
    """The kinds whose reads a kept connection may send in a batch (transports/kept.py): the collectors of the
    runbook's first node that run commands and change nothing (never an invasive one), asked of every host
    every round; a read only a branch asks is never sent unasked."""
    from nightowl.collectors import get_collector
    from nightowl.engine.runbook_data import split_entry

    node = loaded.runbook.nodes.get(loaded.runbook.entry)
    kinds = set()
    for entry in getattr(node, "collect", None) or []:
        try:
            collector = get_collector(split_entry(entry)[0])
        except (KeyError, ValueError):
            continue
        if getattr(collector, "commands", None) and not collector.invasive and not getattr(collector, "inputs", ()):
            kinds.add(collector.kind)
    return frozenset(kinds)


def sweep_every(
    rounds: Rounds,
    round_transports: Any,
    sweep_round: Any,
    first_round: Any = None,
    batchable: frozenset[str] = frozenset(),
) -> ExitStatus:
    """Run ``sweep_round(transports, dialer, domains, annotate, flow)`` (``cli/sweep_report.run_sweep`` with the
    command's settings bound) once per round over what ``round_transports(keeper)`` gives (``kept_hosts``
    for an inventory), and return the last round's exit status. ``first_round(annotate)``, when given, runs
    the first round instead (a sweep over worker processes: every host's full read spread over the cores;
    the rounds after it open their connections once, here, and keep them; ``batchable``: the kinds whose reads
    they may send in batches, ``batchable_kinds``). Ctrl-C or SIGTERM in a round
    exits as a single sweep does (its partial bundle saved); between rounds it ends the sweep with 130."""
    keeper, flow = KeptConnections(batchable), FlowMemory()  # connections, pace, threads: carried round to round
    _more_files()
    previous = signal.signal(signal.SIGTERM, _terminated)  # a round's run puts its own in place while it runs
    try:
        # an output as last round's: its facts as last round's (engine/same_text.py), its file a link to last
        # round's (engine/same_file.py)
        with same_text.remembering(), same_file.linking(), round_heap():
            return _rounds(rounds, round_transports, sweep_round, keeper, flow, first_round)
    except KeyboardInterrupt:
        return ExitStatus.INTERRUPTED
    except _Terminated:
        return ExitStatus.TERMINATED
    finally:
        signal.signal(signal.SIGTERM, previous)
        keeper.close_all()
        flow.drop_pools()


def _rounds(
    rounds: Rounds, round_transports: Any, sweep_round: Any, keeper: KeptConnections, flow: FlowMemory, first: Any
) -> Any:
    number = 0
    while True:
        number += 1
        started, cpu = time.monotonic(), _cpu_seconds()
        settle_heap(number)  # in the round's CPU: a full collection it makes is the round's cost
        annotate = _annotator(number, started, cpu, keeper, _counts(keeper))
        if number == 1 and first is not None:
            status = first(annotate)
        else:
            transports, dialer, domains = round_transports(keeper)
            status = sweep_round(keeper.openers(transports), dialer, domains, annotate, flow)
        if rounds.last(number):
            return status
        _wait(started + rounds.every, number)


# A steady round makes and drops most of its objects, but what outlives rounds (loaded modules, the kept
# connections, the last parses: ~100,000 objects at 32 hosts) was most of the cyclic collector's work: its
# full pass ran once a round (65 to 95 ms of a 32-host round's 0.7 s CPU) and its young passes 100 times
# (25 to 45 ms more). Frozen (gc.freeze) at each round's start, those objects are out of its sight, and
# young passes run every YOUNG_OBJECTS new objects (Python's default: 700), so most of a round's objects
# are freed by their reference counts before a pass meets them. Every FULL_COLLECTION_ROUNDS rounds a full
# collection over all of them frees any cycles that became garbage since (until then such garbage stays
# frozen: bounded by what those rounds leave, so a sweep that runs for weeks does not grow with them).
# Within a round the middle generation is passed over only every MIDDLE_PASSES young passes (Python's
# default: 10; CPython's generational collector, as up to 3.13): what a round keeps to its end (its hosts'
# runs, trace and summary) is the middle generation, and its passes cost 42 to 80 ms of a 1,000-host round
# (0.64 to 0.80 ms a live host, 64 live) to free no object at all in the bench's steady rounds; what such a
# pass would free waits for the next full collection.
FULL_COLLECTION_ROUNDS = 10
YOUNG_OBJECTS = 7000
MIDDLE_PASSES = 1000


@contextlib.contextmanager
def round_heap() -> Iterator[None]:
    """While the rounds run: young passes every ``YOUNG_OBJECTS`` objects, middle ones every ``MIDDLE_PASSES``
    young ones; after, the collector as it was."""
    thresholds = gc.get_threshold()
    gc.set_threshold(YOUNG_OBJECTS, MIDDLE_PASSES, *thresholds[2:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


def settle_heap(number: int) -> None:
    """At the start of round ``number``: what outlived the last rounds out of the cyclic collector's passes
    (``gc.freeze``), and every ``FULL_COLLECTION_ROUNDS`` rounds collected in full first."""
    if number > 1 and number % FULL_COLLECTION_ROUNDS == 0:
        gc.unfreeze()
        gc.collect()
    gc.freeze()


def kept_hosts(hosts: list[Any], ssh_options: Any, forks: int) -> Any:
    """``round_transports`` for an inventory's ``hosts`` (``HostSpec``): each round's openers in inventory
    order, the hosts whose kept connection is alive not dialed again."""
    from nightowl.fleet.sweep import inventory_transports

    def round_transports(keeper: KeptConnections) -> tuple[dict[str, Any], Any, dict[str, dict[str, str]]]:
        alive = {host.name for host in hosts if keeper.alive(host.name)}
        fresh = [host for host in hosts if host.name not in alive]
        dialed, dialer, domains = inventory_transports(fresh, ssh_options, forks) if fresh else ({}, None, {})
        kept = [host for host in hosts if host.name in alive]
        again, _, kept_domains = inventory_transports(kept, ssh_options, forks, dial=False)
        openers = dialed | again
        return {host.name: openers[host.name] for host in hosts}, dialer, domains | kept_domains

    return round_transports


def _counts(keeper: KeptConnections) -> tuple[int, int, int, int]:
    """Connections reused and opened, commands answered from batches and bundle files linked, so far."""
    links = same_file.active()
    return keeper.reused, keeper.opened, keeper.batched, links.linked if links is not None else 0


def _annotator(
    number: int, started: float, cpu: float, keeper: KeptConnections, before: tuple[int, int, int, int]
) -> Any:
    """What a round adds to its summary (``round``) and says on stderr: its number, wall and CPU seconds
    (this process's, up to its report), the connections it reused and opened, the commands a batch answered
    (transports/batch.py) and the bundle files it linked to a file with the same bytes, the last bundle's or its
    own (engine/same_file.py)."""

    def annotate(summary: dict[str, Any]) -> None:
        seconds, cpu_seconds = time.monotonic() - started, _cpu_seconds() - cpu
        reused, opened, batched, linked = (now - then for now, then in zip(_counts(keeper), before, strict=True))
        summary["round"] = {
            "number": number,
            "seconds": round(seconds, 3),
            "cpu_seconds": round(cpu_seconds, 3),
            "connections_reused": reused,
            "connections_opened": opened,
            "commands_batched": batched,
            "files_linked": linked,
        }
        click.echo(
            f"nightowl: round {number}: {seconds:.2f} s, {cpu_seconds:.2f} s CPU, connections: {reused} reused, "
            f"{opened} opened; {batched} commands batched, {linked} files linked",
            err=True,
        )

    return annotate


class _Terminated(BaseException):
    """SIGTERM outside a round's run (waiting for the next, printing a report): the sweep ends with 143, its
    connections closed (inside a run, the run's own handler saves its partial bundle and exits 143). Not an
    Exception, as KeyboardInterrupt is not: a report's writer that turns its own failures into a warning
    (``except Exception``) must not take the stop for one, and the sweep wait for its next round."""


def _wait(until: float, number: int) -> None:
    left = until - time.monotonic()
    if left > 0:
        time.sleep(left)
    else:
        click.echo(f"nightowl: round {number} took longer than --every: the next starts now", err=True)


def _terminated(_signum: int, _frame: Any) -> None:
    raise _Terminated


def _more_files() -> None:
    """Each kept connection holds a socket for the sweep's life (one per host, not one per --forks): the soft
    limit on open files goes up to the hard one, so a large fleet does not run out of them."""
    with contextlib.suppress(ValueError, OSError, ImportError):
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != hard and hard != resource.RLIM_INFINITY:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _cpu_seconds() -> float:
    """This process's CPU seconds, its threads' and the local commands it ran (reaped children) included."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system
