"""NVSwitch SXids and Fabric Manager lines as data, and the action each one calls for.

Data: ``nightowl/knowledge/sxid_catalog.csv`` (one row per SXid: fatal, which reset it needs, the
verdict action) and ``fabric_manager_errors.csv`` (Fabric Manager log lines and states). Sources:
the NVIDIA Fabric Manager User Guide, "Error Handling" tables and the bare-metal "Runtime NVSwitch and
GPU Errors" rules (https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/index.html),
and NVIDIA/NVSentinel's ``sxiderrorsmapping.csv`` for the codes the guide does not list. Loaded once,
on first use. SXids exist only up to Hopper-generation NVSwitch systems (the guide: "no longer
applicable to DGX B200/B300").
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nightowl import knowledge

RESET_VALUES = ("none", "gpu", "fabric")


@dataclass(frozen=True)
class SxidEntry:
    code: int
    name: str
    fatal: bool  # the catalog's classification; a logged line's own Fatal/Non-fatal word outranks it
    needs_reset: str  # none | gpu (the GPUs on the access port and their workload) | fabric (all GPUs+NVSwitches)
    verdict_action: str
    description: str
    first_step: str


@dataclass(frozen=True)
class FabricManagerLine:
    pattern: str  # a literal fragment of the line, matched case-insensitively
    meaning: str
    verdict_action: str
    first_step: str
    source: str


@functools.cache
def catalog() -> dict[int, SxidEntry]:
    rows = knowledge.read_csv("sxid_catalog.csv", required=("code", "fatal", "needs_reset", "verdict_action", "source"))
    entries: dict[int, SxidEntry] = {}
    for number, row in enumerate(rows, start=2):
        if not row["code"].isdigit() or row["needs_reset"] not in RESET_VALUES or row["fatal"] not in ("yes", "no"):
            raise knowledge.KnowledgeError(f"sxid_catalog.csv: line {number}: bad code, fatal or needs_reset")
        code = int(row["code"])
        entries[code] = SxidEntry(
            code=code,
            name=row["name"],
            fatal=row["fatal"] == "yes",
            needs_reset=row["needs_reset"],
            verdict_action=row["verdict_action"],
            description=row["description"],
            first_step=row["action"],
        )
    return entries


@functools.cache
def fabric_manager_lines() -> tuple[FabricManagerLine, ...]:
    rows = knowledge.read_csv("fabric_manager_errors.csv", required=("pattern", "meaning", "verdict_action", "source"))
    return tuple(
        FabricManagerLine(row["pattern"], row["meaning"], row["verdict_action"], row["action"], row["source"])
        for row in rows
    )


def lookup(code: int) -> SxidEntry | None:
    return catalog().get(code)


def judge_sxid(event: Mapping[str, Any]) -> tuple[str, str]:
    """(verdict action, reason) for one SXid event of the kernel log.

    The catalog's reset decides (the guide: a fatal SXid on an access port -> reset the GPUs of the
    workload; always-fatal and trunk SXids -> reset every GPU and NVSwitch or restart the host); a code
    the catalog lists as needing no reset is fatal only when its line says Fatal (bare-metal rule:
    reset the GPU); an SXid the catalog does not hold escalates.
    """
    code = event.get("code")
    line_fatal = event.get("severity") == "fatal"
    word = "fatal" if line_fatal else "non-fatal" if event.get("severity") else "unclassified"
    entry = lookup(code) if isinstance(code, int) else None
    if entry is None:
        return "escalate", f"{word} SXid {code}: not in the SXid catalog we carry -> escalate"
    label = f"{word} SXid {code} ({entry.name or 'no name'})"
    if entry.needs_reset != "none":
        what = "the GPUs on its access port" if entry.needs_reset == "gpu" else "every GPU and NVSwitch (the fabric)"
        return entry.verdict_action, f"{label}: the catalog says reset {what} -> {entry.verdict_action}"
    if line_fatal:
        return "reset-gpu", f"{label}: the line says Fatal (the catalog: no reset) -> reset the affected GPUs"
    return "none", f"{label}: not fatal, no reset needed (the catalog: {entry.first_step})"


def judge_fabric_manager(text: str | None) -> tuple[str, str]:
    """(verdict action, reason) for one Fabric Manager line; a line we do not know escalates."""
    lowered = (text or "").lower()
    for line in fabric_manager_lines():
        if line.pattern.lower() in lowered:
            return line.verdict_action, f"Fabric Manager: {line.meaning} -> {line.verdict_action}"
    return "escalate", "Fabric Manager line not in the catalog we carry -> escalate"
