"""Findings per GPU, not only per node (issue 45 item 7): a verdict names every GPU with a fault of its own.

A runbook's verdict node names the GPUs its own condition is about (``gpus:``); on a node where a second GPU
has a fault of its own (GPU 0a:00 failed to initialise while 07:00 logged a double-bit error and a failed page
retirement) that second GPU would be told only as "Other Xids in this log". A derived collector that judges
each GPU on its own states it as ``gpu_actions`` (device -> first action; xid-judgement does, by NVIDIA's Xid
catalog and pairing rules) and the codes each device logged as ``xids_by_gpu``; the verdict then lists every
device whose own action is more than the application's (not ``none`` nor ``restart-app``) in ``gpus``, after
its own, and each such other device in ``other_gpus`` with its codes and action. The engine reads these facts
by name only: what makes a fault a GPU's own is the collector's business.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# A device whose own action is one of these has no fault of its own (the application's, or nothing).
NOT_ITS_OWN = ("none", "restart-app")


def _merged(ctx: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The fact ``name`` of every collection on the host that states it as a mapping, merged by device."""
    merged: dict[str, Any] = {}
    for facts in ctx.values():
        value = facts.get(name) if isinstance(facts, Mapping) else None
        if isinstance(value, Mapping):
            merged.update({str(device): v for device, v in value.items()})
    return merged


def with_other_gpus(verdict: dict[str, Any], ctx: Mapping[str, Any]) -> dict[str, Any]:
    """``verdict`` with ``gpus`` extended by every other device judged to have a fault of its own, and
    ``other_gpus`` (``[{gpu, xids, action}]``) naming them; unchanged for a verdict that needs no action or
    when no collection judged a device."""
    if verdict.get("action") in (None, "none"):
        return verdict
    own = [str(g) for g in verdict.get("gpus") or []] if isinstance(verdict.get("gpus"), (list, tuple)) else []
    codes = _merged(ctx, "xids_by_gpu")
    others = [
        {"gpu": device, "xids": sorted(codes.get(device) or []), "action": str(action)}
        for device, action in sorted(_merged(ctx, "gpu_actions").items())
        if device not in own and device != "unknown" and action not in NOT_ITS_OWN
    ]
    if others:
        verdict["gpus"] = own + [o["gpu"] for o in others]
        verdict["other_gpus"] = others
    return verdict
