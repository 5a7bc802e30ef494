"""The ``NightowlGPUHealthy`` node condition, patched with ``kubectl`` behind the circuit breaker.

For clusters without node-problem-detector (nightowl/fleet/node_condition.py is its plugin). The
condition has the polarity of ``Ready``: ``True`` healthy, ``False`` the node needs action, ``Unknown``
the check could not judge; ``reason`` is the verdict id and ``message`` its summary and the bundle id.
Only two kubectl command lines ever run (an allow-list, checked before each run, argv lists): ``kubectl
get nodes -o json`` and ``kubectl patch node NODE --subresource=status --type=strategic -p BODY`` whose
body sets this one condition (a node's ``status.conditions`` merge on ``type``, so the others stay).

Turning a node ``False`` is what the breaker caps (nightowl/fleet/breaker.py): the nodes counted are
those Kubernetes itself shows with ``NightowlGPUHealthy=False`` whose ``lastTransitionTime`` falls in
the window, so checks on different nodes that never talk to each other respect one cap. A held
node gets ``Unknown`` saying it was held and why (never its old ``True``: that would be a false OK).
Checks that turn nodes False at once settle as Slurm's do (nightowl/fleet/slurm_actions.py): ranked by
``lastTransitionTime`` (whole seconds, stamped just before the patch) then node name, each confirms
``SETTLE_S`` after its patch, and one beyond the cap undoes its own condition (Unknown, held). The
stamp is the checking node's clock, not the API server's: a patch that lands more than ``LATE_S`` after
its stamp is stamped again (once; then undone), so the order holds while the nodes' clocks agree within
half a second; ``--lock`` on shared storage serialises the decisions outright. Every condition set or
held goes to ``actions.jsonl`` (intent first, then the outcome: nightowl/fleet/actions_log.py). With a node's
cap (nightowl/fleet/node_caps.py), a node turned False for one verdict as often as the cap allows is turned
False for a hardware ticket (the message leads with the count, so the API server keeps it across pod moves),
and no later True or Unknown replaces that: it is held until a person sets the condition without the cap.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

from nightowl.fleet import actions_log, drain_record, node_caps
from nightowl.fleet.breaker import PREFIX, Caps, NodeState, keeps_drain, may_drain
from nightowl.fleet.node_condition import fit

CONDITION = "NightowlGPUHealthy"
GET_NODES = ["kubectl", "get", "nodes", "-o", "json"]
PATCH_FLAGS = ["--subresource=status", "--type=strategic", "-p"]
# A node condition's message has no limit of its own short of the object's size; kept to what
# `kubectl describe node` shows on a line or two.
MESSAGE_LIMIT = 1024
# A node's name is a DNS-1123 subdomain (https://kubernetes.io/docs/concepts/overview/working-with-objects/names/).
NODE_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


# After turning a node False under a cap: one second for the stamp's resolution, one for a patch that lands
# late (LATE_S: a later one is stamped again), and one for clocks half a second apart either way. A check
# that waits SETTLE_S after its patch then sees every condition stamped in its second or before.
SETTLE_S = 3.0
LATE_S = 1.0


class KubectlError(RuntimeError):
    """kubectl failed, answered something unreadable, or a command line is not on the allow-list."""


def patch_argv(node: str, condition: dict[str, Any]) -> list[str]:
    body = json.dumps({"status": {"conditions": [condition]}}, sort_keys=True, separators=(",", ":"))
    return ["kubectl", "patch", "node", node, *PATCH_FLAGS, body]


def allowed(argv: list[str]) -> bool:
    """Whether ``argv`` is one of the two command lines nightowl may run (see the module docstring)."""
    if argv == GET_NODES:
        return True
    if len(argv) != 8 or argv[:3] != ["kubectl", "patch", "node"] or argv[4:7] != PATCH_FLAGS:
        return False
    if len(argv[3]) > 253 or not NODE_NAME.fullmatch(argv[3]):
        return False
    try:
        body = json.loads(argv[7])
    except ValueError:
        return False
    status = body.get("status") if isinstance(body, dict) and set(body) == {"status"} else None
    conditions = status.get("conditions") if isinstance(status, dict) and set(status) == {"conditions"} else None
    return (
        isinstance(conditions, list)
        and len(conditions) == 1
        and isinstance(conditions[0], dict)
        and conditions[0].get("type") == CONDITION
    )


@dataclass
class Kubectl:
    """Runs kubectl (KUBECONFIG and the in-cluster account from the environment, as kubectl reads them)."""

    timeout: float = 30
    env: dict[str, str] | None = None

    def run(self, argv: list[str]) -> str:
        if not allowed(argv):
            raise KubectlError(f"not on nightowl's kubectl allow-list: {' '.join(argv[:4])}")
        result = subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout, env=self.env)
        if result.returncode:
            raise KubectlError(f"{' '.join(argv[:3])}: {result.stderr.strip() or f'exit {result.returncode}'}")
        return result.stdout

    def nodes(self) -> dict[str, dict[str, Any] | None]:
        """Each node's ``NightowlGPUHealthy`` condition (None where it has none)."""
        try:
            items = json.loads(self.run(GET_NODES)).get("items")
        except (ValueError, AttributeError) as exc:
            raise KubectlError(f"kubectl get nodes: not a node list ({exc})") from None
        if not isinstance(items, list):
            raise KubectlError("kubectl get nodes: not a node list")
        found: dict[str, dict[str, Any] | None] = {}
        for item in items:
            name = str((item.get("metadata") or {}).get("name") or "")
            conditions = (item.get("status") or {}).get("conditions") or []
            found[name] = next((c for c in conditions if isinstance(c, dict) and c.get("type") == CONDITION), None)
        return found

    def patch(self, node: str, condition: dict[str, Any]) -> None:
        self.run(patch_argv(node, condition))


def _stamp(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _time(text: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None


def condition_for(report: dict[str, Any] | None, check_status: int, now: datetime) -> dict[str, Any]:
    """The condition for `nightowl check --format json` and its exit status: 0 True, 1 False, else Unknown."""
    status = {0: "True", 1: "False"}.get(check_status, "Unknown")
    hosts = (report or {}).get("hosts") or [{}]
    host = hosts[0] if isinstance(hosts[0], dict) else {}
    verdict = host.get("verdict") or {}
    bundle = str((report or {}).get("run_id") or (report or {}).get("bundle") or "-").rsplit("/", 1)[-1]
    if verdict and status != "Unknown":
        reason, text = str(verdict.get("id")), str(verdict.get("summary") or verdict.get("id"))
    else:
        status, reason = "Unknown", "cannot-judge"
        text = f"no verdict (exit {check_status}): {host.get('error') or 'see the bundle'}"
    return {
        "type": CONDITION,
        "status": status,
        "reason": reason,
        "message": fit(f"{text} [bundle {bundle}]", MESSAGE_LIMIT),
        "lastHeartbeatTime": _stamp(now),
        "lastTransitionTime": _stamp(now),
    }


def as_states(conditions: dict[str, dict[str, Any] | None], now: datetime) -> dict[str, NodeState]:
    """The breaker's view: a node whose condition nightowl turned False counts as one of its drains."""
    states = {}
    for node, condition in conditions.items():
        unhealthy = bool(condition) and condition.get("status") == "False"  # type: ignore[union-attr]
        since = (_time(condition.get("lastTransitionTime")) if condition else None) or now  # unknown age: inside
        reason = f"{PREFIX} {condition.get('reason')}" if unhealthy and condition else "none"
        states[node] = NodeState(node, "drained" if unhealthy else "idle", reason, since)
    return states


class KubeClient(Protocol):
    def nodes(self) -> dict[str, dict[str, Any] | None]: ...
    def patch(self, node: str, condition: dict[str, Any]) -> None: ...


@dataclass(frozen=True)
class Timing:
    """The clock a condition check reads and how long it lets a cap settle (tests hand in their own)."""

    now: Callable[[], datetime] = lambda: datetime.now(timezone.utc)
    settle: float = field(default_factory=lambda: SETTLE_S)  # seconds slept before confirming
    sleep: Callable[[float], None] = time.sleep
    late: float = field(default_factory=lambda: LATE_S)  # seconds of ``now``'s clock a patch may take after its stamp


def set_condition(
    kubectl: KubeClient,
    node: str,
    report: dict[str, Any] | None,
    check_status: int,
    caps: Caps,
    log: Path,
    *,
    dry_run: bool = False,
    planned: tuple[str, ...] = (),
    note: str | None = None,
    lock: Path | None = None,
    timing: Timing | None = None,
    node_cap: node_caps.NodeCap | None = None,
) -> dict[str, Any]:
    """Set ``node``'s condition from a check report unless the breaker or the node's cap holds it; returns the
    action as logged (``result``: set, set-unconfirmed, held, unchanged, would-set, would-hold), with ``node_cap``
    (the count) where the cap decided. ``note``: said in every line logged (e.g. a report applied to another node
    than its own)."""
    counted: dict[str, Any] = {}
    done = _set(kubectl, node, report, check_status, caps, log, dry_run, planned, note, lock, timing, node_cap, counted)
    return {**done, "node_cap": counted["node_cap"]} if "node_cap" in counted else done


def _set(
    kubectl: KubeClient,
    node: str,
    report: dict[str, Any] | None,
    check_status: int,
    caps: Caps,
    log: Path,
    dry_run: bool,
    planned: tuple[str, ...],
    note: str | None,
    lock: Path | None,
    timing: Timing | None,
    node_cap: node_caps.NodeCap | None,
    counted: dict[str, Any],
) -> dict[str, Any]:
    """set_condition's work; ``counted`` gets ``node_cap`` where the node's cap decided."""
    from nightowl.fleet.slurm_actions import bundle_sha256, locked

    timing = timing or Timing()
    moment = timing.now()
    wanted = condition_for(report, check_status, moment)
    bundle = (report or {}).get("bundle")
    entry = {"node": node, "what": "condition", "bundle": bundle, "bundle_sha256": bundle_sha256(_path(bundle))}
    with locked(lock):
        for _ in range(drain_record.TRIES):  # with --lock: until this decision is the record's next version
            conditions = kubectl.nodes()
            if node not in conditions:
                raise KubectlError(f"kubectl get nodes does not list node {node!r}")
            current = conditions[node] or {}
            held = _node_cap(log, node, wanted, current, node_cap, counted)
            if held is not None:
                return _held_by_cap(log, {**entry, "why": held}, dry_run)
            said = f"{CONDITION}={wanted['status']} ({wanted['reason']})"
            if all(current.get(k) == wanted[k] for k in ("status", "reason", "message")):
                return {**entry, "why": said, "result": "unchanged"}
            turning = wanted["status"] == "False" and current.get("status") != "False"
            said += "; turned False" if turning else ""  # what a node's cap counts (nightowl/fleet/node_caps.py)
            said += f"; {counted['words']}" if counted.get("words") else ""
            said += f"; {note}" if note else ""
            shared = None
            if turning:
                states = as_states(conditions, moment)
                for other in planned:
                    if other in states and not states[other].drained:
                        states[other] = NodeState(other, "drained", f"{PREFIX} planned", moment)
                if lock and not dry_run:
                    shared = drain_record.mark(lock, states, node, caps.window_s, moment)
                decision = may_drain(node, states, caps, moment)
                if not decision.allowed:
                    return _hold(kubectl, node, wanted, {**entry, "note": note}, decision.why, log, dry_run)
                said += f"; {decision.why}"
            if dry_run:
                return {**entry, "why": said, "result": "would-set"}
            if shared is None or drain_record.commit(shared, node, "condition", caps.window_s):
                break
        else:
            raise drain_record.RecordError(f"{lock}: lost the drain record {drain_record.TRIES} times in a row")
        actions_log.append(log, {**entry, "why": said, "result": "intended"})
        if current.get("status") == wanted["status"] and current.get("lastTransitionTime"):
            wanted["lastTransitionTime"] = current["lastTransitionTime"]  # no transition: keep when it began
            kubectl.patch(node, wanted)
        elif not _patch_stamped(kubectl, node, wanted, timing, retry=turning):
            why = f"its patch landed over {timing.late:g} s after its stamp, too late to rank; its own condition undone"
            return _hold(kubectl, node, wanted, {**entry, "note": note}, why, log, False)
        if turning and caps.limit(len(conditions)) is not None:
            return _confirm(kubectl, node, wanted, {**entry, "note": note}, said, caps, log, timing)
        return _outcome(log, entry, "set", said)


def _node_cap(
    log: Path,
    node: str,
    wanted: dict[str, Any],
    current: dict[str, Any],
    cap: node_caps.NodeCap | None,
    counted: dict[str, Any],
) -> str | None:
    """The node's cap: why this condition is held (a ticket's False, or a node counted over the cap, stays as it
    is), or None; a False over the cap has its message lead with the ticket's words (``wanted`` changed)."""
    if cap is None:
        return None
    ticket = node_caps.condition_ticket(current)
    family = str(wanted["reason"] if wanted["status"] == "False" else current.get("reason") or "")
    tally = node_caps.count(actions_log.read(log), node, family, cap, time.time())
    leaving = wanted["status"] != "False" and current.get("status") == "False"
    if (leaving and ticket) or (wanted["status"] == "True" and leaving and tally.count > cap.max_actions):
        counted["node_cap"] = tally.as_json(node_caps.TICKET)
        why = f"for a {node_caps.TICKET}" if ticket else f"over the cap: {node_caps.TICKET}"
        return f"{tally.words()}; {CONDITION}=False held {why}; a person sets it without --max-node-actions"
    turning = wanted["status"] == "False" and current.get("status") != "False"
    if (ticket and ticket["verdict"] == family and wanted["status"] == "False") or (
        turning and tally.count >= cap.max_actions
    ):
        count = ticket["count"] if ticket and not turning else tally.count + 1
        counted["node_cap"] = tally.as_json(node_caps.TICKET)
        counted["words"] = f"{tally.words()}; {node_caps.TICKET}: no automatic return"
        words = node_caps.ticket_words(family, count, cap)
        wanted["message"] = fit(f"{words} {wanted['message']}", MESSAGE_LIMIT)
    return None


def _held_by_cap(log: Path, entry: dict[str, Any], dry_run: bool) -> dict[str, Any]:
    """A condition the node's cap held: nothing patched, the hold logged (a dry run only says it)."""
    if dry_run:
        return {**entry, "result": "would-hold"}
    return actions_log.append(log, {**entry, "result": "held"})


def _patch_stamped(kubectl: KubeClient, node: str, wanted: dict[str, Any], timing: Timing, retry: bool) -> bool:
    """Patch with ``lastTransitionTime`` stamped just before; whether the patch landed within ``timing.late`` of
    its stamp (the breaker ranks by the stamp, so a late one is stamped again, once, when ``retry``)."""
    for _ in range(2 if retry else 1):
        stamped = timing.now()
        wanted["lastTransitionTime"] = _stamp(stamped)
        kubectl.patch(node, wanted)
        if (timing.now() - stamped).total_seconds() <= timing.late:
            return True
    return not retry


def _confirm(
    kubectl: KubeClient,
    node: str,
    wanted: dict[str, Any],
    entry: dict[str, Any],
    said: str,
    caps: Caps,
    log: Path,
    timing: Timing,
) -> dict[str, Any]:
    """After turning ``node`` False under a cap: keep it when it ranks within the cap, else undo it (Unknown,
    held); a failing read leaves it False, unconfirmed."""
    note = entry.pop("note", None)
    timing.sleep(timing.settle)
    try:
        confirmed = keeps_drain(node, as_states(kubectl.nodes(), timing.now()), caps, timing.now())
    except (KubectlError, OSError, subprocess.TimeoutExpired) as exc:
        return _outcome(log, entry, "set-unconfirmed", f"{said}; set, but the breaker could not confirm it: {exc}")
    if confirmed.allowed:
        return _outcome(log, entry, "set", said)
    why = f"{confirmed.why}; its own condition undone" + (f"; {note}" if note else "")
    return _hold(kubectl, node, wanted, entry, why, log, False)


def _hold(
    kubectl: KubeClient, node: str, wanted: dict[str, Any], entry: dict[str, Any], why: str, log: Path, dry_run: bool
) -> dict[str, Any]:
    """Withheld: the node says Unknown, held and why (never its old True), and the log says held."""
    note = entry.pop("note", None)
    said = f"{CONDITION}=False ({wanted['reason']}) held: {why}" + (f"; {note}" if note else "")
    if dry_run:
        return {**entry, "why": said, "result": "would-hold"}
    held = {
        **wanted,
        "status": "Unknown",
        "message": fit(f"held by nightowl: {why}; {wanted['message']}", MESSAGE_LIMIT),
    }
    actions_log.append(log, {**entry, "why": said, "result": "intended"})
    kubectl.patch(node, held)
    return _outcome(log, entry, "held", said)


def _outcome(log: Path, entry: dict[str, Any], result: str, why: str) -> dict[str, Any]:
    from nightowl.fleet.slurm_actions import outcome

    return outcome(log, entry, result, why)


def _path(bundle: Any) -> Path | None:
    return Path(str(bundle)) if bundle else None
