"""The merged timeline: the alert, nightowl's own run, and what the host logs show, in one order."""

from __future__ import annotations

from typing import Any

from nightowl.postmortem.bundle import Bundle, command_outcome
from nightowl.postmortem.clocks import CLOCK_NIGHTOWL, Moment, epoch_of, stamp
from nightowl.postmortem.log_moments import engine_moments, kernel_moments, metric_moments

TAGS = ("detection", "diagnosis", "repair", "key moment")


def timeline(data: Bundle) -> tuple[list[Moment], list[Moment]]:
    """(placed, unplaced): placed entries sorted by time; unplaced ones in log order."""
    moments = _alert_moments(data) + _run_moments(data)
    for host in [h["host"] for h in data.verdicts.get("hosts", [])]:
        moments += kernel_moments(data, host) + engine_moments(data, host) + metric_moments(data, host)
    placed = sorted((m for m in moments if m.epoch is not None), key=lambda m: (m.epoch, m.order))
    unplaced = [m for m in moments if m.epoch is None]
    return placed, unplaced


def _alert_moments(data: Bundle) -> list[Moment]:
    alert = data.alert
    if not alert:
        return []
    source = str(alert.get("source") or "alert source")
    clock = f"{source} (UTC)"
    name = alert.get("name") or "alert"
    moments = []  # alert moments cite nothing: the alert lives in manifest.json, which has no hash of itself
    starts, _ = epoch_of(alert.get("starts_at"))
    if starts is not None:
        moments.append(
            Moment(starts, stamp(starts), clock, "detection", f"alert `{name}` started firing", None, None, -3)
        )
    if alert.get("received_at") is not None:
        moments.append(
            Moment(
                float(alert["received_at"]),
                stamp(float(alert["received_at"])),
                CLOCK_NIGHTOWL,
                "detection",
                f"nightowl received `{name}` from {source}",
                None,
                None,
                -2,
            )
        )
    ends, _ = epoch_of(alert.get("ends_at"))
    if ends is not None and alert.get("status") == "resolved":
        moments.append(Moment(ends, stamp(ends), clock, "repair", f"alert `{name}` resolved", None, None, 9))
    return moments


def _run_moments(data: Bundle) -> list[Moment]:
    manifest = data.manifest
    verdicts_cite = data.cite("verdicts.json")
    trace_cite = data.cite("trace.json")
    moments = []
    if manifest.get("started") is not None:
        moments.append(
            Moment(
                manifest["started"],
                stamp(manifest["started"]),
                CLOCK_NIGHTOWL,
                "diagnosis",
                f"nightowl started runbook `{manifest.get('runbook')}`",
                None,
                None,
                -1,
            )
        )
    for index, command in enumerate(manifest.get("commands", [])):
        result = command_outcome(command)
        cite = data.cite(command.get("file"))
        moments.append(
            Moment(
                command.get("start"),
                stamp(command.get("start")),
                CLOCK_NIGHTOWL,
                "diagnosis",
                f"ran `{' '.join(command.get('argv') or [])}` → {result}, {command.get('bytes', 0)} bytes",
                command.get("host"),
                cite.id if cite else None,
                index,
            )
        )
    for host in data.trace.get("hosts", []):
        for visit in host.get("nodes", []):
            if visit.get("kind") == "verdict":
                verdict = _verdict_of(data, host["host"]) or {}
                moments.append(
                    Moment(
                        visit.get("started"),
                        stamp(visit.get("started")),
                        CLOCK_NIGHTOWL,
                        "diagnosis",
                        f"verdict `{verdict.get('id', visit['node'])}` → first action {verdict.get('action', '?')}",
                        host["host"],
                        verdicts_cite.id if verdicts_cite else None,
                        100,
                    )
                )
            elif visit.get("kind") == "decide" and visit.get("next"):
                moments.append(
                    Moment(
                        visit.get("started"),
                        stamp(visit.get("started")),
                        CLOCK_NIGHTOWL,
                        "diagnosis",
                        f"decided at `{visit['node']}` → `{visit['next']}`",
                        host["host"],
                        trace_cite.id if trace_cite else None,
                        50,
                    )
                )
    return moments


def _verdict_of(data: Bundle, host: str) -> dict[str, Any] | None:
    for entry in data.verdicts.get("hosts", []):
        if entry.get("host") == host:
            return entry.get("verdict")
    return None
