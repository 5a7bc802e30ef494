"""The watcher: follow a source, cut its trigger lines into bursts, run the runbook once per burst.

Two threads. The follower (the caller's thread, so it also sees signals) reads the source, feeds the
burst tracker, saves the position and writes the health file; it never waits for a run. The runner
takes one burst at a time. While a run is in progress a closed burst waits in a single slot, and a newer
one folds into it (newer evidence supersedes the queued run; its lines join it, nothing is dropped but
what the burst caps count), so the memory in flight is at most three bursts whatever the line rate.

The saved position never passes the start of a burst whose run has not finished: after a crash or a
stop the burst is read (and judged) again, and after a finished run it is never judged again.
On stop (SIGTERM) the follower stops, a run in progress gets ``grace`` seconds to finish, then its
commands are ended (``abort``; the engine still writes the bundle) and its burst stays unjudged.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nightowl.watch.burst import Burst, BurstTracker
from nightowl.watch.source import Position, Source
from nightowl.watch.state import Cursor, write_json

# Runs the runbook for one burst and says what came of it: at least ``bundle`` (a path or None).
RunBurst = Callable[[Burst], dict[str, Any]]
Log = Callable[..., None]  # log(text, level="info", **fields)


@dataclass
class WatchOptions:
    debounce: float = 1.0
    max_age: float = 30.0  # a burst longer than this is judged anyway
    grace: float = 20.0  # a run in progress may finish this long after SIGTERM
    poll: float = 0.5  # the longest the follower blocks in a read
    save_every: float = 1.0
    health_every: float = 5.0


@dataclass
class _Counts:
    bursts: int = 0
    runs: int = 0
    runs_failed: int = 0
    superseded: int = 0
    last_run: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)


@dataclass(eq=False)
class Watcher:
    """Follows ``source`` and judges its bursts (see the module docstring); ``follow`` runs it."""

    source: Source
    cursor: Cursor
    tracker: BurstTracker
    run_burst: RunBurst
    health_path: Path | None
    options: WatchOptions
    log: Log
    abort: Callable[[], None] = lambda: None
    stop: threading.Event = field(default_factory=threading.Event, init=False)
    counts: _Counts = field(default_factory=_Counts, init=False)
    failed: bool = field(default=False, init=False)  # the watch stopped because of a bug, not a signal

    def __post_init__(self) -> None:
        self._lock = threading.Condition()
        self._queued: Burst | None = None
        self._running: Burst | None = None
        self._aborted = False
        self._runner = threading.Thread(target=self._run_loop, name="watch-runner", daemon=True)
        self._health_at = 0.0
        self._saved_at = 0.0
        self._state = "following"

    # -- the follower -------------------------------------------------------------------------------
    def follow(self) -> None:
        """Follow until ``stop`` is set, then shut down as the module docstring says. Returns when done."""
        self._runner.start()
        self._write_health(force=True)
        try:
            while not self.stop.is_set():
                if not self._runner.is_alive():  # cannot happen by design; never follow without judging
                    self.log("the runner thread ended: stopping", level="error")
                    self.failed = True
                    break
                batch = self.source.read(self._read_timeout())
                now = time.monotonic()
                if batch is not None:
                    self.tracker.feed(batch, now)
                burst = self.tracker.due(now)
                if burst is not None:
                    self._submit(burst)
                self._drain_notes()
                self._save(now)
                self._write_health(now)
        finally:
            self._shutdown()

    def _read_timeout(self) -> float:
        """Block at most ``poll``, and never past the moment the open burst closes (its latency)."""
        burst = self.tracker.open
        if burst is None:
            return self.options.poll
        closes = min(burst.last_trigger + self.tracker.debounce, burst.opened + self.tracker.max_age)
        return max(0.0, min(self.options.poll, closes - time.monotonic()))

    def _submit(self, burst: Burst) -> None:
        self.counts.bursts += 1
        dropped = {"dropped_context": burst.dropped_context, "dropped_triggers": burst.dropped_triggers}
        self.log(
            f"burst of {len(burst.lines)} lines: {_triggers(burst)}",
            triggers=dict(burst.triggers),
            lines=len(burst.lines) + burst.dropped_lines,
            **(dropped if burst.dropped_lines else {}),
        )
        with self._lock:
            if self._queued is not None:
                self.counts.superseded += 1
                burst = self._queued.absorb(burst)
            self._queued = burst
            self._lock.notify_all()

    def _drain_notes(self) -> None:
        while (note := self.source.note()) is not None:
            self.log(note, level="warning", source=self.source.name)

    def commit_position(self) -> Position:
        """The oldest start of a burst not judged yet, else the end of what was read."""
        with self._lock:
            pending = self._running or self._queued
        held = pending or self.tracker.open
        return held.start if held is not None else self.source.position()

    def _save(self, now: float, force: bool = False) -> None:
        if not force and now - self._saved_at < self.options.save_every:
            return
        self._saved_at = now
        if not self.cursor.save(self.commit_position()):
            self.log(f"cannot save the position to {self.cursor.path}", level="warning")

    def _write_health(self, now: float | None = None, force: bool = False) -> None:
        now = time.monotonic() if now is None else now
        if self.health_path is None or (not force and now - self._health_at < self.options.health_every):
            return
        self._health_at = now
        with self._lock:
            running, queued = self._running is not None, self._queued is not None
        doc = {
            "updated": time.time(),
            "pid": os.getpid(),
            "state": self._state,
            "source": self.source.name,
            "lines_read": self.tracker.lines_seen,
            "trigger_lines": self.tracker.trigger_lines,
            "burst_open": self.tracker.open is not None,
            "run_in_progress": running,
            "run_queued": queued,
            "runner_alive": self._runner.is_alive() or self._state == "stopped",
            "bursts": self.counts.bursts,
            "runs": self.counts.runs,
            "runs_failed": self.counts.runs_failed,
            "superseded": self.counts.superseded,
            "records_lost": getattr(self.source, "lost", 0),
            "last_run": self.counts.last_run,
        }
        try:
            write_json(self.health_path, doc)
        except OSError as exc:
            self.log(f"cannot write the health file {self.health_path}: {exc}", level="warning")

    def _shutdown(self) -> None:
        self._state = "stopping"
        with self._lock:
            self._lock.notify_all()
        self._runner.join(self.options.grace)
        if self._runner.is_alive():
            self.log(f"the run in progress did not finish within {self.options.grace:.0f}s: ending it", level="warning")
            with self._lock:
                self._aborted = True
            self.abort()
            self._runner.join(10.0)
        self._state = "stopped"
        self._save(time.monotonic(), force=True)
        self._write_health(force=True)
        self.source.close()

    # -- the runner ---------------------------------------------------------------------------------
    def _run_loop(self) -> None:
        while True:
            with self._lock:
                while self._queued is None and not self.stop.is_set():
                    self._lock.wait()
                if self.stop.is_set():
                    return  # a queued burst stays unjudged: read again after the restart
                burst = self._queued
                assert burst is not None  # the wait above ends on a queued burst or a stop
                self._queued, self._running = None, burst
            record = self._judge(burst)
            with self._lock:
                if not self._aborted:
                    self._running = None  # judged: the saved position may pass it now
                self.counts.last_run = record
                self._lock.notify_all()

    def _judge(self, burst: Burst) -> dict[str, Any]:
        started = time.time()
        try:
            record = dict(self.run_burst(burst))
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - a bug in one run must not stop the watch
            self.counts.runs_failed += 1
            self.log(f"the run failed: {type(exc).__name__}: {exc}", level="error")
            return {"error": f"{type(exc).__name__}: {exc}", "started": started}
        self.counts.runs += 1
        record.update(started=started, duration=round(time.time() - started, 3), triggers=dict(burst.triggers))
        return record


def _triggers(burst: Burst) -> str:
    return ", ".join(f"{name} x{count}" for name, count in burst.triggers.most_common())
