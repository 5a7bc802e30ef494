"""A scheduler stand-in that interleaves concurrent checks adversarially, for the circuit breaker's race tests.

Each check runs in its own thread with its own client (``client(node)``), as separate processes on separate
nodes would; they share only the stand-in's state, as checks share only the scheduler. The schedule decides
the interleaving: every check reads the state before any acts (a barrier), then

- ``at-once``: every check acts, then every check reads again to confirm (barriers between);
- ``sequential ORDER``: one check at a time acts and confirms, in ORDER (for example reverse name order, the
  order in which ranking by a one-second time and then the name lets each check rank itself first);
- ``free``: nothing more; the threads race as the machine schedules them.

Time is a virtual clock ``speed`` times faster than the real one, so a test waits tenths of a second
for what is a second to the scheduler. Slurm stamps a reason with its own clock in whole seconds
(``%H``); a Kubernetes condition carries the time its writer stamped.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from nightowl.fleet.breaker import NodeState

WATCHDOG_S = 30  # a schedule that deadlocks fails the test instead of hanging it


class VirtualClock:
    def __init__(self, speed: float) -> None:
        self.speed = speed
        self.t0 = time.monotonic()
        self.base = datetime.now(timezone.utc).timestamp()

    def epoch(self) -> float:
        return self.base + (time.monotonic() - self.t0) * self.speed

    def local(self) -> datetime:
        """Naive local time, as sinfo prints reason times."""
        return datetime.fromtimestamp(self.epoch())

    def utc(self) -> datetime:
        return datetime.fromtimestamp(self.epoch(), timezone.utc)

    def real(self, virtual_seconds: float) -> float:
        return virtual_seconds / self.speed


@dataclass
class Interleaver:
    """Holds each check at its first read, its first action and its confirming read, as the schedule says."""

    checks: list[str]
    schedule: str  # "at-once", "sequential" or "free"
    order: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.read_barrier = threading.Barrier(len(self.checks), timeout=WATCHDOG_S)
        self.act_barrier = threading.Barrier(len(self.checks), timeout=WATCHDOG_S)
        self.confirm_barrier = threading.Barrier(len(self.checks), timeout=WATCHDOG_S)
        self.turn = threading.Condition()
        self.next = 0
        self.reads: dict[str, int] = {}
        self.acts: dict[str, int] = {}

    def before_read(self, check: str) -> int:
        count = self.reads[check] = self.reads.get(check, 0) + 1
        if count == 2 and self.schedule == "at-once":
            self.confirm_barrier.wait()
        return count

    def after_read(self, check: str, count: int) -> None:
        if count == 1:  # every check has read the state before any goes on to act
            self.read_barrier.wait()
        if count == 2 and self.schedule == "sequential":
            with self.turn:  # this check has confirmed: the next one may act
                self.next += 1
                self.turn.notify_all()

    def before_act(self, check: str) -> None:
        count = self.acts[check] = self.acts.get(check, 0) + 1
        if count != 1 or self.schedule == "free":
            return  # undoing its own action is never held back
        if self.schedule == "at-once":
            self.act_barrier.wait()
            return
        with self.turn:
            if not self.turn.wait_for(lambda: self.order[self.next] == check, WATCHDOG_S):
                raise TimeoutError(f"{check}: its turn never came")


class SlurmStandin:
    """sinfo and scontrol over one shared dict; drains stamped by the stand-in's own clock, whole seconds."""

    def __init__(self, nodes: list[str], clock: VirtualClock, interleaver: Interleaver) -> None:
        self.state = {n: NodeState(n, "idle", "none", None) for n in nodes}
        self.clock = clock
        self.interleaver = interleaver
        self.lock = threading.Lock()
        self.calls: list[tuple[str, str, str]] = []

    def client(self, check: str) -> SlurmView:
        return SlurmView(self, check)


@dataclass
class SlurmView:
    standin: SlurmStandin
    check: str

    def nodes(self) -> dict[str, NodeState]:
        count = self.standin.interleaver.before_read(self.check)
        with self.standin.lock:
            view = dict(self.standin.state)
        self.standin.interleaver.after_read(self.check, count)
        return view

    def drain(self, node: str, reason: str) -> None:
        self.standin.interleaver.before_act(self.check)
        with self.standin.lock:
            stamp = self.standin.clock.local().replace(microsecond=0)
            self.standin.state[node] = NodeState(node, "drained", reason, stamp)
            self.standin.calls.append((self.check, "drain", node))

    def resume(self, node: str) -> None:
        self.standin.interleaver.before_act(self.check)
        with self.standin.lock:
            self.standin.state[node] = NodeState(node, "idle", "none", None)
            self.standin.calls.append((self.check, "resume", node))


class KubeStandin:
    """The nodes' NightowlGPUHealthy conditions in one shared dict; a patch merges the one condition."""

    def __init__(self, nodes: list[str], interleaver: Interleaver) -> None:
        self.conditions: dict[str, dict[str, Any] | None] = {n: None for n in nodes}
        self.interleaver = interleaver
        self.lock = threading.Lock()
        self.calls: list[tuple[str, str, str]] = []

    def client(self, check: str) -> KubeView:
        return KubeView(self, check)


@dataclass
class KubeView:
    standin: KubeStandin
    check: str

    def nodes(self) -> dict[str, dict[str, Any] | None]:
        count = self.standin.interleaver.before_read(self.check)
        with self.standin.lock:
            view = {n: dict(c) if c else None for n, c in self.standin.conditions.items()}
        self.standin.interleaver.after_read(self.check, count)
        return view

    def patch(self, node: str, condition: dict[str, Any]) -> None:
        self.standin.interleaver.before_act(self.check)
        with self.standin.lock:
            self.standin.conditions[node] = dict(condition)
            self.standin.calls.append((self.check, "patch", f"{node}={condition['status']}"))
