"""NVIDIA's Xid catalog as data, and the rules that turn logged Xids into one first action.

The data lives in nightowl/knowledge/: ``xid_catalog.csv`` (one row per code: NVIDIA's own columns,
then nightowl's verdict action and plain-words meaning), ``xid_buckets.csv`` (catalog bucket ->
verdict action, with the reason) and ``xid_rules.yaml`` (sympathetic and NVLink codes, Xid 154
recovery-action names). Primary source: NVIDIA's catalog,
https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html (copies in leptonai/gpud
``catalog_generated.go`` and NVIDIA/NVSentinel ``xiderrorsmapping.csv``). The tables below are loaded
once, on first use (module ``__getattr__``), so importing this module reads no file.

The catalog's "immediate action" is a bucket name (RESET_GPU, WORKFLOW_XID_48, ...);
``BUCKET_TO_ACTION`` maps each bucket to a verdict action (docs/reference.md). A code the catalog
does not know maps to ``escalate``, never to ``none``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from nightowl import knowledge


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
    "RECOVERY_PATTERNS": lambda: _recovery()[0],
    "RECOVERY_ORDER": lambda: _recovery()[1],
    "RECOVERY_TO_ACTION": lambda: _recovery()[2],
    "RECOVERY_BY_NVML": _recovery_by_nvml,
}


def __getattr__(name: str) -> Any:
    """The tables above, read from nightowl/knowledge on first use."""
    if name in _LAZY:
        return _LAZY[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Verdict actions (docs/reference.md) from least to most drastic. `escalate` (a person must look, we
# cannot name the fix) outranks every software/reset action but not a known reboot or hardware replacement.
ACTION_ORDER: tuple[str, ...] = (
    "none",
    "restart-app",
    "free-disk-space",
    "scale-out",
    "reconfigure",
    "reset-gpu",
    "drain-and-reset",
    "escalate",
    "reboot-node",
    "hardware-ticket",
)

_LAST_PARENTHESISED = re.compile(r".*\(([^()]*)\)")
_RECOVERY_VALUE = re.compile(r"\bto\s+(0x[0-9a-fA-F]+)\b")  # "... from 0x0 (None) to 0x2 (OS Reboot)"
_NVLINK_SEVERITY = re.compile(r"\b(non-?fatal|fatal)\b", re.I)

# First step per verdict action, in words a person at 3 a.m. can follow; bucket meanings from the
# catalog's Resolution Buckets sheet (see nightowl/knowledge/xid_buckets.csv).
FIRST_STEP_BY_ACTION: dict[str, str] = {
    "none": "no action on its own; check which Xid it follows",
    "restart-app": "restart the application; suspect the GPU only if this Xid repeats on it across "
    "different applications",
    "scale-out": "add capacity",
    "free-disk-space": "free space on the full filesystem (old images, caches, logs), then retry",
    "reconfigure": "update the driver / firmware, then retry",
    "reset-gpu": "reset the GPU (nvidia-smi -r after stopping its processes); if it recurs reboot, then replace",
    "drain-and-reset": "drain the GPU's peer-to-peer / NVLink users, then reset the GPU; if it recurs, "
    "reboot and open a hardware ticket",
    "escalate": "collect nvidia-bug-report.sh output and escalate to NVIDIA support",
    "reboot-node": "drain the node and power-cycle it; if it recurs, open a hardware ticket",
    "hardware-ticket": "open a hardware ticket (check seating and auxiliary power first)",
}
FIRST_STEP_BY_BUCKET: dict[str, str] = {
    "IGNORE": "no action on its own; if it follows another Xid act on that one",
    "RESTART_BM": "drain the node, run nvidia-bug-report.sh, then power-cycle it (a GPU reset cannot "
    "work); if it recurs, hardware ticket (GPU, riser, slot, power)",
    "WORKFLOW_XID_45": "act on the Xid it follows; if it is alone, restart nvidia-fabricmanager",
    "WORKFLOW_XID_48": "reset the GPU (drain first if Xid 63/64 came with it); check SRAM Threshold "
    "Exceeded and run field diagnostics if set",
    "WORKFLOW_NVLINK_ERR": "check nvidia-smi nvlink -s / -e, then reset the GPU or reboot; replace if it recurs",
    "WORKFLOW_NVLINK5_ERR": "check nvidia-smi nvlink -s / -e and follow the Xid 154 that accompanies it; "
    "fatal: drain and reset",
    "CHECK_UVM": "reset the GPU (the catalog: reset where UVM/vGPU is in use, which every CUDA application "
    "does; otherwise ignore)",
    "UPDATE_SWFW": "update the driver and GPU firmware to current versions, then retry",
    "RESTART_VM": "restart the VM that owns the GPU (on bare metal: reboot the node)",
    "CONTACT_SUPPORT": "collect nvidia-bug-report.sh output and open a case with NVIDIA support",
}
FIRST_STEP_BY_CODE: dict[int, str] = {
    63: "nothing now; a row remap is pending: reset the GPU at a convenient time to apply it",
    64: "reset the GPU; check 'Remapping Failure Occurred' in nvidia-smi -q: RMA candidate",
    94: "restart the application that was hit; the GPU keeps running: schedule a GPU reset when convenient "
    "(the catalog's advice)",
    95: "stop every process on the GPU and reset it (nvidia-smi -r); if it recurs reboot, then replace",
}
UNKNOWN_FIRST_STEP = "look up this code in NVIDIA's Xid catalog; collect nvidia-bug-report.sh output and escalate"


def lookup(code: int) -> XidEntry | None:
    return _catalog().get(code)


def action_rank(action: str) -> int:
    """Position in ACTION_ORDER; an action we do not know counts as `escalate`."""
    try:
        return ACTION_ORDER.index(action)
    except ValueError:
        return ACTION_ORDER.index("escalate")


def strictest(actions: Iterable[str]) -> str:
    """The most drastic action of ``actions``; ``none`` for an empty list."""
    best = "none"
    for action in actions:
        if action_rank(action) > action_rank(best):
            best = action if action in ACTION_ORDER else "escalate"
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


def action_for(code: int, text: str | None = None) -> str:
    """The verdict action for one Xid, reading the text where the catalog says the text decides."""
    entry = lookup(code)
    if entry is None or not entry.immediate_action:
        return "escalate"  # unknown code, or the catalog names no action: a person reads its words
    if code == 154:
        recovery = recovery_from_text(text)
        return _recovery()[2][recovery] if recovery else _bucket_to_action()["XID_154"]
    if code in _codes("nvlink5_codes"):
        severity = nvlink_severity(text)
        if severity == "fatal":
            return "drain-and-reset"  # link/fabric fatal: peers must stop before the reset [P decode sheet]
        if severity == "nonfatal":
            return "none"  # warning only; repeats on one link are judged by the runbook
    return _bucket_to_action().get(entry.immediate_action, "escalate")


def _first_step(code: int | None, entry: XidEntry | None, action: str, text: str | None) -> str:
    if code is None:
        return FIRST_STEP_BY_ACTION.get(action, UNKNOWN_FIRST_STEP)
    if entry is None:
        return UNKNOWN_FIRST_STEP
    if not entry.immediate_action:
        said = f"; the catalog says: {entry.guidance}" if entry.guidance else ""
        return f"the catalog names no action for this code{said}; collect nvidia-bug-report.sh output and escalate"
    if code == 154:
        name = recovery_name(text)
        return f"follow the driver's recovery action: {name}" if name else UNKNOWN_FIRST_STEP
    if code in FIRST_STEP_BY_CODE:
        return FIRST_STEP_BY_CODE[code]
    if action == "none" and code in _codes("nvlink5_codes"):
        return "non-fatal: no action now; watch for repeats on the same link"
    return FIRST_STEP_BY_BUCKET.get(entry.immediate_action) or FIRST_STEP_BY_ACTION[action]


# Kernel-log event kinds other than xid: what they mean and the action they imply.
_KIND_EXPLAINED: dict[str, tuple[str, str, str]] = {
    "fallen_off_bus": (
        "GPU fell off the bus (no Xid line)",
        "reboot-node",
        FIRST_STEP_BY_BUCKET["RESTART_BM"],
    ),
    "gpu_reset_required": (
        "driver reports the GPU needs a reset",
        "reset-gpu",
        FIRST_STEP_BY_ACTION["reset-gpu"],
    ),
    "oom_kill": (
        "the kernel killed a process: host out of memory",
        "none",
        "check the process's memory limit",
    ),
    "pcie_aer": (
        "PCIe Advanced Error Reporting event",
        "none",
        "watch the link; uncorrected or repeating errors: check riser, slot and cabling",
    ),
    "other_nvrm": ("NVIDIA driver message", "none", "read it alongside the Xids around it"),
}


def _explain_sxid(event: Mapping[str, Any]) -> dict[str, Any]:
    from nightowl.collectors.gpu import sxid_catalog

    code = event.get("code")
    entry = sxid_catalog.lookup(code) if isinstance(code, int) else None
    action, _ = sxid_catalog.judge_sxid(event)
    if entry is None:
        return {
            "mnemonic": None,
            "meaning": "NVSwitch error (SXid) not in the SXid catalog we carry",
            "action": action,
            "first_step": "look up this SXid in NVIDIA's Fabric Manager User Guide; collect nvidia-bug-report.sh "
            "output and the nvidia-fabricmanager log, and escalate",
        }
    return {
        "mnemonic": entry.name or None,
        "meaning": entry.description,
        "action": action,
        "first_step": entry.first_step,
    }


def _explain_other(event: Mapping[str, Any]) -> dict[str, Any]:
    from nightowl.collectors.gpu import kernel_patterns

    kind = str(event.get("kind"))
    if kind not in ("fallen_off_bus", "gpu_reset_required", "oom_kill"):
        row = kernel_patterns.match(event.get("text"), kind)
        if row is not None:
            return {"mnemonic": row.id, "meaning": row.meaning, "action": row.action, "first_step": row.first_step}
        if kind in kernel_patterns.KIND_DEFAULTS:
            action, why = kernel_patterns.KIND_DEFAULTS[kind]
            return {"mnemonic": None, "meaning": why, "action": action, "first_step": FIRST_STEP_BY_ACTION[action]}
    meaning, action, step = _KIND_EXPLAINED.get(kind, ("kernel event", "none", ""))
    return {"mnemonic": None, "meaning": meaning, "action": action, "first_step": step}


def explain(event: Mapping[str, Any]) -> dict[str, Any]:
    """One line of `nightowl xid`: what the event is and the documented first step."""
    kind = event.get("kind")
    code = event.get("code")
    text = event.get("text")
    base = {"time": event.get("time"), "pci": event.get("pci"), "kind": kind, "code": code}
    if kind == "sxid":
        return {**base, **_explain_sxid(event)}
    if kind != "xid" or not isinstance(code, int):
        return {**base, **_explain_other(event)}
    entry = lookup(code)
    action = action_for(code, text)
    return {
        **base,
        "mnemonic": entry.mnemonic if entry else None,
        "meaning": entry.meaning if entry else "not in the Xid catalog we carry",
        "action": action,
        "first_step": _first_step(code, entry, action, text),
    }


def load_policy(path: str) -> dict[int, tuple[str, str]]:
    """A site's overrides: YAML ``overrides: {63: {action: reset-gpu, reason: "..."}}``.

    Raises ValueError naming the code when an entry is malformed or names an unknown action.
    """
    import yaml  # lazy: only the CLI path that takes a policy needs it

    with open(path, encoding="utf-8") as handle:
        document = yaml.safe_load(handle) or {}
    overrides = document.get("overrides", {}) if isinstance(document, dict) else None
    if not isinstance(overrides, dict):
        raise ValueError(f"{path}: 'overrides' must be a mapping of Xid code to {{action, reason}}")
    policy: dict[int, tuple[str, str]] = {}
    for raw_code, spec in overrides.items():
        try:
            code = int(raw_code)
        except (TypeError, ValueError):
            raise ValueError(f"{path}: override key {raw_code!r} is not a Xid code") from None
        if not isinstance(spec, dict) or spec.get("action") not in ACTION_ORDER:
            raise ValueError(f"{path}: override for Xid {code} needs an action, one of {', '.join(ACTION_ORDER)}")
        if HISTORY_RULE_KEYS & set(spec):
            history_rule(path, code, spec)  # conditional on history: gpu-history applies it, not the catalog
            continue
        policy[code] = (str(spec["action"]), str(spec.get("reason") or "site policy"))
    return policy


# An override with one of these applies only when the history shows it (collectors/gpu/gpu_history.py):
# `43: {count: 3, window: 10m, action: drain-and-reset}`, `79: {after_reboots: 1, action: hardware-ticket}`.
HISTORY_RULE_KEYS = frozenset({"count", "window", "after_reboots"})


def history_rule(path: str, code: int, spec: Mapping[str, Any]) -> dict[str, Any]:
    """One count-in-window or after-reboots rule, checked; raises ValueError naming the code."""
    from nightowl.ages import parse_age

    rule: dict[str, Any] = {"code": code, "action": str(spec["action"]), "reason": str(spec.get("reason") or "")}
    if "count" in spec or "window" in spec:
        count, window = spec.get("count"), spec.get("window")
        seconds = parse_age(str(window)) if window is not None else None
        if not isinstance(count, int) or isinstance(count, bool) or count < 1 or seconds is None:
            raise ValueError(f"{path}: Xid {code}: count needs a positive integer and window an age (10m, 24h, 30d)")
        rule["count"], rule["window_seconds"] = count, seconds
    if "after_reboots" in spec:
        reboots = spec["after_reboots"]
        if not isinstance(reboots, int) or isinstance(reboots, bool) or reboots < 1:
            raise ValueError(f"{path}: Xid {code}: after_reboots needs a positive integer")
        rule["after_reboots"] = reboots
    return rule


def load_history_rules(path: str) -> list[dict[str, Any]]:
    """The policy's rules that depend on history (``history_rule``), in file order."""
    import yaml

    with open(path, encoding="utf-8") as handle:
        document = yaml.safe_load(handle) or {}
    load_policy(path)  # the same checks, the same errors
    overrides = document.get("overrides") or {}
    return [history_rule(path, int(code), spec) for code, spec in overrides.items() if HISTORY_RULE_KEYS & set(spec)]


def judge(events: Iterable[Mapping[str, Any]], policy: Mapping[int, tuple[str, str]] | None = None) -> dict[str, Any]:
    """One action for a kernel log's events, with the reasons a runbook can show.

    Pairing rules (catalog rows 45, 48, 154; nightowl/knowledge/xid_rules.yaml):
    48 with 63/64 -> drain-and-reset, 48 alone -> reset-gpu;
    94 -> restart-app, 95 -> reset-gpu (catalog); 43/45 are sympathetic when another Xid is on the
    same GPU (a 45 "caused by previous Xid N" stands for N); a 154 action overrides when stricter;
    fatal SXids escalate; a GPU off the bus without Xid 79 is treated as 79. ``policy`` (from
    ``load_policy``) replaces the action of the codes it names, and says so in ``reasons``.
    """
    by_gpu: dict[str | None, list[Mapping[str, Any]]] = {}
    for event in events:
        by_gpu.setdefault(event.get("pci"), []).append(event)
    reasons: list[str] = []
    gpu_actions: dict[str, str] = {}
    xid_codes = sorted(
        {
            int(e["code"])
            for es in by_gpu.values()
            for e in es
            if e.get("kind") == "xid" and isinstance(e.get("code"), int)
        }
    )
    for pci, gpu_events in by_gpu.items():
        action = _judge_gpu(pci, gpu_events, policy or {}, reasons, xid_codes)
        if action is not None:
            gpu_actions[pci or "unknown"] = action
    overall = strictest(gpu_actions.values())
    return {
        "action": overall,
        "reasons": reasons,
        "gpus": sorted(pci for pci, act in gpu_actions.items() if act != "none"),
        "gpu_actions": gpu_actions,
    }


def _judge_gpu(
    pci: str | None,
    events: list[Mapping[str, Any]],
    policy: Mapping[int, tuple[str, str]],
    reasons: list[str],
    log_xids: list[int],
) -> str | None:
    where = pci or "unknown GPU"
    xids = [e for e in events if e.get("kind") == "xid" and isinstance(e.get("code"), int)]
    codes = {int(e["code"]) for e in xids}
    causes = {int(e["caused_by_xid"]) for e in xids if isinstance(e.get("caused_by_xid"), int)}
    primaries = (codes - _codes("sympathetic_codes")) | causes
    actions: list[str] = []
    for code in sorted(codes | causes):
        texts = [e.get("text") for e in xids if e["code"] == code] or [None]
        if code in _codes("sympathetic_codes") and primaries:
            reasons.append(f"Xid {code} on {where} is sympathetic to Xid {', '.join(map(str, sorted(primaries)))}")
            continue
        companions, principal = _companions()
        if code in companions and principal in codes:
            reasons.append(f"Xid {code} on {where} adds detail to Xid {principal}: judged with it")
            continue
        if code in policy:
            action, why = policy[code]
            reasons.append(f"Xid {code} on {where}: site policy -> {action}: {why}")
        elif code == 48 and codes & {63, 64}:
            action = "drain-and-reset"
            reasons.append(f"Xid 48 with Xid {', '.join(map(str, sorted(codes & {63, 64})))} on {where} -> {action}")
        else:
            action = strictest(action_for(code, text) for text in texts)
            entry = lookup(code)
            label = "not in the catalog" if entry is None else f"catalog {entry.immediate_action}"
            origin = " (named as the cause of Xid 45)" if code in causes and code not in codes else ""
            reasons.append(f"Xid {code}{origin} on {where}: {label} -> {action}")
        actions.append(action)
    actions.extend(_judge_other_kinds(where, events, codes, reasons))
    actions.extend(_judge_host_lines(pci, events, log_xids, reasons))
    return strictest(actions) if actions else None


# Kernel events judged by their line against nightowl/knowledge/kernel_patterns.csv.
LINE_KINDS = frozenset(
    {"rm_init_failed", "gsp_timeout", "driver_conflict", "driver_mismatch", "edac", "aer", "pcie_aer", "hung_task"}
)


def _judge_host_lines(
    pci: str | None, events: list[Mapping[str, Any]], log_xids: list[int], reasons: list[str]
) -> list[str]:
    """Non-Xid GPU and host lines (and known-harmless driver lines), one reason per distinct finding.

    A hung task in a log that also holds an Xid is a wedged driver (gpud PR #117: processes stuck in
    D state after Xid 45): reboot-node.
    """
    from nightowl.collectors.gpu import kernel_patterns, sxid_catalog

    place = f" on {pci}" if pci else ""
    actions: list[str] = []
    seen: set[str] = set()
    for event in events:
        kind = event.get("kind")
        if kind == "fabric_manager":
            judged: tuple[str, str] | None = sxid_catalog.judge_fabric_manager(event.get("text"))
        elif kind == "hung_task" and log_xids:
            judged = ("reboot-node", f"hung task after Xid {', '.join(map(str, log_xids))}: wedged driver (processes "
                      "stuck in D state) -> reboot-node")  # fmt: skip
        elif kind in LINE_KINDS or kind == "other_nvrm":
            judged = kernel_patterns.judge_line(event)
        else:
            continue
        if judged is None:
            continue
        action, reason = judged
        if reason + place not in seen:
            seen.add(reason + place)
            reasons.append(reason + place)
        actions.append(action)
    return actions


def _judge_other_kinds(where: str, events: list[Mapping[str, Any]], codes: set[int], reasons: list[str]) -> list[str]:
    actions: list[str] = []
    kinds = {e.get("kind") for e in events}
    if "fallen_off_bus" in kinds and 79 not in codes:
        reasons.append(f"{where} fell off the bus (no Xid 79 line) -> treated as Xid 79 -> reboot-node")
        actions.append("reboot-node")
    if "gpu_reset_required" in kinds:
        reasons.append(f"driver says {where} needs a reset -> reset-gpu")
        actions.append("reset-gpu")
    from nightowl.collectors.gpu import sxid_catalog

    sxids = {(e.get("code"), e.get("severity")): e for e in events if e.get("kind") == "sxid"}
    for key in sorted(sxids, key=str):
        action, reason = sxid_catalog.judge_sxid(sxids[key])
        reasons.append(f"{reason} on {where}")
        actions.append(action)
    return actions
