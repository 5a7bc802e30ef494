"""What one kernel-log event means and the first step a person takes: the prose tables by verdict
action, catalog bucket and code, and ``explain`` (one line of ``nightowl xid``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nightowl.collectors.gpu.xid_catalog.catalog import XidEntry, _codes, action_for, lookup, recovery_name
from nightowl.collectors.gpu.xid_catalog.policy import WEDGED_DRIVER_ACTION, WEDGED_DRIVER_STEP, wedged_driver_line
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
    if code == 154:
        name = recovery_name(text)
        return f"follow the driver's recovery action: {name}" if name else UNKNOWN_FIRST_STEP
    if code in FIRST_STEP_BY_CODE:
        return FIRST_STEP_BY_CODE[code]
    if action == "none" and code in _codes("nvlink5_codes"):
        return "non-fatal: no action now; watch for repeats on the same link"
    return FIRST_STEP_BY_BUCKET.get(entry.immediate_action) or action_table.first_step(action)


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
        action_table.first_step("reset-gpu"),
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
    if wedged_driver_line(event, label):
        row.update(action=WEDGED_DRIVER_ACTION, first_step=WEDGED_DRIVER_STEP)
    return row
