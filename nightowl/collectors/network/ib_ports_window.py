"""`ib-ports-window`: a derived collector: two `ib-ports` reads a window apart, per-port deltas.

It runs no command. It reads ``ib_ports`` (window start) and ``ib_ports_after`` (``ib-ports:after``
after ``wait: ib_window_seconds``), as ``metrics-window`` does for serving metrics, and says per port
which error counters rose in the window, at what rate, and which only hold a count from before it.

Thresholds (nightowl/knowledge/ib_counter_thresholds.csv, each row with its source): ``link_downed``
rising at all is a flapping link; ``symbol_error`` above the IBTA bit-error-rate limit (120 an hour,
as NVIDIA NVSentinel's NIC health monitor applies it) is a degraded link; the other error counters
rising are reported, not judged alone.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from nightowl.collectors.base import DerivedCollector, registered

KIND = "ib-ports-window"
INPUTS = ("ib_ports", "ib_ports_after")
THRESHOLDS_FILE = Path(__file__).resolve().parents[2] / "knowledge" / "ib_counter_thresholds.csv"
PER_SECOND = {"second": 1.0, "minute": 60.0, "hour": 3600.0}


@lru_cache(maxsize=1)
def thresholds() -> dict[str, dict[str, Any]]:
    """counter -> {judgement, threshold, per, source}: the published limits the window is held to."""
    rows: dict[str, dict[str, Any]] = {}
    with THRESHOLDS_FILE.open(newline="") as handle:
        for row in csv.DictReader(line for line in handle if not line.startswith("#")):
            rows[row["counter"]] = {
                "judgement": row["judgement"],
                "threshold": float(row["threshold"]),
                "per": row["per"] or None,
                "source": row["source"],
            }
    return rows


def _by_label(facts: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {f"{p['device']}/{p['port']}": p for p in facts.get("ports") or []}


def _window_seconds(params: Mapping[str, Any]) -> float | None:
    value = params.get("ib_window_seconds")
    try:
        seconds = float(value) if value is not None else None
    except (TypeError, ValueError):
        return None
    return seconds if seconds and seconds > 0 else None


def _exceeds(delta: int, seconds: float | None, limit: Mapping[str, Any]) -> bool:
    if limit["per"] is None:  # a delta threshold: any rise above it
        return delta > limit["threshold"]
    if seconds is None:
        return False
    rate = delta / seconds * PER_SECOND[limit["per"]]
    return rate > limit["threshold"]


def derive(inputs: Mapping[str, Mapping[str, Any]], params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Both reads' facts -> per-port deltas and the ports that flap, degrade, or only hold old counts."""
    before, after = _by_label(inputs["ib_ports"]), _by_label(inputs["ib_ports_after"])
    seconds = _window_seconds(params or {})
    limits = thresholds()
    common = sorted(set(before) & set(after))
    deltas: dict[str, dict[str, int]] = {}
    flapping: list[dict[str, Any]] = []
    degraded: list[dict[str, Any]] = []
    rising: list[dict[str, Any]] = []
    stale: list[dict[str, Any]] = []
    reset: list[str] = []
    state_changed: list[dict[str, Any]] = []
    unjudged: list[str] = []
    for label in common:
        first, second = before[label], after[label]
        counts_a, counts_b = first.get("counters") or {}, second.get("counters") or {}
        if first.get("state") != second.get("state") or first.get("phys_state") != second.get("phys_state"):
            state_changed.append(
                {
                    "port": label,
                    "before": [first.get("state"), first.get("phys_state")],
                    "after": [second.get("state"), second.get("phys_state")],
                }  # fmt: skip
            )
        if {n for n in counts_a if n in limits} != {n for n in counts_b if n in limits}:
            unjudged.append(label)  # an error counter one read has and the other lacks (unreadable mid-flap)
            continue
        port_deltas: dict[str, int] = {}
        went_down = False
        for name in sorted(set(counts_a) & set(counts_b)):
            delta = counts_b[name] - counts_a[name]
            if delta < 0:
                went_down = True  # counters reset (driver reload, perfquery -R) inside the window
                continue
            port_deltas[name] = delta
        if went_down:
            reset.append(label)
        deltas[label] = {name: value for name, value in port_deltas.items() if value}
        for name, delta in port_deltas.items():
            limit = limits.get(name)
            if not delta or limit is None:
                continue
            entry = {"port": label, "counter": name, "delta": delta, "seconds": seconds, "source": limit["source"]}
            if seconds:
                entry["per_hour"] = round(delta / seconds * 3600, 3)
            if not _exceeds(delta, seconds, limit):
                continue
            {"flapping": flapping, "degraded": degraded}.get(limit["judgement"], rising).append(entry)
        old = {n: counts_b[n] for n in limits if counts_b.get(n) and not port_deltas.get(n)}
        # an error count no error counter added to in the window (traffic counters may move: the link carries data)
        if old and not any(port_deltas.get(n) for n in limits):
            stale.append({"port": label, "counts": old})
    flapping_ports = sorted({str(e["port"]) for e in flapping} | {str(c["port"]) for c in state_changed})
    return {
        "kind": KIND,
        "window_seconds": seconds,
        "compared_ports": common,
        # a port whose error counters are not in both reads cannot be judged, and neither can the window
        "has_window": bool(common) and any(before[label].get("counters") for label in common) and not unjudged,
        "unjudged_ports": unjudged,
        "only_in_one_read": sorted(set(before) ^ set(after)),
        "deltas": {label: values for label, values in deltas.items() if values},
        "flapping": flapping,
        "flapping_ports": flapping_ports,
        "state_changed": state_changed,
        "degraded": degraded,
        "degraded_ports": sorted({e["port"] for e in degraded}),
        "rising": rising,
        "stale_counts": stale,
        "counters_reset": reset,
    }


COLLECTOR = DerivedCollector(**registered(KIND), inputs=INPUTS, derive=derive)
