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


# Event kinds listed besides Xids: every one the kernel-log parser names (other_nvrm only with a sub-kind).
_LISTED_KINDS = frozenset({"xid", "sxid", "fallen_off_bus", "gpu_reset_required", "fabric_manager"})


# other_nvrm sub-kind -> the kind of nightowl/knowledge/kernel_patterns.csv that judges it.
_PATTERN_KIND_OF_SUBKIND: dict[str, str] = {
    "driver_mismatch": "driver_mismatch",
    "driver_conflict": "driver_conflict",
    "rm_init_adapter_failed": "rm_init_failed",
    "gsp_boot_failed": "rm_init_failed",
    "probe_failed": "rm_init_failed",
    "pci_resource_invalid": "rm_init_failed",
    "gsp_heartbeat_timeout": "gsp_timeout",
    "gsp_timeout": "gsp_timeout",
}


def judged_events(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A kernel log's events, host-error records and hung tasks in the shape ``xid_catalog.explain``
    reads, for ``nightowl xid``. The runbooks do not judge these through the xid-judgement: host and
    PCIe records need the bus attribution of the ``pcie-attribution`` collector (an NVMe's GHES record
    is not the GPU's), so they route on the kernel-log facts instead.

    The parser keeps a message without its ``NVRM:`` tag and an AER report's severity on its detail
    lines; the pattern table matches whole lines, so both are put back before matching.
    """
    events: list[dict[str, Any]] = []
    for event in result["events"]:
        kind, subkind = event["kind"], event.get("subkind")
        if kind == "pcie_aer":
            text = "\n".join([str(event.get("text") or ""), *(event.get("lines") or [])])
            events.append(
                {**event, "kind": "aer", "text": text, "subkind": f"pcie_aer {event.get('severity') or ''}".strip()}
            )
        elif kind == "other_nvrm" and subkind and subkind != "driver_load":
            pattern_kind = _PATTERN_KIND_OF_SUBKIND.get(subkind, kind)
            events.append({**event, "kind": pattern_kind, "text": "NVRM: " + str(event.get("text") or "")})
        elif kind in _LISTED_KINDS:
            events.append(event)
    for record in result.get("host_errors") or []:
        text = str(record.get("text") or "")
        if record.get("source") == "ghes" and record.get("severity"):
            # the record's opener says nothing of its severity; the pattern table keys on the severity line
            text = f"{{0}}[Hardware Error]: event severity: {record['severity']}"
        where = record.get("dimm") or record.get("pci")
        label = f"{record.get('source')} {record.get('severity') or ''}".strip()
        events.append({"kind": "edac", "time": record.get("time"), "pci": where, "code": None, "text": text,
                       "count": record.get("count", 1), "subkind": label})  # fmt: skip
    for task in result.get("hung_tasks") or []:
        text = f"INFO: task {task.get('task')}:{task.get('pid')} blocked for more than {task.get('seconds')} seconds"
        after = "; ".join(
            f"after Xid {', '.join(map(str, codes))} on {pci}" for pci, codes in (task.get("after_xids") or {}).items()
        )
        label = f"hung task {task.get('task')}" + (f" ({after})" if after else "")
        events.append({"kind": "hung_task", "time": task.get("time"), "pci": None, "code": None, "text": text,
                       "count": 1, "subkind": label})  # fmt: skip
    return events
