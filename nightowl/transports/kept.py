"""Connections kept between the rounds of a repeated sweep (`nightowl sweep --every`).

A one-shot sweep pays, for every host and every round, the SSH handshake (key exchange, host-key check,
authentication) on both ends: most of a steady round's client CPU once only new log lines are read
(docs/reference.md#incremental-reads). A sweep that repeats keeps each host's connection open instead, as
node-problem-detector keeps its log open: the engine's walk ends with ``close()``, which here only hands the
connection back to the keeper; the next round's ``connect()`` takes it again when it is still alive, and
opens a new one (through that round's opener, so through its dialer) when it is not. ``close_all`` ends
them when the sweep stops.

A connection that looks open may not be: a NAT or a load balancer that dropped the idle flow, a host that
lost power without a word. So a kept connection sends keepalives while it waits (``KEEPALIVE_SECONDS``: the
flow stays in the NAT's table and a dead peer is noticed), a command over a connection taken again that
fails for want of the connection (no channel, the connection lost) is run once more over a new one, and a
connection over which a command got no answer at all is not taken again. The keeper knows nothing of SSH:
a transport whose connection can tell that it is gone (``alive``) is kept; any other (local, replay) is
opened anew every round.

A kept connection also learns what its host is asked each round. The reads of ``batchable`` kinds (the sweep's:
the read-only collectors of the runbook's first node, asked of every host every round) asked in the last round
with a small answer, and with the same argv and timeout as in the round before once that is known, are sent at the
next round's first ask of one of them, in one session (``run_batch``: transports/batch.py), and each ask takes its
answer from there, once. A read whose argv follows a position (the kernel log's journal cursor:
engine/incremental.py) changes as the log grows; its reader names the argv that follows (``follow``), and that one
is sent next round in its place. An ask runs its command alone, as every ask of a connection without batches does,
when the batch has no answer for it (see batch.py), when its timeout is not the one the batch planned it with, or
when the batch did not answer within its patience (a command that hangs holds up the ones after it); the batch's
answer is then dropped, as every answer is once the walk waits (``forget_batched``: a read after a runbook's
``wait:`` is a read after the wait).
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from nightowl.transports.base import CommandResult, Transport

KEEPALIVE_SECONDS = 30.0  # under the idle timeouts of common NATs and load balancers (about 350 s and 4 min)
# How long an ask waits for its answer from the round's batch before running its command alone: this many
# times the host's last batch, at least BATCH_PATIENCE_SECONDS (a loaded client is slow to read it) and at most
# BATCH_PATIENCE_MAX (a batch that once hung does not make every later ask wait its whole timeout).
BATCH_PATIENCE_TIMES, BATCH_PATIENCE_SECONDS, BATCH_PATIENCE_MAX = 3.0, 2.0, 5.0
# A host's batch is one session (a session more costs both ends: on the host, sshd's session process, a shell and a
# `timeout`, as much CPU as a few batched reads; here a channel and its packets). One after the other in it, a read
# that takes long on the host (nvidia-smi starts NVML: 0.2 s a call with persistence mode, up to a second without)
# holds up every read after it, where alone they ran side by side; so once the last round's batch timed a host's
# reads by its clock (batch.py reads it around each command), they run in lanes side by side within the session
# (``lanes``, batch.py ``script``): the fewest, at most MAX_LANES, that bring the last answer within LANE_SLACK of
# the longest read. A lane more costs the host a subshell and two `dd`s, no session. On the 2-core machine serving
# the bench's hosts, steady rounds with and without lanes taken in turn in one sweep took 0.89 against 0.97 s
# (median, 32 hosts) and 1.65 against 1.74 s (64 hosts) (bench/README.md).
LANE_SLACK, MAX_LANES = 0.05, 3

# argv -> (timeout, kind, bytes of its answer, its time on the host or None) of a round's asks that answered
Asked = dict[tuple[str, ...], tuple[float, "str | None", int, "float | None"]]
# Only a read whose last answer was at most this big is batched: a steady read's is a few KB, a full read's (a
# whole boot's log, `-q -x`) is not, and a batch shares one output cap.
BATCH_ANSWER_BYTES = 64 * 1024


class KeptConnections:
    """Each host's open transport between rounds, by host name; thread-safe (a round runs hosts at once)."""

    def __init__(self, batchable: frozenset[str] = frozenset()) -> None:
        self.batchable = batchable  # the kinds whose reads may be sent in a batch (none: every ask alone)
        self._open: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.reused = 0  # connections taken again, over the keeper's life
        self.opened = 0  # connections opened (first rounds, and a host whose connection was lost)
        self.batched = 0  # commands answered from a batch (transports/batch.py)
        # host -> (last round's asks, the round before's, the argvs of the last that a reader named: ``follow``)
        self._asked: dict[str, tuple[Asked, Asked | None, frozenset[tuple[str, ...]]]] = {}
        self._batch_seconds: dict[str, float] = {}  # host -> how long its last batch took
        # host -> (its connection, its batch's end): read once, at the next round's look (``_alive_one``), which
        # heeds it only for the connection kept then
        self._busy: dict[str, tuple[Any, threading.Event]] = {}

    def alive(self, name: str) -> bool:
        """Whether ``name`` has a connection kept that still looks open and whose last batch has ended (``busy``);
        any other is dropped here (a round's start asks this of every host: cli/sweep_every.py)."""
        return self._alive_one(name) is not None

    def _alive_one(self, name: str) -> Any:
        with self._lock:
            transport = self._open.get(name)
            busy = self._busy.pop(name, None)
        if transport is None:
            return None
        still_running = busy is not None and busy[0] is transport and not busy[1].is_set()
        if _alive(transport) and not still_running:
            return transport
        self.drop(name, transport)
        return None

    def busy(self, name: str, transport: Any, ended: threading.Event) -> None:
        """``transport``, kept, still runs its round's batch (its asks gave up waiting: a command in it hangs, or
        the client was too busy to read it in time): the next round takes it only if that batch has ended by
        then, else it is dropped and a new one opened. Dropped at once, a client slow for a moment paid a new
        handshake for each such host the next round (the slower for it)."""
        with self._lock:
            if self._open.get(name) is transport:
                self._busy[name] = (transport, ended)

    def openers(self, transports: Mapping[str, Callable[[], Any]]) -> dict[str, Callable[[], Any]]:
        """``transports`` (name -> opener) with each opener handing out a kept connection when one is alive."""
        return {name: _KeptOpener(self, name, opener) for name, opener in transports.items()}

    def take(self, name: str, opener: Callable[[], Any]) -> tuple[Any, bool]:
        """(the kept transport of ``name`` when alive, counted as reused; else a fresh one from ``opener``,
        counted when it connects), and whether it was taken again."""
        kept = self._alive_one(name)
        if kept is not None:
            with self._lock:
                self.reused += 1
            return kept, True
        return opener(), False

    def keep(self, name: str, transport: Any) -> None:
        """``transport`` is ``name``'s connection from now on (a new one replaces and closes an older one); it
        sends keepalives while it waits for the next round."""
        keepalive = getattr(transport, "keep_alive", None)
        if callable(keepalive):
            with contextlib.suppress(Exception):
                keepalive(KEEPALIVE_SECONDS)
        with self._lock:
            older = self._open.get(name)
            self._open[name] = transport
            self.opened += 1
        if older is not None and older is not transport:
            _close(older)

    def drop(self, name: str, transport: Any) -> None:
        """Close ``transport`` and forget it, if it is still ``name``'s connection."""
        with self._lock:
            if self._open.get(name) is transport:
                del self._open[name]
        _close(transport)

    def count(self) -> int:
        with self._lock:
            return len(self._open)

    def learn(self, name: str, asked: Asked, followed: frozenset[tuple[str, ...]] = frozenset()) -> None:
        """What ``name`` was asked this round (its commands that answered), ``followed``: the argvs among them
        that a reader named as the ones that follow this round's (see ``KeptTransport.follow``)."""
        with self._lock:
            last = self._asked.get(name)
            self._asked[name] = (asked, last[0] if last is not None else None, followed)

    def plan(self, name: str) -> Asked:
        """What to send ``name`` in a batch next: last round's asks of a batchable kind whose answer was small
        (``BATCH_ANSWER_BYTES``: never a full read), and, once the round before is known, that were asked then
        too with the same argv and timeout, or that a reader named as the ones that follow (a journal cursor's).
        Not the same kind: an argv two kinds share (engine/shared_reads.py) is asked by whichever comes first."""
        with self._lock:
            last, before, followed = self._asked.get(name, ({}, None, frozenset()))
        plan = {a: ask for a, ask in last.items() if ask[1] in self.batchable and ask[2] <= BATCH_ANSWER_BYTES}
        if before is None:
            return plan
        return {
            argv: ask
            for argv, ask in plan.items()
            if argv in followed or (argv in before and before[argv][0] == ask[0])
        }

    def patience(self, name: str) -> float:
        with self._lock:
            seconds = self._batch_seconds.get(name, 0.0)
        return min(BATCH_PATIENCE_MAX, max(BATCH_PATIENCE_SECONDS, BATCH_PATIENCE_TIMES * seconds))

    def timed(self, name: str, seconds: float) -> None:
        with self._lock:
            self._batch_seconds[name] = max(seconds, self._batch_seconds.get(name, 0.0) / 2)

    def took_batched(self) -> None:
        with self._lock:
            self.batched += 1

    def close_all(self) -> None:
        """End every kept connection (the sweep stops)."""
        with self._lock:
            kept, self._open = list(self._open.values()), {}
        for transport in kept:
            _close(transport)


class _KeptOpener:
    """An opener whose transport is the kept one (see ``KeptTransport``)."""

    def __init__(self, keeper: KeptConnections, name: str, opener: Callable[[], Any]) -> None:
        self.keeper, self.name, self.opener = keeper, name, opener

    def __call__(self) -> Transport:
        inner, reused = self.keeper.take(self.name, self.opener)
        return KeptTransport(self.keeper, self.name, inner, self.opener if reused else None)


class KeptTransport:
    """A host's transport for one round: the connection is the keeper's, so ``close`` hands it back instead of
    ending it (``end`` ends it: an interrupt). ``redial``: the round's opener when the connection was taken
    again from an earlier round (a command that fails for want of it is run once more over a new one).
    Everything else is the transport's own."""

    def __init__(self, keeper: KeptConnections, name: str, inner: Any, redial: Callable[[], Any] | None) -> None:
        self._keeper, self._name, self.inner, self._redial = keeper, name, inner, redial
        self.host = getattr(inner, "host", name)
        self._unanswered = False  # a command got no answer over it: the connection itself may be stuck
        self._lock = threading.Lock()
        self._asked: Asked = {}  # this round's asks that answered (the next round's batch plan learns from them)
        self._follows: dict[tuple[str, ...], tuple[str, ...]] = {}  # an ask -> the argv that follows it
        batches = redial is not None and callable(getattr(inner, "run_batch", None))  # a connection taken again
        plan = keeper.plan(name) if batches else {}
        patience = keeper.patience(name)
        self._batch = _Batch(self, dict(plan), patience)

    def __getattr__(self, attribute: str) -> Any:  # recorded, spec, options...: the transport's own
        return getattr(self.inner, attribute)

    def connect(self) -> None:
        if _alive(self.inner):
            return
        self.inner.connect()  # raises TransportError: the host is unreachable this round, nothing is kept
        if callable(getattr(self.inner, "alive", None)):  # only a connection that can tell it is gone is kept
            self._keeper.keep(self._name, self.inner)

    def run(self, argv: Sequence[str], timeout: float, kind: str | None = None) -> CommandResult:
        argv = tuple(str(arg) for arg in argv)
        batched = self._batch.take(argv, timeout) if argv in self._batch.plan else None
        if batched is not None:
            self._keeper.took_batched()
            if batched.rc is not None:  # a read that hung is asked alone next round
                seconds = batched.host_seconds
                self._asked[argv] = (timeout, kind, len(batched.stdout) + len(batched.stderr), seconds)
            return batched
        used = self.inner
        result: CommandResult = used.run(argv, timeout, kind)
        if self._redial is not None and _connection_failed(result):
            fresh = self._fresh(used)
            if fresh is not None:
                result = fresh.run(argv, timeout, kind)
        # No exit status and not the host's own timeout: nightowl's deadline with no answer, or a failed channel.
        self._unanswered = self._unanswered or (result.rc is None and not result.timed_out)
        if result.rc is not None:
            # its time on the host is unknown: the client's wall (a channel, the network, a busy client) is not it
            self._asked[argv] = (timeout, kind, len(result.stdout) + len(result.stderr), None)
        return result

    def follow(self, argv: Sequence[str], following: Sequence[str]) -> None:
        """Next round asks ``following`` in place of this round's ``argv`` (a reader that reads on from a position
        names the argv of its next read), so the next round's batch sends it: as it sends a read asked the same
        way two rounds running. Whatever is asked next round, only an ask of that very argv takes its answer."""
        with self._lock:
            self._follows[tuple(str(arg) for arg in argv)] = tuple(str(arg) for arg in following)

    def forget_batched(self) -> None:
        """No ask from now on takes an answer a batch read before now (the walk waits: engine/runner.py)."""
        self._batch.close()

    def _fresh(self, failed: Any) -> Any:
        """A new connection in place of ``failed`` (once: the commands that failed over it at the same time
        share it), or None when the host does not answer now."""
        with self._lock:
            if self.inner is failed and self._redial is not None:
                self._keeper.drop(self._name, failed)
                opener, self._redial = self._redial, None
                try:
                    fresh = opener()
                    fresh.connect()
                except Exception:  # noqa: BLE001 - unreachable now: the first failure is the evidence
                    return None
                self._keeper.keep(self._name, fresh)
                self.inner = fresh
            return self.inner if self.inner is not failed else None

    def close(self) -> None:
        """The round is done with the host: a connection still alive stays for the next round, unless a command
        got no answer over it (nightowl's own deadline, a channel that failed): a connection that still looks
        open but stopped answering (a silent network) is dialed anew next round, not trusted again; nor is one
        whose batch is still running when the next round takes it (a command in it hangs: ``busy``)."""
        asked = dict(self._asked)
        with self._lock:
            follows = dict(self._follows)
        followed = {follows[argv]: asked.pop(argv) for argv in list(asked) if argv in follows}
        self._keeper.learn(self._name, asked | followed, frozenset(followed))
        if self._unanswered or not _alive(self.inner):
            self._keeper.drop(self._name, self.inner)
        elif self._batch.running():
            self._keeper.busy(self._name, self.inner, self._batch.ended)

    def end(self) -> None:
        self._keeper.drop(self._name, self.inner)


class _Batch:
    """One round's batch for one host: sent at the first ask of a planned argv, on a thread of its own, so that each ask
    waits for it only as long as its patience (and its own timeout) allow. An answer is taken once, only by an
    ask with the timeout the batch planned it with (its answer was checked against that limit: batch.py
    ``results``), and never after the ask gave up on it or the batch was closed (``close``: the walk waited)."""

    def __init__(self, owner: KeptTransport, plan: Asked, patience: float) -> None:
        self.owner, self.plan, self.patience = owner, plan, patience
        self.answers: dict[tuple[str, ...], CommandResult] = {}
        self.dropped: set[tuple[str, ...]] = set()  # asked alone instead: its answer is not for a later ask
        self.closed = False
        self.done = threading.Event()
        self.ended = threading.Event()  # the session is over (answered or failed), whether its thread is gone or not
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()

    def take(self, argv: tuple[str, ...], timeout: float) -> CommandResult | None:
        same_limit = math.ceil(self.plan[argv][0]) == math.ceil(timeout)  # the limit its answer was checked against
        if not (same_limit and self._started() and self.done.wait(max(0.0, min(timeout, self.patience)))):
            self._drop(argv)
            return None
        with self.lock:
            self.dropped.add(argv)  # taken once: a second ask of the same argv reads it again
            return None if self.closed else self.answers.pop(argv, None)

    def _started(self) -> bool:
        with self.lock:
            if self.closed:
                return False
            if self.thread is None:
                thread = threading.Thread(target=self._send, name="batch", daemon=True)
                try:
                    thread.start()
                except RuntimeError:  # no thread to be had (a huge fleet): every ask runs alone
                    self.closed = True
                    return False
                self.thread = thread
            return True

    def _drop(self, argv: tuple[str, ...]) -> None:
        with self.lock:
            self.dropped.add(argv)
            self.answers.pop(argv, None)

    def _send(self) -> None:
        started = time.monotonic()
        groups = lanes(self.plan)
        commands = [(argv, self.plan[argv][0]) for group in groups for argv in group]
        try:
            try:
                answers = self.owner.inner.run_batch(commands, lanes=[len(group) for group in groups])
            except Exception:  # noqa: BLE001 - a batch that fails leaves its asks to run alone
                answers = {}
            with self.lock:
                if not self.closed:
                    self.answers = {argv: answer for argv, answer in answers.items() if argv not in self.dropped}
            self.owner._keeper.timed(self.owner._name, time.monotonic() - started)
        finally:
            self.ended.set()  # after ``timed``: the next round's patience is this batch's
            self.done.set()

    def close(self) -> None:
        with self.lock:
            self.closed = True
            self.answers.clear()
        self.done.set()  # an ask waiting for it runs alone now

    def running(self) -> bool:
        """Whether its session is still on the connection: sent and not over. Not its thread: the host's walk
        may end (its last ask answered) while the thread that handed the answers over has yet to return, and on a
        busy client that moment is long enough that a connection with nothing left on it was dropped."""
        return self.thread is not None and not self.ended.is_set()


def lanes(plan: Asked) -> list[list[tuple[str, ...]]]:
    """``plan``'s argvs in the lanes a batch runs side by side: the fewest (at most MAX_LANES) whose last answer
    comes within LANE_SLACK of its longest read by the host's clock last round, each read put in the lane with the
    least time so far, longest first (a read of unknown time counts as none: one read alone last round); never a
    lane more that brings the last answer no sooner."""
    argvs = list(plan)
    took = {argv: plan[argv][3] or 0.0 for argv in argvs}
    longest, best_end = max(took.values(), default=0.0), sum(took.values())
    best: list[list[tuple[str, ...]]] = [argvs]
    if best_end <= longest + LANE_SLACK:
        return best
    by_time = sorted(argvs, key=lambda argv: -took[argv])
    for count in range(2, MAX_LANES + 1):
        groups: list[list[tuple[str, ...]]] = [[] for _ in range(count)]
        totals = [0.0] * count
        for argv in by_time:
            least = totals.index(min(totals))
            groups[least].append(argv)
            totals[least] += took[argv]
        if max(totals) >= best_end:  # a lane more that brings the last answer no sooner
            break
        best, best_end = [group for group in groups if group], max(totals)
        if best_end <= longest + LANE_SLACK:
            break
    return best


def _connection_failed(result: CommandResult) -> bool:
    """The command never ran for want of the connection (no channel opened, the connection lost)."""
    error = result.error or ""
    return result.rc is None and not result.timed_out and error.startswith(("ssh error", "connection lost"))


def _alive(transport: Any) -> bool:
    alive = getattr(transport, "alive", None)
    return bool(alive()) if callable(alive) else False


def _close(transport: Any) -> None:
    with contextlib.suppress(Exception):  # a connection already gone has nothing to close
        transport.close()
