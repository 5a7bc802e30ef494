"""`gpu-history`: this run's Xids against the same GPU's past, from earlier boots and the history store.

A derived collector: it runs no command on the host. The past comes from two places: the
``kernel_log_boots`` facts (earlier boots' kernel log, no store needed) and, when the run's context has a
history store, the rows earlier runs recorded for this host. The store is reached through the reader the run
hands in (``inputs["readers"][STORE_READER]``, built by ``nightowl.history.readers``), so collectors never
import the store and hold no state of their own.

"The same GPU" is the same UUID when both sides know it (a GPU moved to another slot is followed, a new
GPU in an old slot is not), else the same bus id. One event seen twice (the same lines replayed, a run
in the same boot, an imported bundle) has one key and counts once; so does one event read through two
clocks (``history_rows.same_event``: journald's zoned time and ``dmesg -T``'s local one).

Rules, each only ever stricter than the log alone (an absent or unreadable past gives the verdict as
without it, never a healthier one):

- a GPU off the bus (Xid 79) now that was off the bus before, in an earlier boot or incident: hardware-ticket;
- any Xid now that the same GPU also logged in ``xid_reboots_hardware`` (default 2) earlier boots:
  hardware-ticket (it survived that many reboots);
- the site policy (parameter ``xid_policy``): ``43: {count: 3, window: 10m, action: drain-and-reset}``
  (that many occurrences within the window, one of them now) and ``79: {after_reboots: 1, action: ...}``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nightowl.collectors.base import DerivedCollector, registered
from nightowl.collectors.gpu.history_rows import SKIPPED_KINDS, same_event

KIND = "gpu-history"
DEFAULT_REBOOTS_HARDWARE = 2
DEFAULT_WINDOW = "24h"
# Incidents less than this apart are one incident logged twice (an Xid 79 line and its "fallen off" line).
SAME_INCIDENT_SECONDS = 60.0

# The readers this collector asks the run's context for (``inputs["readers"]``), by name:
# host -> {"events": [...], "runs": [...], "incidents": {...}} (history.host_history); raises when the store
# cannot be read.
STORE_READER = "history-store"
# (host, this boot's start) -> [{gpu, code, incidents}] before it (Prometheus, `--history-from`); may raise.
PRIOR_READER = "prior-incidents"


def boot_started(boots_facts: Mapping[str, Any]) -> float | None:
    """When this boot began (Unix time), from ``journalctl --list-boots``; None when not listed.
    journalctl prints local time; a zone other than UTC/GMT is read as UTC (off by the zone's offset)."""
    from datetime import datetime, timezone

    for boot in boots_facts.get("boots") or []:
        if boot.get("offset") == 0 and boot.get("first_entry"):
            text = " ".join(str(boot["first_entry"]).split()[1:3])
            try:
                return datetime.strptime(text, "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc).timestamp()
            except ValueError:
                return None
    return None


def _prior(
    read: Callable[[str, float], Sequence[Mapping[str, Any]]] | None,
    host: str | None,
    boots_facts: Mapping[str, Any],
    warnings: list[str],
) -> list[dict[str, Any]]:
    """Earlier boots' incidents as Prometheus remembers them (``read``), as rows dated just before this boot."""
    if read is None or host is None:
        return []
    started = boot_started(boots_facts)
    if started is None:
        warnings.append("history-from: this boot's start is unknown (no journalctl --list-boots): not asked")
        return []
    try:
        found = read(host, started)
    except Exception as exc:  # noqa: BLE001 - an unreachable Prometheus is "no history", never a crash
        warnings.append(f"history-from: Prometheus not read, judged without it (no history): {exc}")
        return []
    return [
        {
            "key": f"prometheus:{f['gpu']}:{f['code']}",
            "kind": "xid",
            "code": f["code"],
            "pci": f["gpu"],
            "uuid": None,
            "boot_id": "before-this-boot",
            "first_ts": started - 1,
            "last_ts": started - 1,
            "count": 1,
            "first_time": None,
            "last_time": None,
            "source": "Prometheus, before this boot",
        }  # fmt: skip
        for f in found
    ]


def _host(inputs: Mapping[str, Any]) -> str | None:
    hosts = list(inputs.get("hosts") or {})
    return hosts[0] if len(hosts) == 1 else None


def _rows(host: str, events: list[Mapping[str, Any]], boot_id: str | None, source: str) -> list[dict[str, Any]]:
    from nightowl.collectors.gpu.history_rows import event_row

    rows = []
    for event in events:
        if event.get("kind") in SKIPPED_KINDS:
            continue
        row = event_row(host, dict(event), boot_id)
        row["source"] = source
        rows.append(row)
    return rows


def _same_gpu(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    if a.get("uuid") and b.get("uuid"):
        return bool(a["uuid"] == b["uuid"])
    return a.get("pci") == b.get("pci")


def _is_off_bus(row: Mapping[str, Any]) -> bool:
    return row.get("kind") == "fallen_off_bus" or (row.get("kind") == "xid" and row.get("code") == 79)


def _before(earlier: Mapping[str, Any], now: Mapping[str, Any]) -> bool:
    """An earlier incident, not the same one: in another (known) boot, or earlier in time."""
    if earlier.get("boot_id") and now.get("boot_id") and earlier["boot_id"] != now["boot_id"]:
        return True
    if earlier.get("first_ts") is not None and now.get("first_ts") is not None:
        return bool(earlier["first_ts"] < now["first_ts"] - SAME_INCIDENT_SECONDS)
    return False


def _in_window(rows: list[Mapping[str, Any]], anchor: float, window: float) -> int:
    """Occurrences in [anchor - window, anchor]; a merged row (count, first..last) counts whole when it
    starts in the window, once when only its last occurrence is in it."""
    total = 0
    for row in rows:
        first, last = row.get("first_ts"), row.get("last_ts")
        if first is None or last is None or first > anchor:
            continue
        if first >= anchor - window:
            total += int(row.get("count") or 1)
        elif last >= anchor - window:
            total += 1
    return total


def _read_store(
    read: Callable[[str], Mapping[str, Any]] | None, host: str | None, warnings: list[str]
) -> tuple[Mapping[str, Any] | None, str]:
    if read is None or host is None:
        return None, "off"
    try:
        return read(host), "read"
    except Exception as exc:  # noqa: BLE001 - a corrupt or locked store is "no history", never a crash
        warnings.append(f"history store unreadable, judged without it (no history): {exc}")
        return None, "unreadable"


@dataclass
class _Conclusions:
    """What the past makes of this run's Xids: the strictest action per GPU, the reasons, the bundles cited."""

    actions: dict[str, str] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    cited: dict[str, str | None] = field(default_factory=dict)

    def conclude(self, gpu: str, action: str, reason: str, rows: Sequence[Mapping[str, Any]]) -> None:
        from nightowl.collectors.gpu.xid_catalog import strictest

        self.actions[gpu] = strictest([self.actions.get(gpu, "none"), action])
        self.reasons.append(reason)
        for row in rows:
            if row.get("bundle_id"):
                self.cited[str(row["bundle_id"])] = row.get("bundle_sha256")


@dataclass(frozen=True)
class _Limits:
    """The rules' numbers: site policy rules, reboots that make a hardware ticket, the counting window."""

    rules: list[dict[str, Any]]
    reboots_hardware: int
    window: float
    now: float


def _past(
    inputs: Mapping[str, Mapping[str, Any]], host: str | None, current: list[dict[str, Any]], warnings: list[str]
) -> tuple[list[dict[str, Any]], Mapping[str, Any] | None, str]:
    """Events of earlier boots, of the store and of Prometheus that this run did not see itself (first
    source wins for a key), the stored record and the store's state."""
    name = host or "host"
    boots_facts = inputs.get("kernel_log_boots") or {}
    keys = {row["key"] for row in current}
    earlier: dict[str, dict[str, Any]] = {}
    for boot in boots_facts.get("previous") or []:
        for row in _rows(name, boot.get("events") or [], boot.get("boot_id"), f"boot {boot.get('offset')}"):
            earlier.setdefault(row["key"], row)
    readers = inputs.get("readers") or {}
    stored, store_state = _read_store(readers.get(STORE_READER), host, warnings)
    for row in (stored or {}).get("events") or []:
        earlier.setdefault(row["key"], {**row, "source": f"bundle {row.get('bundle_id')}"})
    for row in _prior(readers.get(PRIOR_READER), host, boots_facts, warnings):
        earlier.setdefault(row["key"], row)
    # this run's own events, also when read earlier through another clock (journald's zoned time, dmesg -T's
    # local one: a zone offset or a clock step apart, issue "trust, round four", item 5), are not its past
    past = [row for key, row in earlier.items() if key not in keys and not any(same_event(row, c) for c in current)]
    return past, stored, store_state


def _limits(params: Mapping[str, Any], current: list[dict[str, Any]]) -> _Limits:
    from nightowl.ages import parse_age
    from nightowl.collectors.gpu.xid_catalog import load_history_rules

    policy_path = params.get("xid_policy")
    return _Limits(
        rules=load_history_rules(str(policy_path)) if policy_path else [],
        reboots_hardware=int(params.get("xid_reboots_hardware") or DEFAULT_REBOOTS_HARDWARE),
        window=parse_age(str(params.get("history_window") or DEFAULT_WINDOW)) or 86400.0,
        now=max((r["last_ts"] for r in current if r.get("last_ts") is not None), default=time.time()),
    )


def _code_of(row: Mapping[str, Any]) -> Any:
    return 79 if _is_off_bus(row) else row.get("code")


def _judge_code(
    gpu: str,
    code: int | None,
    now_rows: list[dict[str, Any]],
    past: list[dict[str, Any]],
    boot_id: str | None,
    limits: _Limits,
    out: _Conclusions,
) -> dict[str, Any]:
    """One GPU's one Xid code now against its past: the rules' conclusions into ``out``; its figures."""
    same_code = [
        r
        for r in past
        if any(_same_gpu(r, n) for n in now_rows) and _code_of(r) == code and r["kind"] in ("xid", "fallen_off_bus")
    ]
    boots = {r.get("boot_id") for r in same_code if r.get("boot_id")} - {boot_id}
    earliest_now = min(now_rows, key=lambda r: r.get("first_ts") or 0)
    before = [r for r in same_code if _before(r, earliest_now)]
    last_before = max((r["last_ts"] for r in before if r.get("last_ts") is not None), default=None)
    stats = {
        "gpu": gpu,
        "uuid": next((r["uuid"] for r in now_rows if r.get("uuid")), None),
        "code": code,
        "earlier_incidents": len(before),
        "earlier_boots": len(boots),
        "count_in_window": _in_window([*now_rows, *same_code], limits.now, limits.window),
        "window_seconds": limits.window,
        "first_time": min((r["first_time"] for r in [*same_code, *now_rows] if r.get("first_time")), default=None),
        "seconds_since_last": (limits.now - last_before) if last_before is not None else None,
        "earlier_bundles": sorted({str(r["bundle_id"]) for r in before if r.get("bundle_id")}),
    }
    where = f"{gpu} ({stats['uuid']})" if stats["uuid"] else gpu
    if code == 79 and before:
        sources = ", ".join(sorted({str(r.get("source")) for r in before}))
        out.conclude(
            gpu, "hardware-ticket", f"{where} fell off the bus again (earlier: {sources}) -> hardware-ticket", before
        )
    if len(boots) >= limits.reboots_hardware:
        out.conclude(
            gpu,
            "hardware-ticket",
            f"Xid {code} on {where} survived {len(boots)} reboots "
            f"(limit {limits.reboots_hardware}, parameter xid_reboots_hardware) -> hardware-ticket",
            before,
        )
    for rule in (r for r in limits.rules if r["code"] == code):
        why = f": {rule['reason']}" if rule["reason"] else ""
        if "after_reboots" in rule and len(boots) >= rule["after_reboots"]:
            out.conclude(
                gpu,
                rule["action"],
                f"Xid {code} on {where} again after {len(boots)} reboot(s): site policy "
                f"after_reboots {rule['after_reboots']} -> {rule['action']}{why}",
                before,
            )
        counted = _in_window([*now_rows, *same_code], limits.now, rule["window_seconds"]) if "count" in rule else 0
        if "count" in rule and counted >= rule["count"]:
            within = f"{counted} times within {rule['window_seconds']:.0f}s"
            verdict = f"site policy count {rule['count']} -> {rule['action']}{why}"
            out.conclude(gpu, rule["action"], f"Xid {code} on {where} {within}: {verdict}", same_code)
    return stats


def _runs_facts(stored: Mapping[str, Any] | None) -> dict[str, Any]:
    """The last verdicts the store holds for the host (its last five runs, oldest first), and the mean time between
    its incidents (runs that needed action: the mean of the gaps between their starts is their span over one
    fewer than their count; ``incidents``: history.host_history)."""
    runs = (stored or {}).get("runs") or []
    incidents = (stored or {}).get("incidents") or {"count": 0}
    count = incidents["count"]
    return {
        "last_verdicts": [
            {k: r.get(k) for k in ("bundle_id", "bundle_sha256", "started", "verdict_id", "action")} for r in runs
        ],
        "mean_seconds_between_incidents": (incidents["last"] - incidents["first"]) / (count - 1) if count > 1 else None,
    }


def derive(inputs: Mapping[str, Mapping[str, Any]], params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    from nightowl.collectors.gpu.xid_catalog import action_rank, judge, load_policy, strictest

    params = params or {}
    warnings: list[str] = []
    host = _host(inputs)
    boot_id = (inputs.get("kernel_log_boots") or {}).get("current_boot_id")
    current_events = list(inputs["kernel_log"].get("events") or [])
    uuids = {g.get("pci"): g.get("uuid") for g in (inputs.get("nvidia_smi") or {}).get("gpus") or [] if g.get("uuid")}
    current = _rows(host or "host", current_events, boot_id, "this run")
    for row in current:
        row["uuid"] = row["uuid"] or uuids.get(row["pci"])
    past, stored, store_state = _past(inputs, host, current, warnings)
    limits = _limits(params, current)
    found = _Conclusions()
    groups: dict[tuple[str, str, int | None], list[dict[str, Any]]] = {}
    for row in current:
        if row["kind"] in ("xid", "fallen_off_bus"):
            groups.setdefault((row["pci"] or "unknown", "xid", _code_of(row)), []).append(row)
    gpu_codes = [
        _judge_code(gpu, code, now_rows, past, boot_id, limits, found)
        for (gpu, _, code), now_rows in sorted(groups.items(), key=lambda item: str(item[0]))
    ]
    policy_path = params.get("xid_policy")
    log_action = judge(current_events, policy=load_policy(str(policy_path)) if policy_path else None)["action"]
    action = strictest(found.actions.values())
    return {
        "kind": KIND,
        "warnings": warnings,
        "store": store_state,
        "host": host,
        "boot_id": boot_id,
        "action": action,
        "log_action": log_action,
        "escalates": action_rank(action) > action_rank(log_action),
        "reasons": found.reasons,
        "gpus": sorted(gpu for gpu, act in found.actions.items() if act != "none"),
        "gpu_codes": gpu_codes,
        "earlier_events": len(past),
        "earlier_bundles": [{"bundle_id": b, "bundle_sha256": s} for b, s in sorted(found.cited.items())],
        **_runs_facts(stored),
    }


def check_params(params: Mapping[str, Any]) -> list[str]:
    from nightowl.ages import parse_age

    problems = []
    window = params.get("history_window")
    if window is not None and parse_age(str(window)) is None:
        problems.append(f"history_window {window!r}: not an age (10m, 24h, 30d)")
    reboots = params.get("xid_reboots_hardware")
    if reboots is not None and (not isinstance(reboots, int) or reboots < 1):
        problems.append(f"xid_reboots_hardware {reboots!r}: needs a positive integer")
    return problems


COLLECTOR = DerivedCollector(
    **registered(KIND),
    inputs=("kernel_log",),
    optional_inputs=("kernel_log_boots", "nvidia_smi"),
    derive=derive,
    check_params=check_params,
)
