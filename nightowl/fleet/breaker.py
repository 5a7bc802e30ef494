"""The fleet circuit breaker: how many nodes nightowl may drain per window, counted in Slurm itself.

Per-node health checks never talk to each other, so the count lives where they all look: the
scheduler's own drains whose reason nightowl wrote (``nightowl:`` prefix) and whose reason time
falls within the window. Caps are absolute (``max_drain``) and a percentage of the cluster's nodes
(``max_drain_percent``); the lower one holds, because a percentage of a small cluster rounds to a
few nodes and of a large one to hundreds (NVSentinel bounds its remediation the same two ways).
Pure functions over ``sinfo`` text; nightowl/fleet/slurm_actions.py runs the commands.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from nightowl.fleet.node_caps import REASON as OWN_REASON
from nightowl.fleet.node_caps import held_for_ticket

PREFIX = "nightowl:"
# What nightowl writes as a drain reason: `nightowl: VERDICT (ACTION)`, with the count and cap after it when a
# node's cap sent it to a hardware ticket (nightowl/fleet/node_caps.py); anything else is someone else's.
# sinfo -h -N -o ... : node, state, reason time, reason (last: a reason may hold the separator)
SINFO_ARGV = ["sinfo", "-h", "-N", "-o", "%N|%T|%H|%E"]
# sinfo -R (--list-reasons): only nodes with a reason (down, drained, failing), with who set it (%u)
REASONS_ARGV = ["sinfo", "-R", "-h", "-N", "-o", "%N|%T|%H|%u|%E"]


@dataclass(frozen=True)
class NodeState:
    node: str
    state: str  # sinfo %T: idle, drained, draining, mixed+drain ...
    reason: str  # "none" when there is none
    since: datetime | None  # when the reason was set (%H), None when sinfo says Unknown

    @property
    def drained(self) -> bool:
        return "drain" in self.state

    @property
    def drained_by_nightowl(self) -> bool:
        return self.drained and self.reason.startswith(PREFIX)


@dataclass(frozen=True)
class Caps:
    max_drain: int | None = None
    max_drain_percent: float | None = None
    window_s: float = 3600.0

    def limit(self, total_nodes: int) -> int | None:
        """Drains allowed per window for a cluster of ``total_nodes``; None when uncapped."""
        limits = []
        if self.max_drain is not None:
            limits.append(self.max_drain)
        if self.max_drain_percent is not None:
            limits.append(math.floor(total_nodes * self.max_drain_percent / 100))
        return min(limits) if limits else None


def parse_sinfo(text: str) -> dict[str, NodeState]:
    """``sinfo -h -N -o '%N|%T|%H|%E'`` by node (a node in several partitions is listed once)."""
    nodes: dict[str, NodeState] = {}
    for line in text.splitlines():
        parts = line.split("|", 3)
        if len(parts) != 4 or not parts[0].strip():
            continue
        node, state, since, reason = (p.strip() for p in parts)
        nodes.setdefault(node, NodeState(node, state, reason, _time(since)))
    return nodes


def parse_reasons(text: str) -> list[dict[str, object]]:
    """``sinfo -R -h -N -o '%N|%T|%H|%u|%E'`` as facts: each node's reason, who set it and when, and whether it
    is nightowl's own (the exact form it writes); a node in several partitions once, in sinfo's order."""
    facts: dict[str, dict[str, object]] = {}
    for line in text.splitlines():
        parts = line.split("|", 4)
        if len(parts) != 5 or not parts[0].strip():
            continue
        node, state, since, user, reason = (p.strip() for p in parts)
        when = _time(since)
        facts.setdefault(
            node,
            {
                "node": node,
                "state": state,
                "since": when.isoformat() if when else None,
                "user": None if user in ("", "Unknown", "N/A") else user,
                "reason": reason,
                "ours": OWN_REASON.match(reason) is not None,
                "node_cap": held_for_ticket(reason),  # {count, window, max_node_actions}: held for a hardware ticket
            },
        )
    return list(facts.values())


def _time(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def counted_drains(nodes: dict[str, NodeState], now: datetime, window_s: float) -> list[NodeState]:
    """nightowl's drains inside the window, oldest first (then by name: the order ties are broken in).
    A drain whose time sinfo does not show counts: unknown age is not old age."""
    inside = [
        n
        for n in nodes.values()
        if n.drained_by_nightowl and (n.since is None or (now - n.since).total_seconds() < window_s)
    ]
    return sorted(inside, key=lambda n: (n.since or datetime.min, n.node))


@dataclass(frozen=True)
class Decision:
    allowed: bool
    why: str


def may_drain(node: str, nodes: dict[str, NodeState], caps: Caps, now: datetime) -> Decision:
    """Whether one more drain (of ``node``) stays within the caps, and why (the held reason names them)."""
    limit = caps.limit(len(nodes))
    counted = [n.node for n in counted_drains(nodes, now, caps.window_s) if n.node != node]
    if limit is None:
        return Decision(True, "no breaker cap")  # the fleet's (--max-drain); a node's cap is node_caps.py's
    if len(counted) < limit:
        return Decision(True, f"{len(counted) + 1} of at most {limit} drains in {caps.window_s:g} s")
    return Decision(False, _open(limit, len(counted), len(nodes), caps))


def keeps_drain(node: str, nodes: dict[str, NodeState], caps: Caps, now: datetime) -> Decision:
    """After draining: whether ``node`` is among the first drains the caps allow. Checks on other nodes
    may have drained in the same moment; each keeps its drain only when it ranks within the limit, so
    together they settle on the cap rather than all on top of it."""
    limit = caps.limit(len(nodes))
    ranked = [n.node for n in counted_drains(nodes, now, caps.window_s)]
    if limit is None or node not in ranked or ranked.index(node) < limit:
        return Decision(True, "within the cap")
    return Decision(False, _open(limit, len(ranked) - 1, len(nodes), caps) + " (drained at the same moment)")


def _open(limit: int, counted: int, total: int, caps: Caps) -> str:
    bounds = []
    if caps.max_drain is not None:
        bounds.append(f"--max-drain {caps.max_drain}")
    if caps.max_drain_percent is not None:
        bounds.append(f"--max-drain-percent {caps.max_drain_percent:g} of {total} nodes")
    return (
        f"circuit breaker open: {counted} nodes already drained by nightowl in the last {caps.window_s:g} s, "
        f"cap {limit} ({', '.join(bounds)})"
    )
