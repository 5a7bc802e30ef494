"""Bursts: a trigger line opens one, and it closes once no trigger came for ``debounce`` seconds (or it is
``max_age`` old, so an endless storm is still judged); its lines become kernel-log evidence of one run.

A burst keeps every trigger line and drops context first. Context lines (the NVRM, AER and other lines
between triggers that fire nothing) are kept up to ``MAX_LINES`` lines and ``MAX_CHARS`` characters;
past that, only the ``NEAR`` context lines just before and just after a trigger line are kept (an AER
header's detail lines, what the driver said before an Xid). Trigger lines and those neighbours have their
own, far larger budget (``MAX_TRIGGER_LINES``, ``MAX_TRIGGER_CHARS``); past it a trigger line is still
kept when its message (up to its first comma: the Xid code and GPU, not the pid) is one the burst has not
kept yet, so an Xid 79 after a storm of Xid 13 is never lost. Every line not kept is counted, and the
count goes into the bundle (``dropped_note``). A storm costs the same bounded memory as a short burst.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

from nightowl.collectors.gpu import kernel_log
from nightowl.watch.source import Batch, Position
from nightowl.watch.triggers import LineJudge

MAX_LINES = 2000  # context lines
MAX_CHARS = 1024 * 1024  # characters of context lines
MAX_TRIGGER_LINES = 20_000  # trigger lines and their neighbours
MAX_TRIGGER_CHARS = 3 * 1024 * 1024  # three bursts in flight stay well inside the follower's memory bound
NEAR = 8  # context lines kept before and after each trigger line once the context budget is spent
MAX_KEYS = 256  # distinct trigger messages remembered, to keep a new one past the trigger budget
SPARE_CHARS = 512 * 1024  # what those new messages may add past MAX_TRIGGER_CHARS

# What a kept line is, in ``Burst.marks``.
CONTEXT, TRIGGER, NEIGHBOUR = 0, 1, 2


def message_key(line: str) -> str:
    """A trigger line's message up to its first comma (``NVRM: Xid (PCI:0000:3b:00): 79``): the same
    key for one Xid repeated by every process of a storm, a new one for another code or GPU."""
    start = max(0, kernel_log.message_start(line))
    return line[start:].split(",", 1)[0][:160]


@dataclass
class Burst:
    start: Position  # where to resume to read the burst again (before the batch holding its first trigger)
    opened: float  # monotonic seconds
    last_trigger: float
    lines: list[str] = field(default_factory=list)
    marks: bytearray = field(default_factory=bytearray)  # CONTEXT, TRIGGER or NEIGHBOUR, one per kept line
    chars: int = 0  # of kept context lines
    evidence_lines: int = 0  # kept trigger lines and neighbours
    evidence_chars: int = 0
    dropped_context: int = 0
    dropped_triggers: int = 0
    triggers: Counter[str] = field(default_factory=Counter)
    superseded: int = 0  # queued bursts folded into this one while a run was in progress
    keys: set[str] = field(default_factory=set)  # messages of kept trigger lines (at most MAX_KEYS)
    recent: deque[str] = field(default_factory=lambda: deque(maxlen=NEAR))  # context dropped since the last kept line
    after: int = 0  # context lines still kept as neighbours of the last trigger line

    @property
    def dropped_lines(self) -> int:
        return self.dropped_context + self.dropped_triggers

    def add(self, line: str, trigger: bool = False) -> None:
        if trigger:
            self._add_trigger(line)
            return
        beside, self.after = self.after > 0, max(0, self.after - 1)
        if self._context_fits(line):
            self.recent.clear()  # a dropped line older than a kept one is never put back out of order
            self._keep(line, CONTEXT)
        elif beside and self._evidence_fits(line):
            self.recent.clear()
            self._keep(line, NEIGHBOUR)
        else:
            self.dropped_context += 1
            self.recent.append(line)  # kept after all if a trigger line follows within NEAR lines

    def _add_trigger(self, line: str) -> None:
        key = message_key(line)
        if not self._evidence_fits(line) and not self._new_key(key, line):
            self.dropped_triggers += 1
            return
        while self.recent and self._evidence_fits(self.recent[0]):
            self.dropped_context -= 1
            self._keep(self.recent.popleft(), NEIGHBOUR)
        self.recent.clear()
        self._keep(line, TRIGGER)
        if len(self.keys) < MAX_KEYS:
            self.keys.add(key)
        self.after = NEAR

    def _context_fits(self, line: str) -> bool:
        return len(self.lines) - self.evidence_lines < MAX_LINES and self.chars + len(line) <= MAX_CHARS

    def _evidence_fits(self, line: str) -> bool:
        return self.evidence_lines < MAX_TRIGGER_LINES and self.evidence_chars + len(line) <= MAX_TRIGGER_CHARS

    def _new_key(self, key: str, line: str) -> bool:
        if key in self.keys or len(self.keys) >= MAX_KEYS:
            return False
        return self.evidence_chars + len(line) <= MAX_TRIGGER_CHARS + SPARE_CHARS

    def _keep(self, line: str, mark: int) -> None:
        self.lines.append(line)
        self.marks.append(mark)
        if mark == CONTEXT:
            self.chars += len(line) + 1
        else:
            self.evidence_lines += 1
            self.evidence_chars += len(line) + 1

    def absorb(self, newer: Burst) -> Burst:
        """This queued burst and a newer one as one: the older start (nothing is skipped on a restart),
        the newer's lines through the same budgets (trigger lines first in line), all triggers counted."""
        self.recent.clear()
        self.after = 0
        for line, mark in zip(newer.lines, newer.marks, strict=True):
            if mark == TRIGGER:
                self._add_trigger(line)
            elif mark == NEIGHBOUR and self._evidence_fits(line):
                self.recent.clear()
                self._keep(line, NEIGHBOUR)
            else:
                self.add(line)
        self.recent.clear()
        self.dropped_context += newer.dropped_context
        self.dropped_triggers += newer.dropped_triggers
        self.triggers.update(newer.triggers)
        self.last_trigger = newer.last_trigger
        self.superseded += 1 + newer.superseded
        return self

    def dropped_note(self) -> str | None:
        """What the burst did not keep, for the bundle (the kernel-log output's ``.err``); None: nothing."""
        if not self.dropped_lines:
            return None
        return (
            f"nightowl watch: {self.dropped_lines} lines of the burst were not kept: {self.dropped_context} "
            f"context lines (beyond {MAX_LINES} lines or {MAX_CHARS} characters, but for {NEAR} beside each "
            f"trigger line) and {self.dropped_triggers} trigger lines (beyond {MAX_TRIGGER_LINES} lines or "
            f"{MAX_TRIGGER_CHARS} characters, each repeating a message kept before unless the burst had more than "
            f"{MAX_KEYS} distinct ones)\n"
        )


class BurstTracker:
    def __init__(self, judge: LineJudge, debounce: float, max_age: float) -> None:
        self.judge = judge
        self.debounce = debounce
        self.max_age = max_age
        self.open: Burst | None = None
        self.lines_seen = 0
        self.trigger_lines = 0

    def feed(self, batch: Batch, now: float) -> None:
        self.lines_seen += len(batch.lines)
        if not batch.may_matter:
            return
        burst = self.open
        for line in batch.lines:
            fired = self.judge.fired(line)
            if fired:
                self.trigger_lines += 1
                if burst is None:
                    burst = self.open = Burst(start=batch.before, opened=now, last_trigger=now)
                burst.last_trigger = now
                burst.triggers.update(fired)
            if burst is not None:
                burst.add(line, trigger=bool(fired))

    def due(self, now: float) -> Burst | None:
        """The open burst once it is over (quiet for ``debounce``, or ``max_age`` old), else None."""
        burst = self.open
        if burst is None:
            return None
        if now - burst.last_trigger >= self.debounce or now - burst.opened >= self.max_age:
            self.open = None
            return burst
        return None


def trigger_record(burst: Burst, source: str) -> dict[str, object]:
    """What started the run, for its manifest (``trigger``): the postmortem tells a watch burst from a run by hand
    and measures the time from the first trigger line to the capture. ``first_seen`` is when watch read that
    line (epoch seconds, from the burst's monotonic opening)."""
    import time

    first = next((line for line, mark in zip(burst.lines, burst.marks, strict=False) if mark == TRIGGER), None)
    return {
        "origin": "watch",
        "source": source,
        "first_line": (first or "")[:400],
        "first_seen": time.time() - (time.monotonic() - burst.opened),
        "triggers": dict(burst.triggers),
        "lines": len(burst.lines),
        "dropped_context": burst.dropped_context,
        "dropped_triggers": burst.dropped_triggers,
    }


def burst_description(host: str, burst: Burst) -> dict[str, Any]:
    """What a burst tells its run's Outcome (``RunHooks.describe``): its title, host and triggers."""
    title = "watch: " + ", ".join(sorted(burst.triggers))
    return {"title": title, "host": host, "source": "watch", "context": {"triggers": dict(burst.triggers)}}
