"""NVIDIA's Xid catalog as data, and the rules that turn logged Xids into one first action.

Rows come from /work/shared/domain/decision-trees.md section 3 (3.2 per-code table, 3.3 recovery
actions, 3.4 pairing rules) and peers-gpu-health.md section 2 (2.2 side-by-side table: investigatory
actions, Xid 69, 163, 168). Each row keeps the confidence tag of its source: [P] primary (NVIDIA's
catalog or its machine-readable copies), [S] secondary, [M] background knowledge, [D] derived.

The catalog's "immediate action" is a bucket name (RESET_GPU, WORKFLOW_XID_48, ...);
``BUCKET_TO_ACTION`` maps each bucket to a CONTRACT section 4 action. A code the catalog does not
know maps to ``escalate``, never to ``none``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# Date of the catalog version the rows reflect: the sheet NVSentinel and gpud embed is from 2025-10
# (gpud generated its copy 2025-10-29; peers-gpu-health.md 2.2). Rows from the peer survey: 2026-08.
CATALOG_DATE = "2025-10"
SURVEY_DATE = "2026-08"

_TREES = "decision-trees.md 3.2"
_PEERS = "peers-gpu-health.md 2.2"


@dataclass(frozen=True)
class XidEntry:
    code: int
    mnemonic: str | None
    meaning: str
    immediate_action: str  # catalog bucket, e.g. RESET_GPU
    investigatory_action: str | None
    source: str
    source_date: str


def _row(
    code: int,
    mnemonic: str | None,
    meaning: str,
    bucket: str,
    investigatory: str | None,
    source: str,
    source_date: str = CATALOG_DATE,
) -> XidEntry:
    return XidEntry(code, mnemonic, meaning, bucket, investigatory, source, source_date)


# code, mnemonic, meaning, immediate bucket, investigatory bucket, source (tag per column).
# fmt: off
_ROWS: tuple[XidEntry, ...] = (
    _row(13, "GR_EXCEPTION", "graphics/SM engine exception (bad instruction or address in a kernel)",
         "RESTART_APP", "WORKFLOW_XID_13",
         f"[P] bucket {_TREES}; [P] investigatory {_PEERS}; [M] meaning"),
    _row(31, "FIFO_ERROR_MMU_ERR_FLT", "GPU memory page fault (illegal address)",
         "RESTART_APP", "WORKFLOW_XID_31",
         f"[P] bucket {_TREES}; [P] investigatory {_PEERS}; [M] meaning"),
    _row(43, "RESETCHANNEL_VERIF_ERROR", "GPU stopped processing a channel (follows an application fault)",
         "IGNORE", "CONTACT_SUPPORT",
         f"[P] bucket {_TREES}; [P] investigatory {_PEERS}; [M] meaning"),
    _row(45, "PREEMPTIVE_REMOVAL", "preemptive cleanup of channels after an earlier error",
         "WORKFLOW_XID_45", "solo: restart fabric manager, else follow the other Xid",
         f"[P] bucket {_TREES}; [P] investigatory {_PEERS}"),
    _row(46, "GPU_TIMEOUT_ERROR", "GPU stopped processing",
         "RESET_GPU", None,
         f"[P] {_TREES}"),
    _row(48, "GPU_ECC_DBE", "uncorrectable (double-bit) DRAM ECC error",
         "WORKFLOW_XID_48", "WORKFLOW_XID_48",
         f"[P] bucket {_TREES}; [S] pairing with 63/64 (3.4)"),
    # 3.6 of decision-trees routes 54 to CHECK_MECHANICALS; the meaning is background knowledge.
    _row(54, None, "auxiliary power is not connected to the GPU board",
         "CHECK_MECHANICALS", None,
         "[P] bucket decision-trees.md 3.6; [M] meaning"),
    # 3.2 gives UNEXPECTED_ERR_REPORT_ISSUE; the sheet marks 61 "Unused" with CONTACT_SUPPORT (2.2).
    _row(61, "PMU_BREAKPOINT", "internal micro-controller breakpoint/warning (catalog marks it unused)",
         "UNEXPECTED_ERR_REPORT_ISSUE", None,
         f"[P] {_TREES}; [P] {_PEERS}"),
    _row(62, "PMU_HALT_ERROR", "internal micro-controller halt",
         "RESET_GPU", "CONTACT_SUPPORT",
         f"[P] {_TREES}; [P] investigatory {_PEERS}"),
    _row(63, "INFOROM_DRAM_RETIREMENT_EVENT", "row remap (Ampere+) or page retirement (Volta) recorded",
         "IGNORE", "IGNORE",
         f"[P] {_TREES}; [P] investigatory {_PEERS}"),
    _row(64, "INFOROM_DRAM_RETIREMENT_FAILURE", "row remap or page retirement failed",
         "RESET_GPU", "CONTACT_SUPPORT",
         f"[P] {_TREES}; [P] investigatory {_PEERS}"),
    _row(68, "NVDEC0_ERROR", "video decoder exception",
         "RESTART_APP", "CONTACT_SUPPORT",
         f"[P] {_TREES}; [P] investigatory {_PEERS}"),
    _row(69, None, "graphics engine class error",
         "RESTART_APP", "CHECK_APP/CUDA",
         f"[P] {_PEERS}"),
    _row(74, "NVLINK_ERROR", "NVLink error",
         "WORKFLOW_NVLINK_ERR", "CONTACT_SUPPORT",
         f"[P] {_TREES}; [S] runbook note; [P] investigatory {_PEERS}"),
    _row(79, "GPU_HAS_FALLEN_OFF_THE_BUS", "GPU lost on PCIe (fallen off the bus)",
         "RESTART_BM", "CONTACT_SUPPORT",
         f"[P] {_TREES}; [P] investigatory {_PEERS}"),
    _row(92, "EXCESSIVE_SBE_INTERRUPTS", "high single-bit ECC error rate",
         "IGNORE", "CONTACT_SUPPORT",
         f"[P] {_TREES}; [P] investigatory {_PEERS}"),
    _row(94, "CONTAINED_ERROR", "uncorrectable memory error contained to one context",
         "RESTART_APP", "IGNORE (sympathetic)",
         f"[P] {_TREES}; [P] investigatory {_PEERS}"),
    _row(95, "UNCONTAINED_ERROR", "uncorrectable memory error NOT contained: every process on the GPU is hit",
         "RESET_GPU", "IGNORE (sympathetic)",
         f"[P] {_TREES}; [P] investigatory {_PEERS}"),
    _row(109, "CTXSW_TIMEOUT_ERROR", "context-switch timeout",
         "RESET_GPU", "CONTACT_SUPPORT",
         f"[P] {_TREES}; [P] investigatory {_PEERS}"),
    _row(119, "GSP_RPC_TIMEOUT", "GSP firmware RPC timeout",
         "RESET_GPU", "INVESTIGATE_SW",
         f"[P] {_TREES}; [P] investigatory {_PEERS}"),
    _row(120, "GSP_ERROR", "GSP firmware error",
         "RESET_GPU", "INVESTIGATE_SW",
         f"[P] {_TREES}; [P] investigatory {_PEERS}"),
    _row(136, "ALI_TRAINING_FAIL", "NVLink link training failure",
         "RESET_GPU", "INVESTIGATE_LINK_SI",
         f"[P] {_TREES}; [P] investigatory {_PEERS}"),
    _row(140, "UNRECOVERABLE_ECC_ERROR_ESCAPE", "ECC error escaped containment",
         "RESET_GPU", "CONTACT_SUPPORT",
         f"[P] {_TREES}; [P] investigatory {_PEERS}"),
    _row(143, "GPU_INIT_ERROR", "GPU initialization failure",
         "RESET_GPU", "CONTACT_SUPPORT",
         f"[P] {_TREES}; [P] investigatory {_PEERS}"),
    # NVLink5 (Blackwell) unit errors; severity is decoded per sub-code, the log text says Fatal/Nonfatal.
    _row(144, "NVLINK_SAW_ERROR", "NVLink5 SAW unit error",
         "WORKFLOW_NVLINK5_ERR", "Xid 144-150 decode sheet",
         f"[P] {_TREES}; [P] {_PEERS}"),
    _row(145, "NVLINK_RLW_ERROR", "NVLink5 RLW unit error",
         "WORKFLOW_NVLINK5_ERR", "Xid 144-150 decode sheet",
         f"[P] {_TREES}; [P] {_PEERS}"),
    _row(146, "NVLINK_TLW_ERROR", "NVLink5 TLW unit error",
         "WORKFLOW_NVLINK5_ERR", "Xid 144-150 decode sheet",
         f"[P] {_TREES}; [P] {_PEERS}"),
    _row(147, "NVLINK_TREX_ERROR", "NVLink5 TREX unit error (not expected in production)",
         "WORKFLOW_NVLINK5_ERR", "Xid 144-150 decode sheet",
         f"[P] {_TREES}; [P] {_PEERS}"),
    _row(148, "NVLINK_NVLPW_CTRL_ERROR", "NVLink5 NVLPW_CTRL unit error",
         "WORKFLOW_NVLINK5_ERR", "Xid 144-150 decode sheet",
         f"[P] {_TREES}; [P] {_PEERS}"),
    _row(149, "NVLINK_NETIR_ERROR", "NVLink5 NETIR unit error (link events, link down)",
         "WORKFLOW_NVLINK5_ERR", "Xid 144-150 decode sheet",
         f"[P] {_TREES}; [P] {_PEERS}"),
    _row(150, "NVLINK_MSE_ERROR", "NVLink5 MSE unit error (MSE watchdog)",
         "WORKFLOW_NVLINK5_ERR", "Xid 144-150 decode sheet",
         f"[P] {_TREES}; [P] {_PEERS}"),
    _row(154, "GPU_RECOVERY_ACTION_CHANGED", "driver-declared recovery action changed (follow it)",
         "XID_154", None,
         f"[P] {_TREES}; [P] decision-trees.md 3.3; [P] {_PEERS}"),
    _row(155, "NVLINK_SW_DEFINED_ERROR", "NVLink software-defined error",
         "RESET_GPU", None,
         f"[P] {_TREES}"),
    _row(156, "RESOURCE_RETIREMENT_EVENT", "resource retirement event",
         "RESET_GPU", None,
         f"[P] {_TREES}"),
    _row(157, "RESOURCE_RETIREMENT_FAILURE", "resource retirement failure",
         "IGNORE", None,
         f"[P] {_TREES}"),
    _row(158, "GPU_FATAL_TIMEOUT", "GPU fatal timeout",
         "RESET_GPU", None,
         f"[P] {_TREES}"),
    # Newer than the embedded sheets: bucket names as NVSentinel's mapper knows them (2.2 notes).
    _row(163, None, "power smoothing event",
         "RECOVER_FEATURE_RESET_GPU", None,
         f"[S] {_PEERS} notes (NVSentinel common.go)", SURVEY_DATE),
    _row(168, None, "reduced memory capacity",
         "WORKFLOW_XID_168", None,
         f"[S] {_PEERS} notes (NVSentinel common.go)", SURVEY_DATE),
)
# fmt: on

CATALOG: dict[int, XidEntry] = {row.code: row for row in _ROWS}

# CONTRACT section 4 actions from least to most drastic. `escalate` (a person must look, we cannot
# name the fix) outranks every software/reset action but not a known reboot or hardware replacement.
ACTION_ORDER: tuple[str, ...] = (
    "none",
    "restart-app",
    "scale-out",
    "reconfigure",
    "reset-gpu",
    "drain-and-reset",
    "escalate",
    "reboot-node",
    "hardware-ticket",
)

# Catalog bucket -> CONTRACT action. Sources: decision-trees.md 3.1 (bucket list and meanings),
# peers-gpu-health.md 2.1 (Resolution Buckets sheet, paraphrased).
BUCKET_TO_ACTION: dict[str, str] = {
    "IGNORE": "none",
    "RESTART_APP": "restart-app",
    "RESET_GPU": "reset-gpu",
    "RECOVER_FEATURE_RESET_GPU": "reset-gpu",
    "RESTART_BM": "reboot-node",
    "RESTART_VM": "reboot-node",
    "WORKFLOW_XID_168": "reboot-node",  # NVSentinel maps it to restart VM
    "CHECK_MECHANICALS": "hardware-ticket",
    "UPDATE_SWFW": "reconfigure",
    "CHECK_UVM": "escalate",  # not explained in our sources: a person decides
    "CONTACT_SUPPORT": "escalate",
    "UNEXPECTED_ERR_REPORT_ISSUE": "escalate",
    "WORKFLOW_XID_45": "restart-app",  # solo: restart the fabric manager; else follow the other Xid
    "WORKFLOW_XID_48": "reset-gpu",  # solo; with 63/64 judge() raises it to drain-and-reset
    "WORKFLOW_NVLINK_ERR": "reset-gpu",  # reset or reboot, replace if it recurs [S]
    "WORKFLOW_NVLINK5_ERR": "reset-gpu",  # text severity refines it, see action_for()
    "XID_154": "escalate",  # the action is in the text; unreadable text -> a person looks
}

NVLINK5_CODES = frozenset(range(144, 151))
NVLINK_CODES = NVLINK5_CODES | {74}
SYMPATHETIC_CODES = frozenset({43, 45})

# Xid 154 / NVML recovery action names -> normalised value (decision-trees.md 3.3). First match wins.
RECOVERY_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\breboot\b", re.I), "node-reboot"),  # Node Reboot Required, System Reboot
    (re.compile(r"\bdrain\s*(?:and|&)\s*reset\b", re.I), "drain-and-reset"),
    (re.compile(r"\bdrain\s*p2p\b", re.I), "drain-p2p"),
    (re.compile(r"\bgpu\s*reset\b", re.I), "gpu-reset"),  # GPU Reset Required
    (re.compile(r"^\s*none\s*$", re.I), "none"),
)
RECOVERY_ORDER: tuple[str, ...] = ("none", "drain-p2p", "gpu-reset", "drain-and-reset", "node-reboot")
# Drain P2P has no action of its own in CONTRACT s4: draining peers is the first half of drain-and-reset.
RECOVERY_TO_ACTION: dict[str, str] = {
    "none": "none",
    "drain-p2p": "drain-and-reset",
    "gpu-reset": "reset-gpu",
    "drain-and-reset": "drain-and-reset",
    "node-reboot": "reboot-node",
}

_LAST_PARENTHESISED = re.compile(r".*\(([^()]*)\)")
_NVLINK_SEVERITY = re.compile(r"\b(non-?fatal|fatal)\b", re.I)

# First step per action (CONTRACT s4), in words a person at 3 a.m. can follow; catalog bucket
# meanings from decision-trees.md 3.1/3.2 and peers-gpu-health.md 2.1.
FIRST_STEP_BY_ACTION: dict[str, str] = {
    "none": "no action on its own; check which Xid it follows",
    "restart-app": "restart the application; suspect the GPU only if this Xid repeats on it across "
    "different applications",
    "scale-out": "add capacity",
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
}
FIRST_STEP_BY_CODE: dict[int, str] = {
    63: "nothing now; a row remap is pending: reset the GPU at a convenient time to apply it",
    64: "reset the GPU; check 'Remapping Failure Occurred' in nvidia-smi -q: RMA candidate",
    94: "restart the application that was hit; the GPU keeps running",
    95: "stop every process on the GPU and reset it (nvidia-smi -r); if it recurs reboot, then replace",
}
UNKNOWN_FIRST_STEP = "look up this code in NVIDIA's Xid catalog; collect nvidia-bug-report.sh output and escalate"


def lookup(code: int) -> XidEntry | None:
    return CATALOG.get(code)


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


def normalize_recovery_action(name: str | None) -> str | None:
    """``GPU Reset Required`` -> ``gpu-reset`` etc.; None when the name is not one we know."""
    if not name:
        return None
    for pattern, value in RECOVERY_PATTERNS:
        if pattern.search(name):
            return value
    return None


def strictest_recovery(values: Iterable[str | None]) -> str | None:
    known = [v for v in values if v in RECOVERY_ORDER]
    return max(known, key=RECOVERY_ORDER.index) if known else None


def nvlink_severity(text: str | None) -> str | None:
    """``fatal`` / ``nonfatal`` when an NVLink5 Xid text says so (``Nonfatal``, ``Non-fatal``, ``Fatal``)."""
    if not text:
        return None
    match = _NVLINK_SEVERITY.search(text)
    if match is None:
        return None
    return "fatal" if match.group(1).lower() == "fatal" else "nonfatal"


def action_for(code: int, text: str | None = None) -> str:
    """The CONTRACT action for one Xid, reading the text where the catalog says the text decides."""
    entry = lookup(code)
    if entry is None:
        return "escalate"
    if code == 154:
        recovery = normalize_recovery_action(recovery_name(text))
        return RECOVERY_TO_ACTION[recovery] if recovery else BUCKET_TO_ACTION["XID_154"]
    if code in NVLINK5_CODES:
        severity = nvlink_severity(text)
        if severity == "fatal":
            return "drain-and-reset"  # link/fabric fatal: peers must stop before the reset [P decode sheet]
        if severity == "nonfatal":
            return "none"  # warning only; repeats on one link are judged by the runbook
    return BUCKET_TO_ACTION.get(entry.immediate_action, "escalate")


def _first_step(code: int | None, entry: XidEntry | None, action: str, text: str | None) -> str:
    if code is None:
        return FIRST_STEP_BY_ACTION.get(action, UNKNOWN_FIRST_STEP)
    if entry is None:
        return UNKNOWN_FIRST_STEP
    if code == 154:
        name = recovery_name(text)
        return f"follow the driver's recovery action: {name}" if name else UNKNOWN_FIRST_STEP
    if code in FIRST_STEP_BY_CODE:
        return FIRST_STEP_BY_CODE[code]
    if action == "none" and code in NVLINK5_CODES:
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


def explain(event: Mapping[str, Any]) -> dict[str, Any]:
    """One line of `nightowl xid`: what the event is and the documented first step."""
    kind = event.get("kind")
    code = event.get("code")
    text = event.get("text")
    base = {"time": event.get("time"), "pci": event.get("pci"), "kind": kind, "code": code}
    if kind == "sxid":
        fatal = event.get("severity") == "fatal"
        return {
            **base,
            "mnemonic": None,
            "meaning": "NVSwitch error (SXid); not in the GPU Xid catalog",
            "action": "escalate" if fatal else "none",
            "first_step": "look up this SXid in NVIDIA's NVSwitch error list; check nvidia-fabricmanager "
            "logs and nvidia-smi nvlink -s",
        }
    if kind != "xid" or not isinstance(code, int):
        meaning, action, step = _KIND_EXPLAINED.get(str(kind), ("kernel event", "none", ""))
        return {**base, "mnemonic": None, "meaning": meaning, "action": action, "first_step": step}
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
        policy[code] = (str(spec["action"]), str(spec.get("reason") or "site policy"))
    return policy


def judge(events: Iterable[Mapping[str, Any]], policy: Mapping[int, tuple[str, str]] | None = None) -> dict[str, Any]:
    """One action for a kernel log's events, with the reasons a runbook can show.

    Pairing rules (decision-trees.md 3.4): 48 with 63/64 -> drain-and-reset, 48 alone -> reset-gpu;
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
    for pci, gpu_events in by_gpu.items():
        action = _judge_gpu(pci or "unknown GPU", gpu_events, policy or {}, reasons)
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
    where: str, events: list[Mapping[str, Any]], policy: Mapping[int, tuple[str, str]], reasons: list[str]
) -> str | None:
    xids = [e for e in events if e.get("kind") == "xid" and isinstance(e.get("code"), int)]
    codes = {int(e["code"]) for e in xids}
    causes = {int(e["caused_by_xid"]) for e in xids if isinstance(e.get("caused_by_xid"), int)}
    primaries = (codes - SYMPATHETIC_CODES) | causes
    actions: list[str] = []
    for code in sorted(codes | causes):
        texts = [e.get("text") for e in xids if e["code"] == code] or [None]
        if code in SYMPATHETIC_CODES and primaries:
            reasons.append(f"Xid {code} on {where} is sympathetic to Xid {', '.join(map(str, sorted(primaries)))}")
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
    return strictest(actions) if actions else None


def _judge_other_kinds(where: str, events: list[Mapping[str, Any]], codes: set[int], reasons: list[str]) -> list[str]:
    actions: list[str] = []
    kinds = {e.get("kind") for e in events}
    if "fallen_off_bus" in kinds and 79 not in codes:
        reasons.append(f"{where} fell off the bus (no Xid 79 line) -> treated as Xid 79 -> reboot-node")
        actions.append("reboot-node")
    if "gpu_reset_required" in kinds:
        reasons.append(f"driver says {where} needs a reset -> reset-gpu")
        actions.append("reset-gpu")
    fatal_sxids = sorted(
        {int(e["code"]) for e in events if e.get("kind") == "sxid" and e.get("severity") == "fatal" and e.get("code")}
    )
    if fatal_sxids:
        reasons.append(
            f"fatal NVSwitch SXid {', '.join(map(str, fatal_sxids))} on {where}: not in the Xid catalog -> escalate"
        )
        actions.append("escalate")
    return actions
