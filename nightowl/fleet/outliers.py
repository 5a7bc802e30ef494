"""What sets hosts of one sweep apart: driver version and GPU count off the majority, Xid counts.

Read from the facts each host's run collected (``nvidia-smi`` and ``kernel-log``); a host whose
facts are missing is left out of the comparison, never counted as the majority or as an outlier.
"""

from __future__ import annotations

from collections import Counter
from typing import Any


def fleet_facts(runs: list[Any]) -> dict[str, Any]:
    """Hosts that differ from the rest of the fleet on driver version or GPU count, and Xid counts per host.

    Returns ``{"outliers": {field: [host, ...]}, "values": {host: {field: value}}, "xid_events": {host: {code: n}},
    "network": {host: {"ports": text, "fabric": text}}}``.
    """
    seen: dict[str, dict[str, Any]] = {}
    xid_events: dict[str, dict[str, int]] = {}
    network: dict[str, dict[str, str]] = {}
    for run in runs:
        network[run.host] = network_summary({c.namespace: c.facts for c in run.collections.values() if c.facts})
        kernel = next((c.facts for c in run.collections.values() if c.kind == "kernel-log" and c.facts), None)
        if kernel:
            counts: dict[str, int] = {}
            for event in kernel.get("events") or []:
                if event.get("kind") in ("xid", "sxid") and event.get("code") is not None:
                    code = f"{'S' if event['kind'] == 'sxid' else ''}{event['code']}"
                    counts[code] = counts.get(code, 0) + int(event.get("count") or 1)
            xid_events[run.host] = counts
        smi = next((c.facts for c in run.collections.values() if c.kind == "nvidia-smi" and c.facts), None)
        if smi:
            seen[run.host] = {"driver_version": smi.get("driver_version"), "gpu_count": smi.get("gpu_count")}
    outliers: dict[str, list[str]] = {}
    for field in ("driver_version", "gpu_count"):
        values = Counter(v[field] for v in seen.values() if v[field] is not None)
        if len(values) > 1:
            majority = values.most_common(1)[0][0]
            outliers[field] = [h for h, v in seen.items() if v[field] not in (None, majority)]
    return {"outliers": outliers, "values": seen, "xid_events": xid_events, "network": network}


def network_summary(facts: dict[str, Any]) -> dict[str, str]:
    """The sweep table's PORTS and FABRIC cells: "-" when the host's run read none (never "ok" unread)."""
    ports, window = facts.get("ib_ports") or {}, facts.get("ib_ports_window") or {}
    if ports.get("port_count"):
        cell = f"{len(ports.get('active_ports') or [])}/{ports['port_count']} up"
        down = [p["port"] for p in ports.get("ports_down") or []]
        slow = [p["port"] for p in ports.get("ports_below_peer_rate") or []]
        for word, names in (("down", down), ("slow", slow), ("flap", window.get("flapping_ports") or []),
                            ("errors", window.get("degraded_ports") or [])):  # fmt: skip
            if names:
                cell += f" {word} {','.join(names)}"
    else:
        cell = "-"
    fabric, manager = facts.get("fabric") or {}, facts.get("fabric_manager") or {}
    if fabric.get("gpus_with_fabric"):
        degraded = fabric.get("degraded_gpus") or []
        fabric_cell = f"degraded {','.join(map(str, degraded))}" if degraded else "ok"
    else:
        fabric_cell = "-"
    if manager.get("active") is False and fabric.get("gpus_with_fabric") and not fabric.get("nvl_system"):
        fabric_cell += f" fm {manager.get('state')}"
    return {"ports": cell, "fabric": fabric_cell}
