"""A cap per node: the same node taken out for the same fault family too often goes to a hardware ticket.

NVSentinel's users saw drain/reset loops in production and asked for a cap per node (NVSentinel#1543, its
``MultipleRemediations`` rule); gpud escalates after N reboots. nightowl counts, for one node and one fault
family (the verdict id: ``gpu-fell-off-bus`` for Xid 79), what ``actions.jsonl`` (nightowl/fleet/actions_log.py)
says it did inside the window: each drain that took (``drained``, ``drained-unconfirmed``), each time it turned
the node's condition False (``set``, ``turned False``), and each incident whose repair a ``nightowl verify``
found had not taken (``verify-failed``; once per incident, however often the verify ran). With
``--max-node-actions N``, a drain when N are already counted is drained for a hardware ticket (reason
``nightowl: VERDICT (hardware-ticket) C times in W, node cap N``; a condition's message leads with
``hardware-ticket: VERDICT C times in W, node cap N;``) and an automatic resume of a node counted over N is
held. The ticket lives in the scheduler (slurmctld saves reasons across restarts; the API server keeps the
condition), so the hold survives a node's restart, a pod's move and a new state dir; the count itself is only
as lasting as the log (put ``$NIGHTOWL_ACTIONS_LOG`` on shared storage for one count across the fleet).
docs/reference.md#node-cap.
Pure: log lines in, counts and words out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

TICKET = "hardware-ticket"
# The words every line and hold about a node's cap starts with (the breaker state skips them: not the breaker).
PREFIX = "node cap:"
# nightowl's drain reason, with the ticket words a capped drain adds (nightowl/fleet/breaker.py OWN_REASON).
REASON = re.compile(
    r"^nightowl: (?P<verdict>[a-z0-9][a-z0-9._-]*) \((?P<action>[a-z-]+)\)"
    r"(?: (?P<count>\d+) times in (?P<window>\w+), node cap (?P<max>\d+))?$"
)
# A `k8s condition` line that turned the node False (nightowl/fleet/k8s_condition.py): the family is its reason.
TURNED_FALSE = re.compile(r"^NightowlGPUHealthy=False \((?P<verdict>[a-z0-9][a-z0-9._-]*)\); turned False")
# The message of a condition over a node's cap: the ticket's words lead, the check's message follows.
CONDITION_TICKET = re.compile(
    r"^hardware-ticket: (?P<verdict>[a-z0-9][a-z0-9._-]*) (?P<count>\d+) times in (?P<window>\w+), "
    r"node cap (?P<max>\d+);"
)
# How `nightowl verify` names the incident in a failed verify's line (nightowl/cli/verify_cmd.py).
VERIFIED = re.compile(r" after incident (?P<incident>\S+) \[(?P<verdict>[a-z0-9][a-z0-9._-]*) -> ")
DRAINED = frozenset({"drained", "drained-unconfirmed"})
SET = frozenset({"set", "set-unconfirmed"})


@dataclass(frozen=True)
class NodeCap:
    """``--max-node-actions`` and the window it counts in (``--node-actions-window``, default 7 days)."""

    max_actions: int
    window_s: float = 7 * 86400.0

    @property
    def window(self) -> str:
        return span(self.window_s)


@dataclass(frozen=True)
class Count:
    """What the log holds against one node for one fault family inside the window, oldest first."""

    node: str
    family: str
    cap: NodeCap
    earlier: tuple[dict[str, Any], ...]  # {when, what, bundle, bundle_sha256}

    @property
    def count(self) -> int:
        return len(self.earlier)

    def as_json(self, action: str | None = None) -> dict[str, Any]:
        return {
            "family": self.family,
            "count": self.count,
            "max_node_actions": self.cap.max_actions,
            "window_s": self.cap.window_s,
            "action": action,
            "earlier": list(self.earlier),
        }

    def words(self) -> str:
        """The count, each earlier action with its bundle (id and sha256) and date, for the log and the report."""
        shown = ", ".join(
            f"{e['when']} {e['what']} bundle {e['bundle'] or '-'} sha256 {(e['bundle_sha256'] or '-')[:16]}"
            for e in self.earlier
        )
        return (
            f"{PREFIX} {self.node} taken out for {self.family} {self.count} time(s) in the last {self.cap.window} "
            f"(--max-node-actions {self.cap.max_actions}): {shown or 'none'}"
        )


def span(seconds: float) -> str:
    """A window as the largest whole unit that states it (days at most): 604800 -> ``7d``, 5400 -> ``90m``."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def family_of(reason: str) -> str | None:
    """The fault family of a drain reason nightowl wrote (its verdict id); None for anyone else's reason."""
    match = REASON.match(reason)
    return match["verdict"] if match else None


def ticket_reason(verdict: str, count: int, cap: NodeCap) -> str:
    """The drain reason of a node over its cap: ``count`` is this drain's number in the window."""
    return f"nightowl: {verdict} ({TICKET}) {count} times in {cap.window}, node cap {cap.max_actions}"


def condition_ticket(condition: Mapping[str, Any]) -> dict[str, Any] | None:
    """``{verdict, count, window, max_node_actions}`` when a NightowlGPUHealthy condition is False for a hardware
    ticket by a node's cap (its message leads with the ticket's words), else None."""
    match = CONDITION_TICKET.match(str(condition.get("message") or ""))
    if condition.get("status") != "False" or not match:
        return None
    return {"verdict": match["verdict"], "count": int(match["count"]), "window": match["window"],
            "max_node_actions": int(match["max"])}  # fmt: skip


def ticket_words(verdict: str, count: int, cap: NodeCap) -> str:
    """What a condition over a node's cap says first (read back by :func:`condition_ticket`)."""
    return f"{TICKET}: {verdict} {count} times in {cap.window}, node cap {cap.max_actions};"


def held_for_ticket(reason: str) -> dict[str, Any] | None:
    """``{count, window, max_node_actions}`` when the reason is a drain over a node's cap, else None."""
    match = REASON.match(reason)
    if not match or match["count"] is None:
        return None
    return {"count": int(match["count"]), "window": match["window"], "max_node_actions": int(match["max"])}


def count(entries: Iterable[Mapping[str, Any]], node: str, family: str, cap: NodeCap, now: float) -> Count:
    """The node's drains for ``family`` and its incidents of ``family`` whose verify failed, inside the window."""
    earlier: list[dict[str, Any]] = []
    failed_incidents: set[str] = set()
    for entry in entries:
        if entry.get("node") != node or now - _epoch(entry.get("when"), now) >= cap.window_s:
            continue
        why = str(entry.get("why") or "")
        if entry.get("what") == "drain" and entry.get("result") in DRAINED:
            if family_of(why.split(";")[0]) != family:
                continue
        elif entry.get("what") == "condition" and entry.get("result") in SET:
            turned = TURNED_FALSE.match(why)
            if not turned or turned["verdict"] != family:
                continue
        elif entry.get("what") == "verify" and entry.get("result") == "verify-failed":
            match = VERIFIED.search(why)
            if not match or match["verdict"] != family or match["incident"] in failed_incidents:
                continue
            failed_incidents.add(match["incident"])
        else:
            continue
        bundle = entry.get("bundle")
        earlier.append(
            {
                "when": entry.get("when"),
                "what": "verify-failed" if entry.get("what") == "verify" else str(entry.get("what")),
                "bundle": Path(str(bundle)).name if bundle else None,
                "bundle_sha256": entry.get("bundle_sha256"),
            }
        )
    return Count(node, family, cap, tuple(earlier))


def _epoch(when: Any, now: float) -> float:
    """A log line's time; one that cannot be read counts as now (unknown age is not old age)."""
    try:
        moment = datetime.fromisoformat(str(when).replace("Z", "+00:00"))
    except ValueError:
        return now
    return (moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).timestamp()
