"""The JSON documents of a run: ``verdicts.json`` (also what ``triage --format json`` prints) and
``trace.json`` (docs/reference.md#verdicts)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from nightowl.engine.layout import VERDICTS
from nightowl.engine.runner import HostRun


def host_entry(run: HostRun) -> dict[str, Any]:
    """One host of ``verdicts.json``: host, status, verdict, path, error, duration."""
    return {
        "host": run.host,
        "status": run.status,
        "verdict": run.verdict,
        "path": run.path,
        "error": run.error,
        "duration": round(run.duration, 3),
    }


def triage_summary(runbook_id: str, run_id: str, bundle: Path | None, runs: list[HostRun]) -> dict[str, Any]:
    """The JSON of ``triage --format json`` and of ``verdicts.json`` (docs/reference.md#verdicts).

    Runbook, run id, bundle folder, and one entry per host in the order the hosts were given.
    """
    summary: dict[str, Any] = {
        "runbook": runbook_id,
        "run_id": run_id,
        "bundle": str(bundle) if bundle else None,
        "hosts": [host_entry(r) for r in runs],
    }
    job = next((r.job for r in runs if r.job is not None), None)
    if job is not None:  # scope: job: one verdict, the members' roles and what differs between them
        verdict = next((r.verdict for r in runs if r.verdict), None)
        summary["job"] = {**job, "verdict": verdict}
    return summary


def trace_document(
    runbook_id: str, run_id: str, runs: list[HostRun], redact: Callable[[str], str] = str
) -> dict[str, Any]:
    """``trace.json``: per host every node visited, every condition with the values it read, every collector."""
    hosts = []
    for run in runs:
        collectors = {
            entry: {
                "status": c.status,
                "reason": c.reason,
                "file": c.file,
                "parse_error": c.parse_error,
                "attempts": [[redact(arg) for arg in a.argv] for a in c.attempts],
            }
            for entry, c in run.collections.items()
        }
        hosts.append(
            {
                "host": run.host,
                "status": run.status,
                "error": run.error,
                "started": run.started,
                "duration": run.duration,
                "path": run.path,
                "nodes": [dict(vars(v)) for v in run.visits],
                "collectors": collectors,
            }
        )
    return {"runbook": runbook_id, "run_id": run_id, "hosts": hosts}


def unreachable_in_bundle(bundle: Path) -> dict[str, str]:
    """Hosts a bundle's verdicts.json records as unreachable, with the reason.

    An unreachable host has no folder in ``hosts/`` (nothing was collected), so this is the only record
    of it. A verdicts.json that exists but cannot be read is an error (ValueError): replaying the bundle
    without its unreachable hosts could turn a run that could not judge into a healthy one."""
    path = bundle / VERDICTS
    if not path.exists():
        return {}
    import json

    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        hosts = document["hosts"]
        return {
            str(h["host"]): str(h.get("error") or "recorded as unreachable")
            for h in hosts
            if h.get("status") == "unreachable"
        }
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"cannot read {path}: {type(exc).__name__}: {exc}") from None
