"""Which kernel-log lines open a burst: the triggers, as a table, read by the kernel-log parser itself.

A line is judged by what ``nightowl.collectors.gpu.kernel_log`` makes of it (the same patterns the
``kernel-log`` collector and ``nightowl xid`` use) and by the pattern table of
``nightowl/knowledge/kernel_patterns.csv``, so a line shape either learns is one a watcher sees; nothing
here matches kernel text on its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from nightowl import knowledge
from nightowl.collectors.gpu import kernel_log, kernel_patterns
from nightowl.knowledge import actions

# A line is judged by its first JUDGE_CHARS characters: the kernel stores no message longer than 1024 bytes
# (PRINTKRB_RECORD_MAX in the Linux kernel's kernel/printk/internal.h; LOG_LINE_MAX, 1024 - PREFIX_MAX, before
# 5.10), so this holds a journal's or syslog's prefix and the whole message. What follows in a longer line is
# not kernel text, and judging it would cost the follower time that grows with the line (a pattern regex
# searched over 16 KiB took a second).
JUDGE_CHARS = 2048

# What one line is, as signals: the event kinds (and notable sub-kinds) the parser found in it.
Signals = frozenset[str]


@dataclass(frozen=True)
class Trigger:
    name: str
    description: str
    default: bool
    signal: str  # what line_signals (or LineJudge, for hung_task_after_xid) finds in a line that fires it

    def fires(self, signals: Signals) -> bool:
        return self.signal in signals


def _triggers() -> tuple[Trigger, ...]:
    """The table of nightowl/knowledge/watch_triggers.csv. "hung-task-after-xid" needs an earlier Xid: the
    line judge keeps that memory."""
    rows = knowledge.read_csv("watch_triggers.csv", required=("name", "signal", "default", "description", "source"))
    table = []
    for row in rows:
        if row["default"] not in ("yes", "no"):
            raise knowledge.KnowledgeError(f"watch_triggers.csv: {row['name']}: default must be yes or no")
        table.append(Trigger(row["name"], row["description"], row["default"] == "yes", row["signal"]))
    return tuple(table)


TRIGGERS = _triggers()
BY_NAME = {trigger.name: trigger for trigger in TRIGGERS}
DEFAULT_TRIGGERS = tuple(trigger.name for trigger in TRIGGERS if trigger.default)


def resolve(names: Iterable[str]) -> tuple[str, ...]:
    """Trigger names from the command line (comma-separated, ``default`` for the default set); raises
    ValueError naming an unknown one."""
    chosen: dict[str, None] = {}
    for given in names:
        for name in filter(None, (part.strip() for part in given.split(","))):
            if name == "default":
                chosen.update(dict.fromkeys(DEFAULT_TRIGGERS))
            elif name in BY_NAME:
                chosen[name] = None
            else:
                raise ValueError(f"unknown trigger {name!r}; known: default, {', '.join(BY_NAME)}")
    return tuple(chosen) or DEFAULT_TRIGGERS


def line_signals(line: str) -> Signals:
    """What the kernel-log parser finds in one line. Pure (and the caller memoises it by message)."""
    result = kernel_log.parse_lines([line])
    found: set[str] = set()
    for event in result.events:
        kind = event["kind"]
        found.add(kind)
        if kind == "pcie_aer":
            severity = kernel_log.aer_severity(event)
            if severity in ("fatal", "nonfatal"):
                found.add(f"aer_{severity}")
        elif kind == "other_nvrm":
            subkind = event.get("subkind")
            if subkind in kernel_log.INIT_FAILED_SUBKINDS:
                found.add("gpu_init_failed")
            elif subkind in kernel_log.GSP_SUBKINDS:
                found.add("gsp_error")
            elif subkind == "driver_mismatch":
                found.add("driver_mismatch")
            elif subkind == "gpu_lost":
                found.add("fallen_off_bus")
    for record in result.host_errors:
        if record.get("source") == "edac" and record.get("severity") == "uncorrected":
            found.add("edac_uncorrected")
    if result.hung_tasks:
        found.add("hung_task")
    row = kernel_patterns.match(line)
    # a kernel_patterns.csv line whose action takes the GPU or node out (actions.csv takes_node_out): worth a run
    if row is not None and not row.harmless and actions.takes_node_out(row.action):
        found.add("pattern_action")
    return frozenset(found)


class LineJudge:
    """Which triggers a line fires. Remembers what it learnt per message (the text from the parser's
    anchor on, which repeats behind new time stamps in a storm), at most ``memo_limit`` of them."""

    def __init__(self, triggers: Iterable[str] = DEFAULT_TRIGGERS, memo_limit: int = 4096) -> None:
        self.triggers = tuple(BY_NAME[name] for name in triggers)
        self.memo: dict[str, Signals] = {}
        self.memo_limit = memo_limit
        self.xid_seen = False  # an Xid since the watch started: a hung task after it is a trigger

    def fired(self, line: str) -> list[str]:
        """The names of the triggers ``line`` fires (empty for most lines)."""
        line = line[:JUDGE_CHARS]
        start = kernel_log.message_start(line)
        if start < 0:
            return []
        message = line[start:]
        signals = self.memo.get(message)
        if signals is None:
            signals = line_signals(line)
            if len(self.memo) >= self.memo_limit:
                self.memo.clear()
            self.memo[message] = signals
        if "xid" in signals:
            self.xid_seen = True
        if self.xid_seen and "hung_task" in signals:
            signals = signals | {"hung_task_after_xid"}
        return [trigger.name for trigger in self.triggers if trigger.fires(signals)]


def describe() -> list[dict[str, Any]]:
    """The trigger table, for --help and the docs."""
    return [{"name": t.name, "default": t.default, "description": t.description} for t in TRIGGERS]
