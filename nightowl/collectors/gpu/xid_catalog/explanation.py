"""What one kernel-log event means and the first step a person takes: the prose tables by verdict
action, catalog bucket and code, and ``explain`` (one line of ``nightowl xid``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nightowl.collectors.gpu.xid_catalog.catalog import XidEntry, lookup
from nightowl.collectors.gpu.xid_catalog.rules import action_for, line_action, line_rule, text_step, wedged_line
from nightowl.knowledge import actions as action_table

# First step per catalog bucket (the one per verdict action is actions.csv's first_step); bucket
# meanings from the catalog's Resolution Buckets sheet (see nightowl/knowledge/xid_buckets.csv).
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


def _first_step(code: int | None, entry: XidEntry | None, action: str, text: str | None) -> str:
    if code is None:
        row = action_table.by_action().get(action)
        return row.first_step if row else UNKNOWN_FIRST_STEP
    if entry is None:
        return UNKNOWN_FIRST_STEP
    if not entry.immediate_action:
        said = f"; the catalog says: {entry.guidance}" if entry.guidance else ""
        return f"the catalog names no action for this code{said}; collect nvidia-bug-report.sh output and escalate"
    speaks, step = text_step(code, action, text)  # a text_decides rule's step (Xid 154, NVLink5 nonfatal)
    if speaks:
        return step or UNKNOWN_FIRST_STEP
    if code in FIRST_STEP_BY_CODE:
        return FIRST_STEP_BY_CODE[code]
    return FIRST_STEP_BY_BUCKET.get(entry.immediate_action) or action_table.first_step(action)


# Kernel-log event kinds other than xid, and no rule of xid_rules.yaml judges them: what they mean and the action
# they imply (the line rules, off the bus and "GPU reset required", are in xid_rules.yaml).
_KIND_EXPLAINED: dict[str, tuple[str, str, str]] = {
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


def _explain_line_rule(rule: Mapping[str, Any]) -> dict[str, Any]:
    """A line a rule judges: as the code it stands for (its catalog bucket's first step), or by its own action."""
    action = line_action(rule)
    if rule["kind"] == "line_as_code":
        code = int(rule["code"])
        step = _first_step(code, lookup(code), action, None)
    else:
        step = action_table.first_step(action)
    return {"mnemonic": None, "meaning": str(rule["meaning"]), "action": action, "first_step": step}


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
    by_rule = line_rule(kind)
    if by_rule is not None:
        return _explain_line_rule(by_rule)
    if kind != "oom_kill":
        row = kernel_patterns.match(event.get("text"), kind)
        if row is not None:
            return {"mnemonic": row.id, "meaning": row.meaning, "action": row.action, "first_step": row.first_step}
        if kind in kernel_patterns.KIND_DEFAULTS:
            action, why = kernel_patterns.KIND_DEFAULTS[kind]
            return {"mnemonic": None, "meaning": why, "action": action, "first_step": action_table.first_step(action)}
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


def event_row(event: Mapping[str, Any]) -> dict[str, Any]:
    """One event as ``nightowl xid --format json`` (and the MCP ``explain_xid`` tool) prints it: ``explain``
    with the event's ``count`` and a ``label``; a hung task after Xid 45 is a wedged driver (policy)."""
    explained = explain(event)
    label = event.get("subkind") or explained.get("mnemonic") or str(event.get("kind"))
    row = {**explained, "count": event.get("count", 1), "label": label}
    wedged = wedged_line(event, label)
    if wedged is not None:
        row.update(action=wedged[0], first_step=wedged[1])
    return row
