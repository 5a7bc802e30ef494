"""``nightowl verify``: the gate before a node returns to service (docs/reference.md#verify).

The incident bundle names the node and the verdict that took it out; ``knowledge/verify_checks.csv`` names the
checks that verdict's action calls for. A fresh node-health run of the node (run the one way every runbook
runs, nightowl/run.py) gives the facts; each check here is a pure judgement of those facts against the incident:
``pass``, ``fail`` or ``cannot-judge`` with the reason. No click: the CLI (nightowl/cli/verify_cmd.py) prints.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from nightowl import knowledge
from nightowl.engine import layout

CHECKS_FILE = "verify_checks.csv"
CHECKS = ("no-new-xid", "gpus-present", "memory-clear", "fabric-complete", "health-pass")
# Kernel-log events that say a GPU faulted again (docs/reference.md#parse-output, kernel-log kinds).
FAULT_KINDS = frozenset({"xid", "sxid", "fallen_off_bus", "gpu_reset_required"})
# nvidia-smi facts that must be empty: a remap or retirement still pending, a remap that failed (NVIDIA GPU
# memory error management: a pending remap is applied at the next GPU reset).
MEMORY_PENDING = ("remap_pending_gpus", "retired_pages_pending_gpus", "remap_failure_gpus")
PASSED, FAILED, CANNOT_JUDGE = "passed", "failed", "cannot-judge"


class IncidentError(ValueError):
    """The incident bundle cannot be read, or it is not this node's (the CLI exits 2 with the message)."""


@dataclass(frozen=True)
class Incident:
    """What verify needs of the incident bundle: its identity, the node's verdict and the fault lines it held."""

    bundle: Path
    id: str
    sha256: str
    host: str
    verdict: dict[str, Any] | None
    started: float | None  # the incident run's start, seconds since the epoch (manifest `started`)
    event_keys: frozenset[str]  # history event keys (collectors/gpu/history_rows.py) of the node's logged events
    gpu_count: int  # GPUs its nvidia-smi listed (0 when none was read)

    def cite(self) -> dict[str, Any]:
        """How the verify bundle and the actions log name it."""
        verdict = self.verdict or {}
        return {"id": self.id, "sha256": self.sha256, "verdict": verdict.get("id"), "action": verdict.get("action")}


def read_incident(bundle: Path, node: str) -> Incident:
    """The incident bundle's entry for ``node``; IncidentError when unreadable, when a file no longer matches its
    manifest (``postmortem --verify``: the sha256 cited would vouch for what the run never saw), or when no host
    in it is ``node``."""
    from nightowl.engine.bundle_verify import verify_bundle
    from nightowl.history.extract import bundle_sha256, host_rows

    problems = verify_bundle(bundle)
    if problems:
        raise IncidentError(f"{bundle}: the incident bundle does not verify ({problems[0]})")

    try:
        manifest = json.loads((bundle / layout.MANIFEST).read_text())
        verdicts = json.loads((bundle / layout.VERDICTS).read_text())
        digest = bundle_sha256(bundle)
    except (OSError, ValueError) as exc:
        raise IncidentError(f"{bundle}: not a readable bundle ({exc})") from None
    hosts = {h.get("host"): h for h in verdicts.get("hosts") or [] if isinstance(h, dict)}
    if node not in hosts:
        named = ", ".join(sorted(str(h) for h in hosts)) or "none"
        raise IncidentError(f"{bundle}: the incident bundle has no host {node!r} (it holds: {named})")
    host_dir = bundle / layout.HOSTS / layout.host_dirname(node)
    rows = host_rows(node, host_dir) if host_dir.is_dir() else {"events": [], "gpu_list": []}
    started = manifest.get("started")
    return Incident(
        bundle=bundle,
        id=str(manifest.get("run_id") or bundle.name),
        sha256=digest,
        host=node,
        verdict=hosts[node].get("verdict"),
        started=float(started) if isinstance(started, (int, float)) else None,
        event_keys=frozenset(e["key"] for e in rows["events"]),
        gpu_count=len(rows["gpu_list"]),
    )


@functools.cache
def checks_by_action() -> dict[str, tuple[str, ...]]:
    """verify_checks.csv: action -> its checks, every check known; an action without a row gets every check
    (``checks_for``), so a new action of actions.csv needs no row here to be verified safely."""
    from nightowl.knowledge import actions

    table: dict[str, tuple[str, ...]] = {}
    for line, row in enumerate(knowledge.read_csv(CHECKS_FILE, required=("action", "checks", "source")), start=2):
        names = tuple(row["checks"].split())
        unknown = [n for n in names if n not in CHECKS]
        if row["action"] not in actions.by_action() or unknown or row["action"] in table:
            raise knowledge.KnowledgeError(f"{knowledge.path(CHECKS_FILE)}: row {line}: unknown action or check")
        table[row["action"]] = names
    return table


def checks_for(verdict: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The checks the incident verdict's action calls for; every check when it had no verdict or an unknown one."""
    action = (verdict or {}).get("action")
    return checks_by_action().get(str(action), CHECKS) if verdict else CHECKS


@dataclass(frozen=True)
class Evidence:
    """The verify run's view of the node: each collector namespace's facts (None: not read) and its verdict."""

    host: str
    facts: Mapping[str, Any]
    verdict: Mapping[str, Any] | None
    expected_gpus: int | None = None
    status: Mapping[str, str] = field(default_factory=dict)  # each namespace's collector status (ok, no_data ...)


def judge(names: tuple[str, ...], evidence: Evidence, incident: Incident) -> list[dict[str, str]]:
    """Each check named: ``{check, result, why}``, result ``pass``, ``fail`` or ``cannot-judge``."""
    table: dict[str, Callable[[Evidence, Incident], tuple[str, str]]] = {
        "no-new-xid": _no_new_xid,
        "gpus-present": _gpus_present,
        "memory-clear": _memory_clear,
        "fabric-complete": _fabric_complete,
        "health-pass": _health_pass,
    }
    out = []
    for name in names:
        result, why = table[name](evidence, incident)
        out.append({"check": name, "result": result, "why": why})
    return out


def outcome(checks: list[dict[str, str]]) -> str:
    """failed when any check failed, cannot-judge when any could not be judged, else passed."""
    results = {c["result"] for c in checks}
    return FAILED if "fail" in results else CANNOT_JUDGE if "cannot-judge" in results or not checks else PASSED


def _facts(evidence: Evidence, namespace: str) -> dict[str, Any] | None:
    value = evidence.facts.get(namespace)
    return value if isinstance(value, dict) else None


def _no_new_xid(evidence: Evidence, incident: Incident) -> tuple[str, str]:
    from nightowl.collectors.gpu.history_rows import event_key

    log = _facts(evidence, "kernel_log")
    if log is None:
        return "cannot-judge", "the kernel log was not read"
    boot = (_facts(evidence, "kernel_log_boots") or {}).get("current_boot_id")
    new = [
        e
        for e in log.get("events") or []
        if e.get("kind") in FAULT_KINDS
        and event_key(evidence.host, e, boot) not in incident.event_keys
        and not _before(e, incident.started)
    ]
    if not new:
        return "pass", f"no Xid, SXid or fallen-off-bus line since incident {incident.id}"
    shown = "; ".join(f"{e.get('kind')} {e.get('code') or ''} {e.get('pci') or ''}".strip() for e in new[:5])
    return "fail", f"{len(new)} fault line(s) the incident bundle did not hold: {shown}"


def _before(event: Mapping[str, Any], started: float | None) -> bool:
    """The event is dated, in a zone, before the incident run began (an old line the incident's log did not hold)."""
    text = event.get("last_time") or event.get("time")
    if started is None or not isinstance(text, str):
        return False
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return False
    return moment.tzinfo is not None and moment.timestamp() < started


def _gpus_present(evidence: Evidence, incident: Incident) -> tuple[str, str]:
    smi = _facts(evidence, "nvidia_smi")
    if smi is None:
        return "cannot-judge", "nvidia-smi was not read"
    count = int(smi.get("gpu_count") or 0)
    if smi.get("errors"):
        return "fail", f"nvidia-smi could not read {len(smi['errors'])} GPU(s): {smi['errors'][0].get('message')}"
    if smi.get("listing_complete") is False:
        return "cannot-judge", "the nvidia-smi output ends before every GPU it announces"
    if evidence.expected_gpus is not None:
        expected, said = evidence.expected_gpus, "expected (--expected-gpus)"
    elif _count_was_the_fault(incident):
        return "cannot-judge", f"incident {incident.id} was about the GPU count: say --expected-gpus N"
    else:
        expected, said = incident.gpu_count, f"listed at incident {incident.id}"
    if count < expected:
        return "fail", f"{count} GPU(s) visible, {expected} {said}"
    sku = smi.get("sku_judgement") or {}
    if evidence.expected_gpus is None and sku.get("status") == "degraded" and not smi.get("virtualized"):
        reasons = "; ".join(sku.get("reasons") or [])
        return "fail", f"{count} GPU(s) visible: {reasons} (say --expected-gpus N if this node has fewer)"
    return "pass", f"{count} GPU(s) visible, {expected} {said}"


def _count_was_the_fault(incident: Incident) -> bool:
    """The incident verdict rests on the GPU count (gpu-count-low): its own count is no floor for the repair."""
    evidence = (incident.verdict or {}).get("evidence") or []
    return any(isinstance(e, dict) and e.get("fact") == "nvidia_smi.gpu_count" for e in evidence)


def _memory_clear(evidence: Evidence, incident: Incident) -> tuple[str, str]:
    smi = _facts(evidence, "nvidia_smi")
    if smi is None:
        return "cannot-judge", "nvidia-smi was not read"
    pending: dict[str, list[Any]] = {name: list(smi.get(name) or []) for name in MEMORY_PENDING if smi.get(name)}
    if pending:
        return "fail", "; ".join(f"{name}: {', '.join(map(str, gpus))}" for name, gpus in pending.items())
    return "pass", "no row remap or page retirement pending, no remap failure"


def _fabric_complete(evidence: Evidence, incident: Incident) -> tuple[str, str]:
    fabric = _facts(evidence, "fabric")
    if fabric is None and evidence.status.get("fabric") == "no_data":  # nvidia-smi -q has no Fabric section
        return "pass", "no GPU shows an NVLink fabric registration (no NVSwitch fabric to judge)"
    if fabric is None:
        why = evidence.status.get("fabric") or "not read"
        return "cannot-judge", f"the NVLink fabric state (nvidia-smi -q) was not read ({why})"
    if not fabric.get("gpus_with_fabric"):
        return "pass", "no GPU shows an NVLink fabric registration (no NVSwitch fabric to judge)"
    stuck = list(dict.fromkeys([*(fabric.get("degraded_gpus") or []), *(fabric.get("in_progress_gpus") or [])]))
    if stuck:
        return "fail", f"fabric registration not Completed/Success on {', '.join(map(str, stuck))}"
    return "pass", f"fabric registration Completed/Success on {len(fabric['gpus_with_fabric'])} GPU(s)"


def _health_pass(evidence: Evidence, incident: Incident) -> tuple[str, str]:
    verdict = evidence.verdict
    if not verdict:
        return "cannot-judge", "the node-health run reached no verdict"
    if verdict.get("action") not in (None, "none"):
        return "fail", f"node-health: {verdict.get('id')} -> {verdict.get('action')}"
    return "pass", f"node-health: {verdict.get('id')}"


def resume_reason(node: str, verify_id: str, verify_sha256: str, incident: Incident) -> str:
    """The words a resume carries: both bundles, each with its sha256."""
    return (
        f"nightowl verify passed on {node}: bundle {verify_id} (sha256 {verify_sha256[:16]}) after incident "
        f"{incident.id} (sha256 {incident.sha256[:16]})"
    )
