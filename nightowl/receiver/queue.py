"""The receiver apart from HTTP: a bounded queue, a fixed worker pool, de-duplication, the journal.

An alert storm costs at most ``workers`` runs at a time and ``queue`` waiting; every alert beyond
that is recorded as not captured, with the reason. The same alert delivered again (same
fingerprint and start time) runs once: it is a duplicate of a capture that is queued, running or
captured, never of one that failed or was not captured. Every outcome goes to
``<out>/captures.jsonl``, and so does every admitted capture the moment it is queued (with its
alert): the journal is the persisted queue. A receiver that stops (SIGTERM) lets running captures
finish for a grace period; whatever is still queued or running when it stops is resumed by the
next receiver on the same ``out``; only one receiver at a time owns an ``out`` (a lock), so a queued
capture is resumed once. A journal line that cannot be written refuses the delivery (the sender
retries) and makes ``/healthz`` unhealthy; a journal line that cannot be read is skipped and
reported, never taking the next record with it.
"""

from __future__ import annotations

import functools
import queue
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import replace
from typing import IO, Any

from nightowl.logline import LogLine, verdict_level
from nightowl.receiver.capture import Capture, plan_capture, run_capture
from nightowl.receiver.config import ServeConfig
from nightowl.receiver.journal import JOURNAL, Journal, journal_entry, owner_lock
from nightowl.receiver.notify import Notifier, summary
from nightowl.receiver.payload import Alert
from nightowl.receiver.storm import StormKey, StormWindows, fold, fold_members, storm_key

RECENT = 200
SEEN_CAP = 10000
STOP_GRACE = 20.0  # seconds running captures get to finish on SIGTERM (Kubernetes waits 30 by default)
# Captures the next receiver on the same out resumes: never run, still running when it stopped, or cut
# by the stop (a collector killed by systemd's TERM to the whole unit: the partial bundle is not a capture).
UNFINISHED = ("queued", "running", "interrupted")
FLUSH_EVERY_S = 0.1  # how often storm windows are checked for their time being up


class Receiver:
    """The bounded queue, the worker pool, de-duplication and the journal, apart from HTTP."""

    def __init__(
        self,
        config: ServeConfig,
        run: Callable[[Capture, ServeConfig], Capture] | None = None,
        log: Callable[[str], None] | None = None,
        run_storm: Callable[[Capture, ServeConfig], Capture] | None = None,
    ) -> None:
        self.config = config
        # The receiver's own stop goes into each run: a collector killed by it leaves the capture interrupted.
        self._run = run or (lambda capture, config: run_capture(capture, config, stopping=self._stopping))
        self._run_storm = run_storm or self._run
        # Storm captures' own lane (receiver/storm.py): a storm never takes a worker from another alert.
        self._storm_queue: queue.Queue[Capture | None] = queue.Queue()
        self._windows = StormWindows(config.storm)
        self._log = log or (lambda _message: None)
        # Unbounded underneath: `queue` is enforced at admission, and resumed captures always fit.
        self._queue: queue.Queue[Capture | None] = queue.Queue()
        self._lock = threading.Lock()
        self._seen: OrderedDict[tuple[str, ...], float] = OrderedDict()
        self.recent: deque[Capture | dict[str, Any]] = deque(maxlen=RECENT)
        self.busy = 0
        self._threads: list[threading.Thread] = []
        self.notifier = Notifier(config.notify) if config.notify.targets else None
        self._stopping = threading.Event()
        self._closed = False  # after stop(): nothing more is journaled, so unfinished stays unfinished
        self._resume: list[Capture] = []
        self._owner: IO[str] | None = None
        config.out_dir.mkdir(parents=True, exist_ok=True)
        self.journal = Journal(config.out_dir, self._log)
        self._load_journal()

    def log(self, line: str | LogLine) -> None:
        """A line for the serve log (the HTTP face logs logins through it)."""
        self._log(line)

    def health(self) -> tuple[bool, str | None]:
        """(healthy, why not): a receiver that cannot journal cannot promise to capture."""
        if self.journal.error:
            return False, f"cannot write {JOURNAL}: {self.journal.error}"
        dead = [t.name for t in self._threads if not t.is_alive()] if not self._stopping.is_set() else []
        if dead:
            return False, f"worker(s) {', '.join(dead)} stopped"
        return True, None

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        """Own the ``out`` folder (ReceiverBusy when another receiver does), resume, start the workers."""
        self._owner = owner_lock(self.config.out_dir)
        # Read again as owner: what another receiver did before it let go is what there is to resume.
        self._seen.clear()
        self.recent.clear()
        self._resume = []
        self._load_journal()
        if self.notifier is not None:
            self.notifier.start()
        for capture in self._resume:
            self._log(
                LogLine(
                    f"{capture.alert.name}: resumed ({capture.runbook} on {capture.host}), queued before a restart",
                    **_fields(capture, status="resumed"),
                )
            )
            (self._storm_queue if capture.storm is not None else self._queue).put(capture)
        self._resume = []
        lanes = [(f"capture-{i}", self._queue, self._run) for i in range(self.config.workers)]
        lanes += [(f"storm-{i}", self._storm_queue, self._run_storm) for i in range(self.config.storm.workers)]
        for name, lane, run in lanes:
            thread = threading.Thread(target=self._work, args=(lane, run), name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        flusher = threading.Thread(target=self._flush_windows, name="storm-windows", daemon=True)
        flusher.start()
        self._threads.append(flusher)

    def stop(self, timeout: float = STOP_GRACE) -> int:
        """Take no new capture; let running ones finish within ``timeout``; queued ones stay journaled.

        Returns how many captures are left unfinished for the next receiver to resume."""
        deadline = time.monotonic() + timeout
        self._release_windows(everything=True)  # journaled as queued: the next receiver runs them
        self._stopping.set()
        for _ in self._threads:
            self._queue.put(None)
            self._storm_queue.put(None)
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        if self.notifier is not None:
            self.notifier.stop(max(0.1, deadline - time.monotonic()))
        with self._lock:
            # A capture still running now dies with the process (or fails as the interpreter shuts
            # down): it stays `queued` in the journal and the next receiver resumes it.
            self._closed = True
            waiting = list(self._queue.queue) + list(self._storm_queue.queue)
            left = self.busy + sum(1 for item in waiting if item is not None)
        if self._owner is not None:
            self._owner.close()  # releases the lock
            self._owner = None
        return left

    # -- intake ---------------------------------------------------------------------------------
    def submit(self, alerts: list[Alert], received_at: float | None = None) -> list[Capture]:
        received_at = time.time() if received_at is None else received_at
        admitted = []
        for alert in alerts:
            capture = plan_capture(alert, self.config, received_at)
            key = storm_key(capture, self.config)
            admitted.append(self._hold(capture, key) if key is not None else self._admit(capture))
        return admitted

    # -- storms (receiver/storm.py) -----------------------------------------------------------------
    def _hold(self, capture: Capture, key: StormKey) -> Capture:
        """Hold a firing alert in its storm window; released with the others when the window ends."""
        dedupe = capture.alert.dedupe_key
        full = []
        with self._lock:
            if dedupe in self._seen or self._windows.holding(dedupe):
                capture.status, capture.reason = "duplicate", "same fingerprint and start already held or captured"
            elif self._stopping.is_set():
                capture.status, capture.reason = "not_captured", "the receiver is stopping"
            else:
                full = self._windows.hold(key, capture)
                capture.status = "held"
                capture.reason = f"storm window {key[1]}={key[2]} ({self.config.storm.window_s:g} s)"
            shown = replace(capture)
        for window in full:
            self._release(fold(window))
        self._log(
            LogLine(f"{shown.alert.name} [{shown.alert.status}] -> {shown.status}: {shown.reason}", **_fields(shown))
        )
        return shown

    def _flush_windows(self) -> None:
        while not self._stopping.wait(FLUSH_EVERY_S):
            self._release_windows()

    def _release_windows(self, everything: bool = False) -> None:
        with self._lock:
            windows = self._windows.due(everything)
        for window in windows:
            self._release(fold(window))

    def _release(self, capture: Capture) -> None:
        """A released window: its one alert admitted as any other, or one storm capture in the storm lane."""
        capture.status, capture.reason = "queued", None
        if capture.storm is None:
            self._admit(capture)
            return
        with self._lock:
            if self._storm_queue.qsize() >= self.config.storm.queue_size:
                waiting = self._storm_queue.qsize()
                _refuse(capture, f"storm queue full: {waiting} storm capture(s) waiting (raise `storm.queue`)")
            else:
                keys = [(member.alert.dedupe_key, member.received_at) for member in capture.storm.members]
                self._enqueue(capture, self._storm_queue, keys, refused="")
            shown = self._settle(capture)
        self._log(
            LogLine(
                f"{shown.alert.name}: {shown.status} storm of {len(shown.storm.members) if shown.storm else 0} "
                f"alert(s) on {shown.host}" + (f": {shown.reason}" if shown.reason else ""),
                **_fields(shown, level=_level(shown)),
            )
        )

    def _admit(self, capture: Capture) -> Capture:
        key = capture.alert.dedupe_key
        with self._lock:
            if capture.status == "queued" and key in self._seen:
                capture.status = "duplicate"
                first = time.strftime("%H:%M:%S", time.gmtime(self._seen[key]))
                capture.reason = f"same fingerprint and start already queued or captured at {first}Z"
            elif capture.status == "queued" and self._stopping.is_set():
                capture.status, capture.reason = "not_captured", "the receiver is stopping"
            elif capture.status == "queued" and self._queue.qsize() >= self.config.queue_size:
                busy = f"{self.busy} of {self.config.workers} worker(s) busy"
                _refuse(capture, f"queue full: {self._queue.qsize()} waiting and {busy} (raise `queue` or `workers`)")
            elif capture.status == "queued":
                # Not journaled, not promised: refused, so the sender delivers it again (an HTTP 503).
                self._enqueue(capture, self._queue, [(key, capture.received_at)], refused="refused: ")
            admitted = self._settle(capture)
        self._log(
            LogLine(
                f"{admitted.alert.name} [{admitted.alert.status}] -> {admitted.status}"
                + (f": {admitted.reason}" if admitted.reason else f" ({admitted.runbook} on {admitted.host})"),
                **_fields(admitted, level=_level(admitted)),
            )
        )
        return admitted

    def _enqueue(
        self,
        capture: Capture,
        lane: queue.Queue[Capture | None],
        keys: list[tuple[tuple[str, ...], float]],
        refused: str,
    ) -> None:
        """Under the lock: journal the capture with its alert before a worker can see it (a stop at any moment
        leaves a record to resume), then remember its alerts' keys and queue it; a journal that cannot be
        written refuses it (the reason starts with ``refused``)."""
        if self.journal.write(journal_entry(capture, with_alert=True)):
            for key, when in keys:
                self._remember(key, when)
            lane.put(capture)
        else:
            _refuse(capture, f"{refused}cannot write the journal ({self.journal.error})")

    def _settle(self, capture: Capture) -> Capture:
        """Under the lock: what was decided at admission, listed in ``recent`` and journaled (a queued capture
        was journaled with its alert already). A copy: a worker may take the capture the moment the lock is
        released."""
        self.recent.append(capture)
        settled = replace(capture)
        if settled.status != "queued":
            self.journal.write(journal_entry(settled))
        return settled

    def _remember(self, key: tuple[str, ...], when: float) -> None:
        self._seen[key] = when
        while len(self._seen) > SEEN_CAP:
            self._seen.popitem(last=False)

    # -- work -----------------------------------------------------------------------------------
    def _work(self, lane: queue.Queue[Capture | None], run: Callable[[Capture, ServeConfig], Capture]) -> None:
        while not self._stopping.is_set():
            capture = lane.get()
            if capture is None or self._stopping.is_set():
                return
            with self._lock:
                self.busy += 1
                capture.status = "running"
            try:
                run(capture, self.config)
            except Exception as exc:  # noqa: BLE001 - a worker never dies
                capture.status, capture.reason = "failed", f"{type(exc).__name__}: {exc}"
            finally:
                with self._lock:
                    self.busy -= 1
            try:
                self._finish(capture)
            except Exception as exc:  # noqa: BLE001 - a worker never dies; /healthz says what broke
                self.journal.error = self.journal.error or f"{type(exc).__name__}: {exc}"

    def _finish(self, capture: Capture) -> None:
        with self._lock:
            if self._closed:
                return
            if capture.status != "captured":
                # Never a duplicate of a capture that did not happen: a redelivery gets its chance.
                for alert in [m.alert for m in capture.storm.members] if capture.storm else [capture.alert]:
                    self._seen.pop(alert.dedupe_key, None)
            self.journal.write(journal_entry(capture))
        level = "error" if capture.status == "failed" else verdict_level(capture.host_status, capture.verdict)
        self._log(
            LogLine(
                f"{capture.alert.name} on {capture.host}: {capture.outcome()}"
                + (f" ({capture.bundle})" if capture.bundle else ""),
                **_fields(capture, level=level, bundle=capture.bundle, host_status=capture.host_status),
            )
        )
        if self.notifier is not None and capture.status in ("captured", "failed"):
            self.notifier.submit(capture.notice(), functools.partial(self._notified, capture))

    def _notified(self, capture: Capture, results: list[dict[str, Any]]) -> None:
        """The notifier's outcome, kept in the capture's record (its journal line is written again)."""
        with self._lock:
            capture.notifications = results
            if not self._closed:
                self.journal.write(journal_entry(capture))
        failed = any(r.get("status") != "sent" for r in results)
        self._log(
            LogLine(
                f"{capture.alert.name} on {capture.host}: notified {summary(results)}",
                **_fields(capture, level="warning" if failed else "info", status="notified"),
            )
        )

    def waiting(self) -> int:
        """Alerts not yet running: queued in either lane, or held in a storm window."""
        with self._lock:
            held = self._windows.count()
        return self._queue.qsize() + self._storm_queue.qsize() + held

    # -- journal (receiver/journal.py) ------------------------------------------------------------------
    def _load_journal(self) -> None:
        """The journal read back: captured alerts remembered, unfinished captures planned again to resume."""
        last, records = self.journal.read()
        for ident, entry in last.items():
            key = tuple(entry.get("dedupe_key") or ())
            if entry.get("status") == "captured" and key:
                self._remember(key, float(entry.get("received_at") or 0))
            elif entry.get("status") in UNFINISHED and ident in records:
                self._resume_capture(ident, entry, records[ident])
        for entry in list(last.values())[-RECENT:]:
            if entry.get("status") not in UNFINISHED:
                self.recent.append({k: v for k, v in entry.items() if k not in ("alert_record", "storm_records")})

    def _resume_capture(self, ident: str, entry: dict[str, Any], record: dict[str, Any]) -> None:
        """A capture queued or running when the last receiver stopped: plan it again and queue it."""
        alert = Alert.from_record(record)
        received_at = float(entry.get("received_at") or time.time())
        capture = plan_capture(alert, self.config, received_at)
        members = [
            plan_capture(Alert.from_record(r), self.config, received_at) for r in record.get("storm_records") or []
        ]
        members = [m for m in members if m.status == "queued"]
        if capture.status == "queued" and len(members) >= 2:  # a storm: its alerts that still match, folded again
            storm = entry.get("storm") or {}
            capture = fold_members(members[0], str(storm.get("by") or "rule"), str(storm.get("value") or "?"), members)
            for member in members[1:]:
                self._remember(member.alert.dedupe_key, received_at)
        capture.id = ident
        if capture.status != "queued":  # the rules changed since: record why it will not run
            if self._owner is not None:  # only the owner writes; a reader's view just shows it
                self.journal.write(journal_entry(capture))
            self.recent.append(capture)
            return
        self._remember(alert.dedupe_key, capture.received_at)
        self.recent.append(capture)
        self._resume.append(capture)

    def captures(self) -> list[dict[str, Any]]:
        with self._lock:
            items = list(self.recent)
        return [c.to_json() if isinstance(c, Capture) else c for c in reversed(items)]


def _refuse(capture: Capture, reason: str) -> None:
    capture.status, capture.reason = "not_captured", reason


def _level(capture: Capture) -> str:
    """A capture refused or lost is logged as a warning; any other admission as info."""
    return "warning" if capture.status == "not_captured" else "info"


def _fields(capture: Capture, **extra: Any) -> dict[str, Any]:
    """A capture's fields for JSON log lines (nightowl/logline.py): node, runbook, verdict, ..."""
    verdict = capture.verdict or {}
    fields = {
        "node": capture.host,
        "runbook": capture.runbook,
        "alert": capture.alert.name,
        "status": capture.status,
        "verdict": verdict.get("id"),
        "action": verdict.get("action"),
        "reason": capture.reason,
        "capture": capture.id,
    }
    return {**fields, **extra}
