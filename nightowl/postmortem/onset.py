"""When the incident began, as the implicated evidence dates it (issue 45 item 4), with its source.

By precedence: the fault line's own time (the draft's Trigger: the earliest host-log fault the verdicts cite,
on a host that needs action), then the alert's ``startsAt``. The status update's "Since" and the draft's
Trigger read the same moment, so the two cannot disagree. A job's runbook (first-look) dates its own finding
(a replica's restart, the first failing scrape) and the status update prefers that.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from nightowl.engine.layout import MANIFEST
from nightowl.postmortem.bundle_reader import RUN_DRAFT_READ_SECONDS, Bundle, _read_json, load
from nightowl.postmortem.clocks import CLOCK_HOST_UTC, CLOCK_NIGHTOWL, Moment, epoch_of
from nightowl.postmortem.sre import fault_moments


def _minute(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(epoch))


def onset(data: Bundle, placed: list[Moment]) -> dict[str, str] | None:
    """``{text, source}`` ("2026-12-02 11:38 UTC", "the first fault line on gpu-17 (kernel-log.out line 4):
    Xid 48 on 0000:07:00 ..."), or None when neither a dated fault line nor an alert's start dates it."""
    acting = {
        h["host"]
        for h in data.verdicts.get("hosts", [])
        if (h.get("verdict") or {}).get("action") not in (None, "none")
    }
    faults = [m for m in fault_moments(data, placed) if m.epoch is not None and m.host in acting]
    if faults:
        first = faults[0]
        assert first.epoch is not None
        where = f" ({first.cites[0].name} line {first.cites[0].start})" if first.cites else ""
        zone = "" if first.clock in (CLOCK_HOST_UTC, CLOCK_NIGHTOWL) else " (the host's time, no zone: read as UTC)"
        return {
            "text": _minute(first.epoch),
            "source": f"the first fault line on {first.host}{where}: {first.what[:120]}{zone}",
        }
    alert = data.alert or {}
    starts, _ = epoch_of(alert.get("starts_at"))
    if starts is not None:
        name = alert.get("name") or "alert"
        return {"text": _minute(starts), "source": f"the alert {name} started firing then (its startsAt)"}
    return None


def _acting_moments(data: Bundle) -> list[Moment]:
    """The timeline's dated host-log moments of the hosts that need action only, sorted as the timeline sorts
    them: a sweep of 1,000 hosts with three faulty ones places three hosts' lines, not a thousand."""
    from nightowl.postmortem.log_moments import engine_moments, kernel_moments, nccl_moments, probe_moments

    hosts = [
        h["host"]
        for h in data.verdicts.get("hosts", [])
        if (h.get("verdict") or {}).get("action") not in (None, "none")
    ]
    logs = (kernel_moments, engine_moments, nccl_moments, probe_moments)  # a fault line's own time
    moments = [m for host in hosts for read in logs for m in read(data, host)]
    return sorted((m for m in moments if m.epoch is not None), key=lambda m: (m.epoch or 0.0, m.order))


def bundle_onset(bundle: Path, summary: dict[str, Any]) -> dict[str, str] | None:
    """:func:`onset` of a saved bundle, within the run's draft deadline; None when it cannot be read, and
    unread when nothing needs dating (no host needs action and no alert fired: a healthy `nightowl check`
    reads nothing again)."""
    acting = any((h.get("verdict") or {}).get("action") not in (None, "none") for h in summary.get("hosts") or [])
    try:
        if not acting and not (_read_json(Path(bundle) / MANIFEST) or {}).get("alert"):
            return None
        data = load(Path(bundle), RUN_DRAFT_READ_SECONDS, with_runbook=False)
        return onset(data, _acting_moments(data))
    except Exception:  # noqa: BLE001 - the status update then says "not known", as before
        return None
