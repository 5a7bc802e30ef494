"""A site's Xid policy (overrides, history rules) and ``judge``: the rules that turn a kernel log's
events into one first action, with the reasons a runbook can show."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from nightowl.collectors.gpu.xid_catalog.catalog import _codes, _companions, lookup, strictest
from nightowl.collectors.gpu.xid_catalog.rules import (
    action_for,
    escalating_pair,
    hung_task_rule,
    judge_lines,
    wedged_line,
)
from nightowl.knowledge import actions as action_table


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
        if not isinstance(spec, dict) or spec.get("action") not in action_table.names():
            known = ", ".join(action_table.names())
            raise ValueError(f"{path}: override for Xid {code} needs an action, one of {known}")
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

    Pairing rules (catalog rows 45, 48, 154; nightowl/knowledge/xid_rules.yaml, applied by ``rules``):
    48 with 63/64 -> drain-and-reset (an ``escalating_pair``), 48 alone -> reset-gpu;
    94 -> restart-app, 95 -> reset-gpu (catalog); the sympathetic codes (``sympathetic_codes``) give way to
    another Xid on the same GPU (a 45 "caused by previous Xid N" stands for N); a 154 action overrides when stricter;
    fatal SXids escalate; a GPU off the bus without Xid 79 is treated as 79 (a ``line_as_code``). ``policy`` (from
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
        elif (pair := escalating_pair(code, codes)) is not None:
            action, partners = pair
            reasons.append(f"Xid {code} with Xid {', '.join(map(str, partners))} on {where} -> {action}")
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


# Xid 45 then tasks stuck in D state: a wedged driver (https://github.com/leptonai/gpud/pull/117): the
# ``hung_task_after`` rule of xid_rules.yaml. ``judge`` reads a hung task in a log that holds an Xid the rule
# names (``_judge_host_lines``); ``nightowl xid`` marks the hung-task line that kernel_patterns labels
# "... after Xid 45" (``wedged_driver_line``) with the rule's action and step.


def wedged_driver_line(event: Mapping[str, Any], label: str) -> bool:
    """True for a hung-task event whose label says it came after a ``hung_task_after`` code: the driver is wedged."""
    return wedged_line(event, label) is not None


def _judge_host_lines(
    pci: str | None, events: list[Mapping[str, Any]], log_xids: list[int], reasons: list[str]
) -> list[str]:
    """Non-Xid GPU and host lines (and known-harmless driver lines), one reason per distinct finding.

    A hung task in a log that also holds an Xid is a wedged driver (gpud PR #117: processes stuck in
    D state after Xid 45): the ``hung_task_after`` rule's action.
    """
    from nightowl.collectors.gpu import kernel_patterns, sxid_catalog

    place = f" on {pci}" if pci else ""
    actions: list[str] = []
    seen: set[str] = set()
    for event in events:
        kind = event.get("kind")
        if kind == "fabric_manager":
            judged: tuple[str, str] | None = sxid_catalog.judge_fabric_manager(event.get("text"))
        elif kind == "hung_task" and (wedged := hung_task_rule(log_xids)) is not None:
            judged = wedged
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
    """Kernel lines the ``line_as_code`` and ``line_action`` rules judge, then the SXids."""
    actions = judge_lines(where, {e.get("kind") for e in events}, codes, reasons)
    from nightowl.collectors.gpu import sxid_catalog

    sxids = {(e.get("code"), e.get("severity")): e for e in events if e.get("kind") == "sxid"}
    for key in sorted(sxids, key=str):
        action, reason = sxid_catalog.judge_sxid(sxids[key])
        reasons.append(f"{reason} on {where}")
        actions.append(action)
    return actions
