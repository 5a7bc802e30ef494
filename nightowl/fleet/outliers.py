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
    "network": {host: {"ports": text, "fabric": text}}, "nvlink_domains": {host: ClusterUUID}}``.
    """
    seen: dict[str, dict[str, Any]] = {}
    xid_events: dict[str, dict[str, int]] = {}
    network: dict[str, dict[str, str]] = {}
    nvlink_domains: dict[str, str] = {}
    for run in runs:
        facts = {c.namespace: c.facts for c in run.collections.values() if c.facts}
        network[run.host] = network_summary(facts)
        cluster = nvlink_domain(facts.get("fabric") or {})
        if cluster:
            nvlink_domains[run.host] = cluster
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
    return {
        "outliers": outliers,
        "values": seen,
        "xid_events": xid_events,
        "network": network,
        "nvlink_domains": nvlink_domains,
    }


def nvlink_domain(fabric: dict[str, Any]) -> str | None:
    """The NVLink domain a host's GPUs registered in: their one non-zero ClusterUUID (``nvidia-smi -q``
    Fabric block, the fabric collector), else None. A GPU that lost its clique keeps the cluster, so the
    CliqueId (a partition of the domain) does not split a sick node from its peers."""
    from nightowl.collectors.gpu.fabric import ZERO_UUID

    clusters = {str(u).lower() for u in fabric.get("cluster_uuids") or [] if u and str(u).lower() != ZERO_UUID}
    return clusters.pop() if len(clusters) == 1 else None


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
