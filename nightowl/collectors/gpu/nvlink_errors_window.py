"""`nvlink-errors-window`: a derived collector: two `nvlink-errors` reads a window apart, per-link deltas.

``nvidia-smi nvlink -e`` counters (replay, recovery, CRC) are cumulative since the driver loaded, so one read
cannot tell a link erring now from an old count. This compares ``nvlink_errors`` with ``nvlink_errors_after``
(``nvlink-errors:after``, read ``wait:`` seconds later). DCGM's NVLink health watch fails a GPU on any replay
or recovery error in its window and warns on CRC errors (https://docs.nvidia.com/datacenter/dcgm/latest/
user-guide/feature-overview.html, "Health and Diagnostics"); a counter that rose here is judged the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nightowl.collectors.base import DerivedCollector, registered
from nightowl.collectors.gpu.nvlink import ERROR_COUNTERS

KIND = "nvlink-errors-window"
INPUTS = ("nvlink_errors", "nvlink_errors_after")
FAILING = frozenset({"replay", "recovery"})  # any rise fails (DCGM NVLink health watch); CRC rises warn


def _counters(facts: Mapping[str, Any]) -> dict[tuple[int, int], dict[str, Any]]:
    out = {}
    for gpu in facts.get("gpus") or []:
        for link in gpu.get("links") or []:
            out[(gpu["index"], link["link"])] = {
                name: value
                for name, value in (link.get("errors") or {}).items()
                if name in ERROR_COUNTERS and isinstance(value, int)
            }
    return out


def derive(inputs: Mapping[str, Mapping[str, Any]], params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Per link, the error counters that rose between the reads, and those that only hold an old count."""
    before, after = _counters(inputs["nvlink_errors"]), _counters(inputs["nvlink_errors_after"])
    rising, stale, reset = [], [], []
    common = sorted(set(before) & set(after))
    for key in common:
        gpu, link = key
        moved = False
        for name in sorted(set(before[key]) & set(after[key])):
            delta = after[key][name] - before[key][name]
            if delta < 0:
                reset.append({"gpu": gpu, "link": link, "counter": name})
            elif delta > 0:
                moved = True
                rising.append({"gpu": gpu, "link": link, "counter": name, "delta": delta, "fails": name in FAILING})
        old = {name: value for name, value in after[key].items() if value and not moved}
        if old:
            stale.append({"gpu": gpu, "link": link, "counts": old})
    return {
        "kind": KIND,
        "has_window": any(before[key] for key in common),
        "compared_links": len(common),
        "rising": rising,
        "rising_gpus": sorted({entry["gpu"] for entry in rising}),
        "failing_gpus": sorted({entry["gpu"] for entry in rising if entry["fails"]}),
        "stale_counts": stale,
        "counters_reset": reset,
    }


COLLECTOR = DerivedCollector(**registered(KIND), inputs=INPUTS, derive=derive)
