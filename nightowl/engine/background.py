"""Collect nodes that run in the background (``background: true``) while the walk goes on.

A first look's health checks, model card and stream probe need not hold up its scrape windows: the
node marked ``background`` starts its collectors and the walk moves straight on to the next nodes (their
``wait:`` pauses and their scrapes), so the slow parts elapse inside the windows instead of before them.
What a background node collects is joined, and recorded on its own visit in the trace, before anything
reads facts: the next decide, verdict or cannot-judge node, a derived collector, or a node that takes one
of the same entries. The engine still knows nothing of what is collected.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

# `wait:` is seconds, a parameter name, or a parameter over a number (`window_seconds / 2`: the two halves
# of one window taken as the window before and the window now).
WAIT_FORM = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:/\s*([0-9]+(?:\.[0-9]+)?)\s*)?$")


def check_wait(wait: float | str | None) -> float | str | None:
    """Reject a ``wait:`` that is neither seconds, a parameter name, nor ``name / number`` (number > 0)."""
    if isinstance(wait, str):
        match = WAIT_FORM.match(wait)
        if match is None or (match.group(2) is not None and float(match.group(2)) <= 0):
            raise ValueError(f"wait {wait!r}: seconds, a parameter name, or a parameter over a number (name / 2)")
    return wait


def wait_seconds(wait: float | str | None, params: Mapping[str, Any]) -> float | None:
    """The seconds a ``wait:`` stands for with these parameter values; None when it names no number."""
    if wait is None or isinstance(wait, (int, float)):
        return None if wait is None else float(wait)
    match = WAIT_FORM.match(wait)
    value = params.get(match.group(1)) if match else None
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    return float(value) / float(match.group(2)) if match and match.group(2) else float(value)


class Visit(Protocol):
    """What this module writes on the trace's visit of a background node (runner.NodeVisit)."""

    collectors: dict[str, str]
    status: str
    duration: float


@dataclass
class _Pending:
    future: Future[None]
    visit: Visit
    entries: list[str]
    deferred: list[str]  # derived collectors of the node: computed at the join, in the walk's thread
    started: float


class Background:
    """The background nodes of one walk: started on their own threads, joined before facts are read.

    ``derived`` says whether an entry is a derived collector (it reads facts, so it never runs early);
    ``stop`` is the run's interrupt: once set, closing the walk does not wait for what is still running.
    """

    def __init__(self, derived: Callable[[str], bool], stop: threading.Event) -> None:
        self._derived = derived
        self._stop = stop
        self._pending: list[_Pending] = []
        self._pool: ThreadPoolExecutor | None = None

    def start(self, collect: Callable[[list[str]], None], entries: list[str], visit: Visit) -> None:
        """Start a node's command collectors with ``collect`` on a thread of their own; do not wait."""
        commands = [e for e in entries if not self._derived(e)]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="background")
        deferred = [e for e in entries if e not in commands]
        self._pending.append(
            _Pending(self._pool.submit(collect, commands), visit, list(entries), deferred, time.monotonic())
        )

    def needed_by(self, collect: list[str] | None) -> bool:
        """Whether the next node must wait for the background: it reads facts (not a collect node, or a
        derived collector), or it takes an entry a background node is taking."""
        if not self._pending:
            return False
        if collect is None:
            return True
        running = {e for p in self._pending for e in p.entries}
        return any(self._derived(e) or e in running for e in collect)

    def join(self, collections: Mapping[str, Any], worst: Callable[[set[str]], str]) -> list[str]:
        """Wait for every background node, record each one's collectors and status on its visit, and
        return the derived entries left for the caller to collect; re-raise what a node raised
        (an interrupt, an overloaded run) once all are recorded."""
        raised: BaseException | None = None
        deferred: list[str] = []
        pending, self._pending = self._pending, []
        for item in pending:
            try:
                item.future.result()
            except BaseException as exc:  # noqa: BLE001 - re-raised below, after every node is recorded
                raised = raised or exc
            item.visit.collectors = {e: collections[e].status for e in item.entries if e in collections}
            statuses = set(item.visit.collectors.values())
            item.visit.status = "ok" if statuses <= {"ok"} else worst(statuses)
            item.visit.duration = time.monotonic() - item.started
            deferred += item.deferred
        if raised is not None:
            raise raised
        return deferred

    def close(self) -> None:
        """End of the walk: wait for what still runs (its commands go to the bundle), unless interrupted."""
        if self._pool is None:
            return
        stopping = self._stop.is_set()
        self._pool.shutdown(wait=not stopping, cancel_futures=stopping)
        self._pool, self._pending = None, []
