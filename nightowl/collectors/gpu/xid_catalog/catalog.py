"""NVIDIA's Xid catalog as data: loading, lookup, the action ranking and the action of one Xid.

The data lives in nightowl/knowledge/: ``xid_catalog.csv`` (one row per code: NVIDIA's own columns,
then nightowl's verdict action and plain-words meaning), ``xid_buckets.csv`` (catalog bucket ->
verdict action, with the reason) and ``xid_rules.yaml`` (sympathetic and NVLink codes, Xid 154
recovery-action names; its ``rules:`` are applied by ``rules``, which also holds ``action_for``). Primary
source: NVIDIA's catalog, https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html (copies in leptonai/gpud
``catalog_generated.go`` and NVIDIA/NVSentinel ``xiderrorsmapping.csv``). The tables below are loaded
once, on first use (module ``__getattr__``), so importing this module reads no file.

The catalog's "immediate action" is a bucket name (RESET_GPU, WORKFLOW_XID_48, ...);
``BUCKET_TO_ACTION`` maps each bucket to a verdict action (docs/reference.md). A code the catalog
does not know maps to ``escalate``, never to ``none``.

The prose a person reads (first steps, ``explain``) is in ``explanation``; a site's policy and
``judge`` (a kernel log's events -> one action) in ``policy``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from nightowl import knowledge
from nightowl.knowledge import actions as action_table


@dataclass(frozen=True)
class XidEntry:
    code: int
    mnemonic: str | None  # short form: without ROBUST_CHANNEL_, first of "A / B"
    meaning: str  # nightowl's plain words for the catalog description
    immediate_action: str  # catalog bucket, e.g. RESET_GPU; "" where the catalog gives none (162-172)
    investigatory_action: str | None
    source: str
    source_date: str
    description: str = ""  # the catalog's own words
    guidance: str | None = None  # the catalog's trigger text, for a code without a bucket
    architectures: str | None = None  # products the catalog marks YES (A100;H100;B100;GB200), "none"


def _short_mnemonic(mnemonic: str) -> str | None:
    first = mnemonic.split("/")[0].strip()
    return first.removeprefix("ROBUST_CHANNEL_") or None


@functools.cache
def _catalog() -> dict[int, XidEntry]:
    rows = knowledge.read_csv(
        "xid_catalog.csv", required=("code", "action", "meaning", "source", "catalog_date", "confidence")
    )
    catalog: dict[int, XidEntry] = {}
    for number, row in enumerate(rows, start=2):
        try:
            code = int(row["code"])
        except ValueError:
            raise knowledge.KnowledgeError(f"xid_catalog.csv: line {number}: code {row['code']!r}") from None
        catalog[code] = XidEntry(
            code=code,
            mnemonic=_short_mnemonic(row["mnemonic"]),
            meaning=row["meaning"],
            immediate_action=row["immediate_action"],
            investigatory_action=knowledge.optional(row["investigatory_action"]),
            source=f"[{row['confidence']}] {row['source']}",
            source_date=row["catalog_date"],
            description=row.get("description", ""),
            guidance=knowledge.optional(row.get("guidance", "")),
            architectures=knowledge.optional(row.get("architectures", "")),
        )
    return catalog


@functools.cache
def _bucket_to_action() -> dict[str, str]:
    rows = knowledge.read_csv("xid_buckets.csv", required=("bucket", "action", "source"))
    return {row["bucket"]: row["action"] for row in rows}


@functools.cache
def _rules() -> dict[str, Any]:
    rules = knowledge.read_yaml("xid_rules.yaml")
    if not isinstance(rules, dict):
        raise knowledge.KnowledgeError(f"{knowledge.path('xid_rules.yaml')}: not a mapping")
    return rules


def _codes(name: str) -> frozenset[int]:
    where = f"xid_rules.yaml: {name}"
    return frozenset(int(code) for code in knowledge.field(_rules().get(name) or {}, "codes", where))


@functools.cache
def _recovery() -> tuple[tuple[tuple[re.Pattern[str], str], ...], tuple[str, ...], dict[str, str]]:
    """(patterns in match order, values least drastic first, value -> verdict action)."""
    entries = _rules().get("recovery_actions") or []
    by_value = {}
    for index, entry in enumerate(entries):
        where = f"xid_rules.yaml: recovery_actions[{index}]"
        value = str(knowledge.field(entry, "value", where))
        pattern = knowledge.compile_pattern(str(knowledge.field(entry, "pattern", where)), where, ignore_case=True)
        by_value[value] = (pattern, str(knowledge.field(entry, "action", where)))
        knowledge.field(entry, "nvml_values", where)
    order = [str(value) for value in _rules().get("recovery_match_order") or []]
    if sorted(order) != sorted(by_value):
        raise knowledge.KnowledgeError("xid_rules.yaml: recovery_match_order must name every recovery action once")
    patterns = tuple((by_value[value][0], value) for value in order)
    return patterns, tuple(by_value), {value: action for value, (_, action) in by_value.items()}


@functools.cache
def _recovery_by_nvml() -> dict[int, str]:
    """NVML recovery-action number (the hex value in the Xid 154 text) -> our recovery value."""
    numbers: dict[int, str] = {}
    for index, entry in enumerate(_rules().get("recovery_actions") or []):
        where = f"xid_rules.yaml: recovery_actions[{index}]"
        for number in knowledge.field(entry, "nvml_values", where) or []:
            numbers[int(number)] = str(entry["value"])
    return numbers


@functools.cache
def _companions() -> tuple[frozenset[int], int]:
    """Codes that add detail to another code (171/172 to 48), and that code."""
    entry = _rules().get("companion_codes") or {}
    return _codes("companion_codes"), int(knowledge.field(entry, "of", "xid_rules.yaml: companion_codes"))


_LAZY: dict[str, Callable[[], Any]] = {
    "CATALOG": _catalog,
    "BUCKET_TO_ACTION": _bucket_to_action,
    "NVLINK5_CODES": lambda: _codes("nvlink5_codes"),
    "NVLINK_CODES": lambda: _codes("nvlink_codes"),
    "SYMPATHETIC_CODES": lambda: _codes("sympathetic_codes"),
    "MEMORY_CODES": lambda: _codes("memory_codes"),
    "RECOVERY_PATTERNS": lambda: _recovery()[0],
    "RECOVERY_ORDER": lambda: _recovery()[1],
    "RECOVERY_TO_ACTION": lambda: _recovery()[2],
    "RECOVERY_BY_NVML": _recovery_by_nvml,
    # Verdict actions from least to most drastic, and the first step of each: nightowl/knowledge/actions.csv.
    "ACTION_ORDER": action_table.names,
    "FIRST_STEP_BY_ACTION": lambda: {row.action: row.first_step for row in action_table.rows()},
}


def __getattr__(name: str) -> Any:
    """The tables above, read from nightowl/knowledge on first use."""
    if name in _LAZY:
        return _LAZY[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_LAST_PARENTHESISED = re.compile(r".*\(([^()]*)\)")
_RECOVERY_VALUE = re.compile(r"\bto\s+(0x[0-9a-fA-F]+)\b")  # "... from 0x0 (None) to 0x2 (OS Reboot)"
_NVLINK_SEVERITY = re.compile(r"\b(non-?fatal|fatal)\b", re.I)


def lookup(code: int) -> XidEntry | None:
    return _catalog().get(code)


def action_rank(action: str) -> int:
    """Rank in nightowl/knowledge/actions.csv; an action we do not know counts as `escalate`."""
    return action_table.rank(action)


def strictest(actions: Iterable[str]) -> str:
    """The most drastic action of ``actions``; ``none`` for an empty list."""
    best = "none"
    for action in actions:
        if action_rank(action) > action_rank(best):
            best = action if action in action_table.by_action() else "escalate"
    return best


def recovery_name(text: str | None) -> str | None:
    """The last parenthesised name of a Xid 154 text: ``... to 0x2 (Node Reboot Required)``."""
    if not text:
        return None
    match = _LAST_PARENTHESISED.match(text)
    return match.group(1).strip() if match else None


def recovery_from_text(text: str | None) -> str | None:
    """Our recovery value for a Xid 154 text: the NVML number it prints decides, else the name.

    Real drivers print names outside the catalog's list (``to 0x2 (OS Reboot)``), so the number
    (nvmlDeviceGpuRecoveryAction_t) is read first; see xid_rules.yaml catalog_agreement.
    """
    if not text:
        return None
    value = _RECOVERY_VALUE.search(text)
    if value is not None:
        known = _recovery_by_nvml().get(int(value.group(1), 16))
        if known is not None:
            return known
    return normalize_recovery_action(recovery_name(text) or text)


def normalize_recovery_action(name: str | None) -> str | None:
    """``GPU Reset Required`` -> ``gpu-reset`` etc.; None when the name is not one we know."""
    if not name:
        return None
    for pattern, value in _recovery()[0]:
        if pattern.search(name):
            return value
    return None


def strictest_recovery(values: Iterable[str | None]) -> str | None:
    known = [v for v in values if v in _recovery()[1]]
    return max(known, key=_recovery()[1].index) if known else None


def nvlink_severity(text: str | None) -> str | None:
    """``fatal`` / ``nonfatal`` when an NVLink5 Xid text says so (``Nonfatal``, ``Non-fatal``, ``Fatal``)."""
    if not text:
        return None
    match = _NVLINK_SEVERITY.search(text)
    if match is None:
        return None
    return "fatal" if match.group(1).lower() == "fatal" else "nonfatal"
