"""Alert storms: the alerts of one failure domain folded into one capture over their hosts.

64 alerts from one rack in five seconds are one fault seen 64 times (a leaf switch, rack power, an
NVLink tray), not 64 incidents: 64 captures and 64 notes would bury it. A firing alert whose rule
folds (its ``storm_by``, else the config's ``storm.by`` labels) is held for ``storm.window`` seconds
from the first alert of its rule and domain value; then the alerts held are released together. One
alert alone is captured as any other; two or more become one capture running the rule's runbook over
their distinct hosts (one bundle, one journal record, one note), at most ``storm.max_hosts`` hosts a
capture (a full window is released at once and the next alert opens a new one). Storm captures run
in a lane of their own (``storm.workers``, ``storm.queue``), so a storm never holds up another alert.
See docs/receiver.md#alert-storms.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from nightowl.receiver.capture import Capture, Storm
from nightowl.receiver.config import ServeConfig, StormConfig

StormKey = tuple[str, str, str]  # (rule, label or "rule", value)


def storm_key(capture: Capture, config: ServeConfig) -> StormKey | None:
    """The window a planned capture folds into, or None: it is captured on its own at once."""
    if capture.status != "queued" or capture.alert.status != "firing" or capture.rule is None:
        return None
    rule = next((r for r in config.rules if r.name == capture.rule), None)
    if rule is None:
        return None
    if rule.storm_by == "rule":
        return (rule.name, "rule", rule.name)
    for label in [rule.storm_by] if rule.storm_by else list(config.storm.by):
        value = capture.alert.labels.get(label)
        if value:
            return (rule.name, label, value)
    return None


@dataclass
class Window:
    """The alerts held for one storm key since ``opened`` (monotonic seconds)."""

    key: StormKey
    opened: float
    members: list[Capture] = field(default_factory=list)

    def hosts(self) -> set[str]:
        return {str(m.host) for m in self.members}


class StormWindows:
    """The open windows; not thread-safe on its own (the receiver holds its lock around each call)."""

    def __init__(self, config: StormConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self._clock = clock
        self._open: dict[StormKey, Window] = {}
        self._held: set[tuple[str, ...]] = set()  # dedupe keys held: a redelivery within the window is a duplicate

    def holding(self, dedupe_key: tuple[str, ...]) -> bool:
        return dedupe_key in self._held

    def count(self) -> int:
        return sum(len(w.members) for w in self._open.values())

    def hold(self, key: StormKey, capture: Capture) -> list[Window]:
        """Hold ``capture``; returns the window it filled, released now (at most ``max_hosts`` hosts)."""
        released = []
        window = self._open.get(key)
        if (
            window is not None
            and str(capture.host) not in window.hosts()
            and len(window.hosts()) >= self.config.max_hosts
        ):
            released.append(self._pop(key))
            window = None
        if window is None:
            window = self._open[key] = Window(key, self._clock())
        window.members.append(capture)
        self._held.add(capture.alert.dedupe_key)
        return released

    def due(self, everything: bool = False) -> list[Window]:
        """The windows whose time is up (all of them when ``everything``: the receiver is stopping)."""
        now = self._clock()
        keys = [k for k, w in self._open.items() if everything or now - w.opened >= self.config.window_s]
        return [self._pop(k) for k in keys]

    def _pop(self, key: StormKey) -> Window:
        window = self._open.pop(key)
        for member in window.members:
            self._held.discard(member.alert.dedupe_key)
        return window


def fold(window: Window) -> Capture:
    """The capture a released window makes: its one alert as it came, or one storm capture."""
    first = window.members[0]
    if len(window.members) == 1:
        return first
    rule, by, value = window.key
    return fold_members(first, by, value, window.members)


def fold_members(first: Capture, by: str, value: str, members: list[Capture]) -> Capture:
    """One storm capture of ``members`` (planned captures of one rule), named after the first."""
    storm = Storm(by, value, list(members))
    return Capture(
        first.alert,
        first.received_at,
        rule=first.rule,
        runbook=first.runbook,
        host=f"{by}={value}",
        params=dict(first.params),  # one run, one parameter set: the first alert's
        storm=storm,
    )
