"""Flow control for a run over many hosts: how many hosts are in flight adapts to what this process keeps up with.

Every command's deadline runs on nightowl's side too: a host whose output arrives while this process is too
busy to read it ends "cannot judge: nightowl was overloaded" (transports/base.py ``late_note``). So a sweep
that starts more hosts than its reader can serve buys nothing but lost verdicts. ``--forks`` is the ceiling;
the hosts actually in flight follow an AIMD rule on the reader's lag, as TCP follows loss:

* the reader is behind when a short sleep of a sampler thread wakes late twice in a row, or once past
  ``stall`` (``LagSampler``: what any reading thread waits, behind the GIL or behind other processes on the
  cores, before it can read what arrived), or when this process used a whole core over the sample (``busy``:
  the GIL is one core, so past that the threads queue for it however short each wait). One wake a little
  late is the scheduler's noise, not a backlog: on a 2-core machine busy with other processes a 0.25 s sleep
  woke 0.1 to 0.34 s late every few seconds while this process used under half a core, and halving on each
  such wake held a 64-host steady round to 9 to 25 of its 32 slots (bench/README.md, twenty-seventh session).
  An output waits past its command's deadline (seconds) only behind a lag that lasts or a long stall;
* behind: the limit halves (at most once per ``cooldown``, so one burst is one decrease);
* not behind, lag below ``low``, and every slot in use: one host more per sample; a quarter more (at least
  one) while this process also used under half a core (``IDLE``: its hosts mostly wait for their hosts'
  answers, as a steady round's do, so one more host a quarter second paced a round of a few seconds). No slow
  start: hosts that started cannot be stopped, so a burst of starts the reader cannot serve costs verdicts,
  while a sweep that is CPU-bound gains nothing from more hosts in flight;
* the limit stays within 1 .. ``maximum``; hosts wait for a slot in the order they asked.

The rule takes its inputs (``observe(lag, now)``) from outside, so a test drives it with a fake clock.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field

HIGH_LAG = 0.1  # seconds: a reader this late twice in a row is behind (a command's output waits unread)
STALL = 0.5  # seconds: a reader this late once is behind (twice the sample: no scheduler's noise seen here)
LOW_LAG = 0.02  # seconds: a reader this prompt has room for another host
BUSY = 0.9  # share of one core over a sample past which the reader is behind
IDLE = 0.5  # share of one core over a sample under which a prompt reader takes a quarter more hosts
COOLDOWN = 1.0  # seconds between two decreases
SAMPLE_SECONDS = 0.25  # the sampler's sleep
START = 4  # hosts in flight before the first sample says more
STOP_LOOK = 0.2  # seconds: how often a host waiting for a slot looks whether the run was stopped


@dataclass
class FlowMemory:
    """What a run learned of this process's pace, for the next run of a caller that repeats (``sweep --every``):
    the highest limit its flow control set since the reader was last behind on lag (``AdaptiveLimit`` tells it
    each one). The next run starts there instead of at START, so a steady round is not paced by a ramp it climbed
    already, nor by a halving for a burst of CPU alone (``busy``: a round's hosts finishing at once), which costs
    no verdict by itself; a reader behind on lag lowers it. The rule still halves the limit as soon as the reader
    is behind."""

    limit: int | None = None
    # The threads its hosts and their collectors ran on (name -> (size, pool)), kept idle between runs: a round
    # that started 160 threads and ended them cost 40 ms of CPU and of wall on this 2-core machine (``pool``).
    pools: dict[str, tuple[int, ThreadPoolExecutor]] = field(default_factory=dict, repr=False)

    def pool(self, name: str, size: int) -> ThreadPoolExecutor:
        """The kept pool ``name`` of ``size`` threads, a new one if none of that size is kept (the older one
        ends once idle)."""
        kept = self.pools.get(name)
        if kept is not None and kept[0] == size:
            return kept[1]
        if kept is not None:
            kept[1].shutdown(wait=False)
        made = ThreadPoolExecutor(max_workers=size, thread_name_prefix=name)
        self.pools[name] = (size, made)
        return made

    def drop_pools(self) -> None:
        """End the kept pools (a run that failed or was stopped: what may still run there is not the next run's)."""
        for _, pool in self.pools.values():
            pool.shutdown(wait=False, cancel_futures=True)
        self.pools.clear()


class AdaptiveLimit:
    """Slots for hosts in flight, their number set by ``observe``; ``slot()`` waits for one in FIFO order."""

    def __init__(
        self,
        maximum: int,
        start: int = START,
        high: float = HIGH_LAG,
        low: float = LOW_LAG,
        cooldown: float = COOLDOWN,
        stall: float = STALL,
        memory: FlowMemory | None = None,
    ) -> None:
        self.maximum = max(1, maximum)
        start = memory.limit if memory is not None and memory.limit else start  # where the last run ended
        self.limit = max(1, min(start, self.maximum))
        self.high, self.low, self.cooldown, self.stall = high, low, cooldown, stall
        self.in_flight = 0
        self.lowest = self.limit  # the smallest limit it went down to (the report's "flow control held ...")
        self._last_decrease: float | None = None
        self.asked = 0  # slots asked for, over its life
        self._waiting: deque[threading.Lock] = deque()  # each waiter's lock, in the order they asked
        self._lock = threading.Lock()
        self.memory = memory  # told the peak: where the caller's next run starts (sweep --every)
        self._peak = self.limit  # the highest limit since the reader was last behind on lag
        self._late = False  # the last sample woke late (``high``): one more in a row is a reader behind

    def observe(self, lag: float, now: float, busy: float = 0.0) -> int:
        """One sample at ``now`` (monotonic seconds): the sampler's ``lag`` (seconds late) and ``busy`` (CPU
        seconds this process used per second over it); returns the new limit."""
        with self._lock:
            late, was_late = lag > self.high, self._late
            self._late = late
            lagging = (late and was_late) or lag > self.stall
            if lagging or busy > BUSY:
                recent = self._last_decrease is not None and now - self._last_decrease < self.cooldown
                if not recent:
                    self.limit = max(1, self.limit // 2)
                    self.lowest = min(self.lowest, self.limit)
                    self._last_decrease = now
                if lagging:
                    self._peak = self.limit
            elif lag < self.low and self.in_flight >= self.limit:
                step = max(1, self.limit // 4) if busy < IDLE else 1
                self.limit = min(self.maximum, self.limit + step)
            self._peak = max(self._peak, self.limit)
            if self.memory is not None:
                self.memory.limit = self._peak
            self._admit()
            return self.limit

    def acquire(self, stop: threading.Event | None = None) -> bool:
        """Wait for a slot, in the order asked; False (no slot taken) once ``stop`` is set.

        Each waiter sleeps on a lock of its own, released by whoever hands it its slot (``_admit``): one
        wake-up a host. A condition shared by every waiter woke them all at each change, and each went back
        to sleep but the one whose turn it was: 1,000 hosts through 32 threads held to 4 to 16 slots cost 0.45
        to 0.51 ms of CPU a host, against 0.07 now (bench/flow_slots.py), and a 1,000-host steady round
        (936 refused at once) some 4 ms of its hosts' threads' CPU a live host (bench/README.md)."""
        with self._lock:
            self.asked += 1
            if stop is not None and stop.is_set():
                return False
            if not self._waiting and self.in_flight < self.limit:
                self.in_flight += 1
                return True
            turn = threading.Lock()
            turn.acquire()
            self._waiting.append(turn)
        try:
            _wait_turn(turn, stop)
        except BaseException:  # an interrupt while waiting: the place, or a slot that came, is not kept
            self._give_up(turn)
            raise
        if stop is not None and stop.is_set():  # stopped while waiting, or as its slot came: no slot taken
            return self._give_up(turn)
        return True

    def _give_up(self, turn: threading.Lock) -> bool:
        """A waiter stopped: out of the queue, or, when its slot came meanwhile, that slot handed on. False."""
        with self._lock:
            if turn in self._waiting:
                self._waiting.remove(turn)
            else:
                self.in_flight -= 1
                self._admit()
        return False

    def _admit(self) -> None:
        """Let the first waiters in while slots are free (the caller holds ``_lock``)."""
        while self._waiting and self.in_flight < self.limit:
            self.in_flight += 1
            self._waiting.popleft().release()

    def release(self) -> None:
        with self._lock:
            self.in_flight -= 1
            self._admit()

    @contextmanager
    def slot(self, stop: threading.Event | None = None) -> Iterator[bool]:
        """A slot while the block runs; yields False (and holds none) when ``stop`` was set while waiting."""
        taken = self.acquire(stop)
        try:
            yield taken
        finally:
            if taken:
                self.release()


def _wait_turn(turn: threading.Lock, stop: threading.Event | None) -> None:
    """Wait until ``turn`` is released (the waiter's slot came) or ``stop`` is set (looked at every STOP_LOOK
    seconds)."""
    if stop is None:
        turn.acquire()
        return
    while not turn.acquire(timeout=STOP_LOOK) and not stop.is_set():
        pass


class LagSampler:
    """A daemon thread that sleeps ``SAMPLE_SECONDS`` at a time and reports to ``limit`` how late it woke and
    how much CPU this process used meanwhile."""

    def __init__(
        self,
        limit: AdaptiveLimit,
        clock: Callable[[], float] = time.monotonic,
        period: float = SAMPLE_SECONDS,
        cpu: Callable[[], float] = time.process_time,
    ) -> None:
        self.limit, self.clock, self.period, self.cpu = limit, clock, period, cpu
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="flow-sampler", daemon=True)

    def __enter__(self) -> LagSampler:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=1.0)

    def _run(self) -> None:
        while True:
            asked, cpu = self.clock(), self.cpu()
            if self._stop.wait(self.period):
                return
            woke, used = self.clock(), self.cpu()
            elapsed = max(woke - asked, 1e-6)
            self.limit.observe(max(0.0, elapsed - self.period), woke, (used - cpu) / elapsed)
