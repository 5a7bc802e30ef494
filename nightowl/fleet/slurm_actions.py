"""Drain and resume Slurm nodes behind the circuit breaker (nightowl/fleet/breaker.py), logging each
action taken or held to ``actions.jsonl`` (nightowl/fleet/actions_log.py).

Only ``sinfo`` and ``scontrol update`` run, as argv lists. A drain is refused when the node was
drained by someone else (their reason stays), held when the breaker is open, and confirmed after
it is made: checks on other nodes may have drained in the same moment. Every check ranks the drains
the same way: by slurmctld's own reason time (``%H``, whole seconds of the controller's clock), then by
node name. A check confirms only once the controller's clock has passed the second of its own drain
(it waits ``SETTLE_S`` after scontrol returns), so every drain that ranks before it is in the state it
reads, and a drain made after that read carries a later second and ranks after it: no later check can
jump ahead of one that already confirmed. A check beyond the cap undoes its own drain and logs itself
held. Each action logs its intent before acting and its outcome after (nightowl/fleet/actions_log.py).
A resume touches only a drain whose reason is exactly what nightowl wrote. With a node's cap
(nightowl/fleet/node_caps.py), a drain over it is drained for a hardware ticket, and a resume of a node over it
is held.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from nightowl.engine import layout
from nightowl.fleet import actions_log, drain_record, node_caps
from nightowl.fleet.breaker import (
    OWN_REASON,
    PREFIX,
    REASONS_ARGV,
    SINFO_ARGV,
    Caps,
    NodeState,
    keeps_drain,
    may_drain,
    parse_reasons,
    parse_sinfo,
)

# How long a check waits after its drain before confirming it: slurmctld stamps reasons in whole seconds of
# its own clock, so one second after scontrol returns, the controller has left the second of the drain.
SETTLE_S = 1.1
# Results that left the node changed but the breaker unconfirmed; exit 5, like a failure (fleet/scheduler_actions.py).
UNCONFIRMED = "drained-unconfirmed"
# Drain lines whose reason (the why up to its first ';') is nightowl's own drain of the node now.
OURS = frozenset({"drained", UNCONFIRMED, "relabelled"})


class SlurmError(RuntimeError):
    """sinfo or scontrol failed; the message holds its stderr."""


class SlurmClient(Protocol):
    def nodes(self) -> dict[str, NodeState]: ...
    def drain(self, node: str, reason: str) -> None: ...
    def resume(self, node: str) -> None: ...


@dataclass
class Slurm:
    """Runs Slurm's client commands (SLURM_CONF from the environment, as they read it)."""

    env: dict[str, str] | None = None
    timeout: float = 30

    def run(self, argv: list[str]) -> str:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout, env=self.env)
        if result.returncode:
            raise SlurmError(f"{' '.join(argv[:2])}: {result.stderr.strip() or f'exit {result.returncode}'}")
        return result.stdout

    def nodes(self) -> dict[str, NodeState]:
        return parse_sinfo(self.run(SINFO_ARGV))

    def reasons(self) -> list[dict[str, Any]]:
        """Every reason Slurm holds (``sinfo -R``): nightowl's drains and everyone else's, as facts."""
        return parse_reasons(self.run(REASONS_ARGV))

    def drain(self, node: str, reason: str) -> None:
        self.run(["scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}"])

    def resume(self, node: str) -> None:
        # UNDRAIN, not RESUME: it clears the drain nightowl set and leaves the base state (a node that went
        # DOWN meanwhile stays DOWN); RESUME would also bring a DOWN node back, which is not ours to undo.
        self.run(["scontrol", "update", f"NodeName={node}", "State=UNDRAIN"])


def drain_reason(verdict: str, action: str) -> str:
    return f"{PREFIX} {verdict} ({action})"


def bundle_sha256(bundle: Path | None) -> str | None:
    """The bundle's identity: the sha256 of its manifest.json (every command and output's own sha256)."""
    manifest = bundle / layout.MANIFEST if bundle else None
    if manifest is None or not manifest.is_file():
        return None
    from nightowl.engine.private_files import sha256_file

    return sha256_file(manifest)


@contextmanager
def locked(lock: Path | None) -> Iterator[None]:
    """One decision at a time among the checks sharing ``lock`` (e.g. on a shared file system)."""
    if lock is None:
        yield
        return
    fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def drain(
    slurm: SlurmClient,
    node: str,
    verdict: str,
    action: str,
    caps: Caps,
    log: Path,
    *,
    bundle: Path | None = None,
    dry_run: bool = False,
    lock: Path | None = None,
    planned: tuple[str, ...] = (),
    note: str | None = None,
    node_cap: node_caps.NodeCap | None = None,
    now: Any = datetime.now,  # sinfo shows reason times in local time, without a zone
    settle: float | None = None,  # SETTLE_S
    sleep: Any = time.sleep,
) -> dict[str, Any]:
    """Drain ``node`` for ``verdict`` unless the breaker holds it; returns the action as logged
    (``result``: drained, drained-unconfirmed, held, unchanged, not-ours, would-drain, would-hold).
    ``planned``: nodes a dry run would already have drained, counted as nightowl's drains of this moment.
    ``note``: said in every line logged (e.g. a report applied to another node than its own). ``node_cap``: a
    node drained for ``verdict`` as often as the cap allows in its window is drained for a hardware ticket."""
    reason, over = _capped(log, node, verdict, action, node_cap)
    entry = {"node": node, "what": "drain", "why": reason, "bundle": str(bundle) if bundle else None}
    entry["bundle_sha256"] = bundle_sha256(bundle)
    said = f"; {note}" if note else ""
    if over is not None:
        said += f"; {over.words()}; {node_caps.TICKET} instead of {action}: no automatic resume"
    with locked(lock):
        for _ in range(drain_record.TRIES):  # with --lock: until this decision is the record's next version
            nodes = slurm.nodes()
            current = nodes.get(node)
            if current is None:
                raise SlurmError(f"sinfo does not list node {node!r}")
            same_fault = over is not None and node_caps.family_of(current.reason) == verdict
            if current.drained and (current.reason == reason or same_fault):
                return {**entry, "result": "unchanged"}  # over the cap: this fault's drain is already in place
            if current.drained and not current.drained_by_nightowl:
                why = f"drained by someone else ({current.reason}); left as it is{said}"
                return _record(log, entry, "not-ours", why, dry_run)
            moment = now()
            for other in planned:
                if other in nodes and not nodes[other].drained:
                    nodes[other] = NodeState(other, "drained", reason, moment)
            shared = drain_record.mark(lock, nodes, node, caps.window_s, moment) if lock and not dry_run else None
            decision = may_drain(node, nodes, caps, moment)
            if not decision.allowed:
                return _record(log, entry, "held", decision.why + said, dry_run)
            if dry_run:
                return {**entry, "result": "would-drain", "why": f"{reason}; {decision.why}{said}"}
            if shared is None or drain_record.commit(shared, node, "drain", caps.window_s):
                break
        else:
            raise drain_record.RecordError(f"{lock}: lost the drain record {drain_record.TRIES} times in a row")
        actions_log.append(log, {**entry, "why": f"{reason}; {decision.why}{said}", "result": "intended"})
        slurm.drain(node, reason)
        if caps.limit(len(nodes)) is None:
            done = outcome(log, entry, "drained", f"{reason}; {decision.why}{said}")
            return {**done, "node_cap": over.as_json(node_caps.TICKET)} if over else done
        wait = SETTLE_S if settle is None else settle
        done = _confirm(slurm, node, reason, caps, log, entry, f"{decision.why}{said}", now, wait, sleep)
        return {**done, "node_cap": over.as_json(node_caps.TICKET)} if over else done


def _capped(
    log: Path, node: str, verdict: str, action: str, cap: node_caps.NodeCap | None
) -> tuple[str, node_caps.Count | None]:
    """The drain reason, and the count when the node's cap sends this drain to a hardware ticket (else None)."""
    if cap is None:
        return drain_reason(verdict, action), None
    tally = node_caps.count(actions_log.read(log), node, verdict, cap, time.time())
    if tally.count < cap.max_actions:
        return drain_reason(verdict, action), None
    return node_caps.ticket_reason(verdict, tally.count + 1, cap), tally


def _confirm(
    slurm: SlurmClient,
    node: str,
    reason: str,
    caps: Caps,
    log: Path,
    entry: dict[str, Any],
    why: str,
    now: Any,
    settle: float,
    sleep: Any,
) -> dict[str, Any]:
    """After the drain: keep it when it ranks within the cap among every drain of its second and before
    (see the module docstring), else undo it and log it held; a failing sinfo leaves it drained, unconfirmed."""
    sleep(settle)
    try:
        confirmed = keeps_drain(node, slurm.nodes(), caps, now())
    except (SlurmError, OSError, subprocess.TimeoutExpired) as exc:
        return outcome(log, entry, UNCONFIRMED, f"{reason}; drained, but the breaker could not confirm it: {exc}")
    if confirmed.allowed:
        return outcome(log, entry, "drained", f"{reason}; {why}")
    try:
        slurm.resume(node)
    except (SlurmError, OSError, subprocess.TimeoutExpired) as exc:
        return outcome(log, entry, "failed", f"{confirmed.why}; drained, and undoing the drain failed: {exc}")
    return outcome(log, entry, "held", f"{confirmed.why}; its own drain undone")


def resume(
    slurm: SlurmClient,
    node: str,
    log: Path,
    *,
    dry_run: bool = False,
    lock: Path | None = None,
    node_cap: node_caps.NodeCap | None = None,
) -> dict[str, Any]:
    """Resume ``node`` when nightowl drained it: its reason is the one nightowl last logged draining it
    with, or has nightowl's exact form. Any other drain is someone else's and stays. With ``node_cap`` (an
    automatic resume), a node drained for a hardware ticket, or counted over the cap, is held."""
    entry = {"node": node, "what": "resume", "bundle": None, "bundle_sha256": None}
    with locked(lock):
        current = slurm.nodes().get(node)
        if current is None:
            raise SlurmError(f"sinfo does not list node {node!r}")
        if not current.drained:
            return {**entry, "why": "not drained", "result": "unchanged"}
        entries = actions_log.read(log)
        logged = [
            a["why"].split(";")[0]
            for a in entries
            if a.get("node") == node and a.get("what") == "drain" and a.get("result") in OURS
        ]
        ours = current.reason == logged[-1] if logged else OWN_REASON.match(current.reason) is not None
        if not ours:
            return {**entry, "why": f"drained by someone else ({current.reason}); left as it is", "result": "not-ours"}
        held = _cap_hold(entries, node, current.reason, node_cap)
        if held is not None:
            done = {**_record(log, entry, "held", held[0], dry_run), "node_cap": held[1]}
            if node_cap is not None and not dry_run and node_caps.held_for_ticket(current.reason) is None:
                _relabel(slurm, node, current.reason, held[1], node_cap, log)
            return done
        if dry_run:
            return {**entry, "why": current.reason, "result": "would-resume"}
        actions_log.append(log, {**entry, "why": current.reason, "result": "intended"})
        slurm.resume(node)
        return outcome(log, entry, "resumed", current.reason)


def _cap_hold(
    entries: list[dict[str, Any]], node: str, reason: str, cap: node_caps.NodeCap | None
) -> tuple[str, dict[str, Any]] | None:
    """Why an automatic resume is held by the node's cap (and the count), or None: the drain is one for a
    hardware ticket (its reason says so, in the scheduler's own state), or the log counts the node over it."""
    family = node_caps.family_of(reason)
    if cap is None or family is None:
        return None
    tally = node_caps.count(entries, node, family, cap, time.time())
    ticket = node_caps.held_for_ticket(reason)
    if ticket is None and tally.count <= cap.max_actions:
        return None
    said = f"drained for a {node_caps.TICKET} ({reason})" if ticket else f"over the cap: {node_caps.TICKET}"
    why = f"{tally.words()}; {said}; held: `slurm resume {node}` without --max-node-actions returns it after the repair"
    return why, tally.as_json(node_caps.TICKET)


def _relabel(
    slurm: SlurmClient, node: str, reason: str, tally: dict[str, Any], cap: node_caps.NodeCap, log: Path
) -> None:
    """A node counted over its cap (a failed verify counted) keeps its drain, its reason now the ticket's: `slurm
    reasons` says so and the health check no longer verifies it. Logged as ``relabelled`` (no new drain)."""
    ticket = node_caps.ticket_reason(tally["family"], tally["count"], cap)
    entry = {"node": node, "what": "drain", "bundle": None, "bundle_sha256": None}
    why = f"{ticket}; relabelled from {reason!r}: over the node's cap"
    actions_log.append(log, {**entry, "why": why, "result": "intended"})
    try:
        slurm.drain(node, ticket)
    except (SlurmError, OSError, subprocess.TimeoutExpired) as exc:
        outcome(log, entry, "failed", f"{why}; scontrol: {exc}")
        return
    outcome(log, entry, "relabelled", why)


def _record(log: Path, entry: dict[str, Any], result: str, why: str, dry_run: bool) -> dict[str, Any]:
    """Log an action taken or withheld; a dry run only says what it would have logged."""
    if dry_run:
        return {**entry, "why": why, "result": f"would-{'hold' if result == 'held' else result}"}
    return actions_log.append(log, {**entry, "why": why, "result": result})


def outcome(log: Path, entry: dict[str, Any], result: str, why: str) -> dict[str, Any]:
    """Log what an action did, after it was done (its intent is already logged): a log that cannot take the
    line now (a full disk) does not hide the outcome; it is returned with ``logged: false`` (exit 5)."""
    try:
        return actions_log.append(log, {**entry, "why": why, "result": result})
    except OSError as exc:
        return {**entry, "why": f"{why}; the outcome could not be logged ({exc})", "result": result, "logged": False}
