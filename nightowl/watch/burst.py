"""Bursts: a trigger line opens one, and it closes once no trigger came for ``debounce`` seconds (or it is
``max_age`` old, so an endless storm is still judged); its lines become kernel-log evidence of one run.

A burst keeps at most ``MAX_LINES`` lines and ``MAX_CHARS`` characters (the rest are counted), so a storm
costs the same memory as a short burst.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from nightowl.watch.source import Batch, Position
from nightowl.watch.triggers import LineJudge

MAX_LINES = 2000
MAX_CHARS = 1024 * 1024


@dataclass
class Burst:
    start: Position  # where to resume to read the burst again (before the batch holding its first trigger)
    opened: float  # monotonic seconds
    last_trigger: float
    lines: list[str] = field(default_factory=list)
    chars: int = 0
    dropped_lines: int = 0
    triggers: Counter[str] = field(default_factory=Counter)
    superseded: int = 0  # queued bursts folded into this one while a run was in progress

    def add(self, line: str) -> None:
        if len(self.lines) >= MAX_LINES or self.chars + len(line) > MAX_CHARS:
            self.dropped_lines += 1
            return
        self.lines.append(line)
        self.chars += len(line) + 1

    def absorb(self, newer: Burst) -> Burst:
        """This queued burst and a newer one as one: the older start (nothing is skipped on a restart),
        every line that fits, all triggers counted."""
        for line in newer.lines:
            self.add(line)
        self.dropped_lines += newer.dropped_lines
        self.triggers.update(newer.triggers)
        self.last_trigger = newer.last_trigger
        self.superseded += 1 + newer.superseded
        return self


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
                burst.add(line)

    def due(self, now: float) -> Burst | None:
        """The open burst once it is over (quiet for ``debounce``, or ``max_age`` old), else None."""
        burst = self.open
        if burst is None:
            return None
        if now - burst.last_trigger >= self.debounce or now - burst.opened >= self.max_age:
            self.open = None
            return burst
        return None
