"""Failure domains: hosts that share a rack, a leaf switch or an NVLink domain, judged together.

A sweep judges each host alone; 18 nodes of one rack with the same fabric fault then read as 18
unrelated verdicts. Here the per-host summaries of a sweep are grouped by the domain keys the
inventory gave each host (``rack``, ``switch``, and any keys the inventory lists under ``domains:``)
and by what the hosts' own facts show (``nvlink_domain``: the fabric's ClusterUUID), and each domain
gets its verdict counts, a domain finding when enough of its members share a verdict, the members
that stand out from their own peers, and its primary node where the Xids show one: the one member
whose Xids are a fault of the node while its peers' are only what a job shows when another member
fails (application-level or sympathetic in NVIDIA's Xid catalog). Pure functions: no I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from statistics import median
from typing import Any

DEFAULT_DOMAIN_KEYS = ("rack", "switch")
# What a person inspects when many members of one domain kind fail alike; kinds not listed here
# are named as the inventory wrote them.
DOMAIN_SUSPECTS = {
    "rack": "rack power, cooling and NVLink trays",
    "switch": "leaf switch and its uplinks",
    "nvlink_domain": "NVLink trays and fabric manager",
    "clique": "NVLink trays and fabric manager",
    "pdu": "power distribution unit",
}
MIN_SHARED = 3  # a domain finding needs at least this many members with the same verdict ...
MIN_FRACTION = 0.5  # ... and at least this fraction of the domain's judged members


def domain_keys(variables: Mapping[str, Any], listed: Iterable[str] = ()) -> dict[str, str]:
    """The domain memberships in a host's variables: ``rack``, ``switch`` and the ``listed`` keys."""
    keys = [*DEFAULT_DOMAIN_KEYS, *(k for k in listed if k not in DEFAULT_DOMAIN_KEYS)]
    return {k: str(variables[k]) for k in keys if variables.get(k) not in (None, "")}


def with_fact_domains(
    memberships: Mapping[str, Mapping[str, str]], fleet: Mapping[str, Any]
) -> dict[str, dict[str, str]]:
    """The inventory's memberships plus those the hosts' facts show (``fleet_facts``' ``nvlink_domains``);
    where the inventory names a host's ``nvlink_domain`` itself, its word stands."""
    merged = {host: dict(kinds) for host, kinds in memberships.items()}
    for host, cluster in (fleet.get("nvlink_domains") or {}).items():
        merged.setdefault(host, {}).setdefault("nvlink_domain", cluster)
    return merged


def fleet_domains(
    hosts: list[dict[str, Any]],
    memberships: Mapping[str, Mapping[str, str]],
    xid_events: Mapping[str, Mapping[str, int]] | None = None,
    *,
    min_shared: int = MIN_SHARED,
    min_fraction: float = MIN_FRACTION,
) -> list[dict[str, Any]]:
    """One entry per domain (kind, name), in the order their first member appears in ``hosts``.

    ``hosts`` are the sweep's per-host entries (``{host, status, verdict}``), ``memberships`` maps a
    host to its ``{kind: name}``, ``xid_events`` a host to its ``{code: count}`` (hosts whose kernel
    log was read). A host without a verdict counts under ``(status)`` and is never part of a finding.
    """
    xid_events = xid_events or {}
    members: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for host in hosts:
        for kind, name in (memberships.get(host["host"]) or {}).items():
            members.setdefault((kind, name), []).append(host)
    return [_domain(kind, name, group, xid_events, min_shared, min_fraction) for (kind, name), group in members.items()]


def _domain(
    kind: str,
    name: str,
    group: list[dict[str, Any]],
    xid_events: Mapping[str, Mapping[str, int]],
    min_shared: int,
    min_fraction: float,
) -> dict[str, Any]:
    names = [h["host"] for h in group]
    verdicts = Counter(_verdict_id(h) for h in group)
    judged = [h for h in group if h.get("verdict")]
    findings = []
    for verdict_id, count in Counter(h["verdict"]["id"] for h in judged).most_common():
        verdict = next(h["verdict"] for h in judged if h["verdict"]["id"] == verdict_id)
        if verdict.get("action", "none") == "none" or count < min_shared or count < min_fraction * len(judged):
            continue
        sharing = [h["host"] for h in judged if h["verdict"]["id"] == verdict_id]
        suspect = DOMAIN_SUSPECTS.get(kind, kind)
        findings.append(
            {
                "verdict": verdict_id,
                "severity": verdict.get("severity"),
                "host_action": verdict.get("action"),
                "shared_by": count,
                "of": len(group),
                "members": sharing,
                "action": f"inspect {kind} {name} ({suspect}) before acting on its nodes one by one: "
                f"{count} of {len(group)} members show {verdict_id}: {', '.join(sharing)}",
            }
        )
    primary = primary_node(names, xid_events)
    if primary is not None:
        for finding in findings:
            finding["action"] += f"; start with {primary['host']}: {primary['why']}"
    return {
        "kind": kind,
        "name": name,
        "members": names,
        "verdicts": dict(verdicts.most_common()),
        "findings": findings,
        "outliers": _outliers(group, judged, xid_events, min_shared),
        "primary": primary,
    }


def xid_is_follower(code: str) -> bool:
    """An Xid a GPU shows when its work was torn down by someone else's fault: sympathetic in nightowl's
    rules (xid_rules.yaml ``sympathetic_codes``), or one whose catalog action is none or restart-app
    (nvidia's RESTART_APP/IGNORE buckets, xid_buckets.csv). An SXid or an unknown code is never one."""
    from nightowl.collectors.gpu import xid_catalog

    if not code.isdigit():
        return False
    number = int(code)
    return number in xid_catalog.SYMPATHETIC_CODES or xid_catalog.action_for(number) in ("none", "restart-app")


def primary_node(names: list[str], xid_events: Mapping[str, Mapping[str, int]]) -> dict[str, Any] | None:
    """The member whose fault the others' errors follow, where the Xids show it: exactly one member
    with an Xid that is a fault of the node, and at least one peer whose Xids all follow (see
    :func:`xid_is_follower`). None when the evidence does not single one out (two faulted members, no
    follower, no kernel log read)."""
    faulted, followers = [], []
    for host in names:
        codes = [code for code, count in (xid_events.get(host) or {}).items() if count]
        if any(not xid_is_follower(code) for code in codes):
            faulted.append((host, sorted(c for c in codes if not xid_is_follower(c))))
        elif codes:
            followers.append((host, sorted(codes)))
    if len(faulted) != 1 or not followers:
        return None
    host, own = faulted[0]
    seen = sorted({code for _, codes in followers for code in codes}, key=lambda c: (len(c), c))
    return {
        "host": host,
        "xids": own,
        "followers": [h for h, _ in followers],
        "why": f"it alone shows Xid {', '.join(own)}; {len(followers)} peer(s) show only Xid {', '.join(seen)}, "
        "which follow another GPU's fault (application-level or sympathetic in NVIDIA's Xid catalog)",
    }


def _verdict_id(host: Mapping[str, Any]) -> str:
    return (host.get("verdict") or {}).get("id") or f"({host.get('status')})"


def _outliers(
    group: list[dict[str, Any]],
    judged: list[dict[str, Any]],
    xid_events: Mapping[str, Mapping[str, int]],
    min_peers: int,
) -> list[dict[str, Any]]:
    """Members unlike their peers: a verdict other than the one most members share, or more Xid
    events than twice the domain's median (and at least one more than it). Needs ``min_peers`` judged."""
    found: list[dict[str, Any]] = []
    if len(judged) >= min_peers:
        majority, count = Counter(h["verdict"]["id"] for h in judged).most_common(1)[0]
        if count * 2 > len(judged):
            for h in judged:
                if h["verdict"]["id"] != majority:
                    found.append({"host": h["host"], "by": "verdict", "value": h["verdict"]["id"], "peers": majority})
    counted = {h["host"]: sum(xid_events[h["host"]].values()) for h in group if h["host"] in xid_events}
    if len(counted) >= min_peers:
        middle = median(counted.values())
        for host, total in counted.items():
            if total > 2 * middle and total >= middle + 1:
                found.append({"host": host, "by": "xid_events", "value": total, "peers": middle})
    return found


def domains_table(domains: list[dict[str, Any]]) -> list[str]:
    """Lines for `--format table`: each domain with a finding or an outlier (quiet domains stay quiet)."""
    lines = []
    for d in domains:
        if not d["findings"] and not d["outliers"] and not d.get("primary"):
            continue
        counts = ", ".join(f"{k} {n}" for k, n in d["verdicts"].items())
        lines.append(f"{d['kind']} {d['name']} ({len(d['members'])} hosts: {counts})")
        lines.extend(f"  finding: {f['action']}" for f in d["findings"])
        lines.extend(f"  outlier: {o['host']} ({o['by']} {o['value']}, peers {o['peers']})" for o in d["outliers"])
        if d.get("primary"):
            lines.append(f"  primary: {d['primary']['host']} ({d['primary']['why']})")
    return lines
