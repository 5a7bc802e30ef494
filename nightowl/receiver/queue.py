"""The receiver apart from HTTP: a bounded queue, a fixed worker pool, de-duplication, the journal.

An alert storm costs at most ``workers`` runs at a time and ``queue`` waiting; every alert beyond
that is recorded as not captured, with the reason. The same alert delivered again (same
fingerprint and start time) runs once. Every outcome goes to ``<out>/captures.jsonl``, which a
restarted receiver reads back so it does not capture again what it already captured.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from nightowl.receiver.capture import Capture, plan_capture, run_capture
from nightowl.receiver.config import ServeConfig
from nightowl.receiver.payload import Alert

RECENT = 200
SEEN_CAP = 10000
JOURNAL = "captures.jsonl"


class Receiver:
    """The bounded queue, the worker pool, de-duplication and the journal, apart from HTTP."""

    def __init__(
        self,
        config: ServeConfig,
        run: Callable[[Capture, ServeConfig], Capture] | None = None,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.config = config
        self._run = run or run_capture
        self._log = log or (lambda _message: None)
        self._queue: queue.Queue[Capture | None] = queue.Queue(maxsize=max(1, config.queue_size))
        self._lock = threading.Lock()
        self._seen: OrderedDict[tuple[str, ...], float] = OrderedDict()
        self.recent: deque[Capture | dict[str, Any]] = deque(maxlen=RECENT)
        self.busy = 0
        self._threads: list[threading.Thread] = []
        config.out_dir.mkdir(parents=True, exist_ok=True)
        self._load_journal()

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        for index in range(self.config.workers):
            thread = threading.Thread(target=self._work, name=f"capture-{index}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        for _ in self._threads:
            try:
                self._queue.put(None, timeout=max(0.1, deadline - time.monotonic()))
            except queue.Full:
                break
        for thread in self._threads:
            thread.join(max(0.1, deadline - time.monotonic()))

    # -- intake ---------------------------------------------------------------------------------
    def submit(self, alerts: list[Alert], received_at: float | None = None) -> list[Capture]:
        received_at = time.time() if received_at is None else received_at
        return [self._admit(plan_capture(alert, self.config, received_at)) for alert in alerts]

    def _admit(self, capture: Capture) -> Capture:
        key = capture.alert.dedupe_key
        with self._lock:
            if capture.status == "queued" and key in self._seen:
                capture.status = "duplicate"
                first = time.strftime("%H:%M:%S", time.gmtime(self._seen[key]))
                capture.reason = f"same fingerprint and start already received at {first}Z"
            elif capture.status == "queued":
                try:
                    self._queue.put_nowait(capture)
                except queue.Full:
                    capture.status = "not_captured"
                    capture.reason = (
                        f"queue full: {self._queue.qsize()} waiting and {self.busy} of "
                        f"{self.config.workers} worker(s) busy (raise `queue` or `workers`)"
                    )
                else:
                    self._remember(key, capture.received_at)
            self.recent.append(capture)
            # What was decided at admission: a worker may take the capture the moment the lock is released.
            admitted = replace(capture)
        if admitted.status != "queued":
            self._journal(capture)
        self._log(
            f"{admitted.alert.name} [{admitted.alert.status}] -> {admitted.status}"
            + (f": {admitted.reason}" if admitted.reason else f" ({admitted.runbook} on {admitted.host})")
        )
        return admitted

    def _remember(self, key: tuple[str, ...], when: float) -> None:
        self._seen[key] = when
        while len(self._seen) > SEEN_CAP:
            self._seen.popitem(last=False)

    # -- work -----------------------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            capture = self._queue.get()
            if capture is None:
                return
            with self._lock:
                self.busy += 1
                capture.status = "running"
            try:
                self._run(capture, self.config)
            except Exception as exc:  # noqa: BLE001 - a worker never dies
                capture.status, capture.reason = "failed", f"{type(exc).__name__}: {exc}"
            finally:
                with self._lock:
                    self.busy -= 1
            self._journal(capture)
            self._log(f"{capture.alert.name}: {capture.status} {capture.bundle or capture.reason or ''}")

    def waiting(self) -> int:
        return self._queue.qsize()

    # -- journal ----------------------------------------------------------------------------------
    def _journal(self, capture: Capture) -> None:
        line = json.dumps(capture.to_json(), default=str)
        with self._lock, (self.config.out_dir / JOURNAL).open("a") as handle:
            handle.write(line + "\n")

    def _load_journal(self) -> None:
        path = self.config.out_dir / JOURNAL
        if not path.exists():
            return
        for line in path.read_text(errors="replace").splitlines()[-RECENT:]:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            self.recent.append(entry)
            if entry.get("status") in ("captured", "failed") and entry.get("dedupe_key"):
                self._remember(tuple(entry["dedupe_key"]), float(entry.get("received_at") or 0))

    def captures(self) -> list[dict[str, Any]]:
        with self._lock:
            items = list(self.recent)
        return [c.to_json() if isinstance(c, Capture) else c for c in reversed(items)]
