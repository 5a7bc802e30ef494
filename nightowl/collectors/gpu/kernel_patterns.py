"""Kernel and driver lines that signal GPU or host trouble without being an Xid, as data.

Data: ``nightowl/knowledge/kernel_patterns.csv``: one row per line shape (RmInitAdapter failures,
GSP timeouts, another driver holding the GPU, driver/library version mismatch, MCE/EDAC/GHES, PCIe
AER, hung tasks, and lines known to be harmless), with its regex, the event kind it belongs to, the
verdict action, the first step and the public source (issue threads, kernel documentation, NVIDIA
driver source). Loaded once, on first use.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nightowl import knowledge

# What an event of each kind means when no row's pattern matches its text (the parser may name the
# kind without keeping the whole line): action and reason.
KIND_DEFAULTS: dict[str, tuple[str, str]] = {
    "rm_init_failed": ("reboot-node", "GPU failed to initialise (RmInitAdapter): cold power-cycle, repeat -> ticket"),
    "gsp_timeout": ("reset-gpu", "GSP firmware timeout: treated as Xid 119 (RESET_GPU)"),
    "driver_conflict": ("reconfigure", "driver conflict: another driver (nouveau) holds the GPU"),
    "driver_mismatch": ("reboot-node", "driver mismatch: kernel module and user space differ; reboot to load one"),
    "edac": ("escalate", "host memory/CPU hardware error (MCE/EDAC) of unknown severity"),
    "aer": ("escalate", "PCIe AER error of unknown severity"),
    "hung_task": ("escalate", "a task blocked for minutes; not tied to the GPU by this log"),
}


@dataclass(frozen=True)
class KernelPattern:
    id: str
    kind: str
    pattern: re.Pattern[str]
    meaning: str
    action: str
    first_step: str
    verdict_id: str
    harmless: bool
    source: str


@functools.cache
def patterns() -> tuple[KernelPattern, ...]:
    rows = knowledge.read_csv(
        "kernel_patterns.csv", required=("id", "kind", "pattern", "meaning", "action", "first_step", "source")
    )
    loaded = []
    for number, row in enumerate(rows, start=2):
        where = f"kernel_patterns.csv: line {number}"
        loaded.append(
            KernelPattern(
                id=row["id"],
                kind=row["kind"],
                pattern=knowledge.compile_pattern(row["pattern"], where),
                meaning=row["meaning"],
                action=row["action"],
                first_step=row["first_step"],
                verdict_id=row["verdict_id"],
                harmless=row.get("harmless") == "yes",
                source=row["source"],
            )
        )
    return tuple(loaded)


def match(text: str | None, kind: str | None = None) -> KernelPattern | None:
    """The first row whose regex finds ``text``: rows of ``kind`` first, then any row."""
    if not text:
        return None
    rows = patterns()
    for candidate in [row for row in rows if row.kind == kind] + [row for row in rows if row.kind != kind]:
        if candidate.pattern.search(text):
            return candidate
    return None


def judge_line(event: Mapping[str, Any]) -> tuple[str, str] | None:
    """(verdict action, reason) for a non-Xid kernel event, or None when nothing is known of it."""
    kind = str(event.get("kind") or "")
    row = match(event.get("text"), kind)
    if row is not None:
        why = "known harmless" if row.harmless else row.meaning.split(";")[0]
        return row.action, f"{row.id}: {why} -> {row.action}"
    if kind in KIND_DEFAULTS:
        action, why = KIND_DEFAULTS[kind]
        return action, f"{kind}: {why} -> {action}"
    return None
