"""The summary sections: headline, detection, impact in numbers, and the bundle's integrity."""

from __future__ import annotations

from collections import Counter
from typing import Any

from nightowl.outcome import counted
from nightowl.postmortem.bundle_reader import Bundle
from nightowl.postmortem.clocks import CLOCK_HOST_LOCAL, Moment, duration, epoch_of, stamp
from nightowl.postmortem.outputs import FAULT_KINDS, kernel_events, metric_scrapes, parsed_output
from nightowl.postmortem.sre import fault_moments, watched

# How the draft tells what started the run (the Outcome's origin, nightowl/outcome.py ORIGINS): in words, and the
# commands that start a run so.
STARTED_BY = {
    "alert": ("by an alert", "`nightowl serve` or `triage --alert`"),
    "watch": ("by a watch burst", "`nightowl watch`"),
    "schedule": ("by a schedule", "`nightowl check` or `sweep`"),
    "hand": ("by hand", "`nightowl triage` or `demo`"),
}


def headline(data: Bundle) -> str:
    hosts = data.verdicts.get("hosts", [])
    ids = sorted({(h.get("verdict") or {}).get("id") or f"no verdict ({h.get('status')})" for h in hosts})
    where = hosts[0]["host"] if len(hosts) == 1 else f"{len(hosts)} hosts"
    return f"{', '.join(ids) or 'no host'} on {where}"


def integrity(data: Bundle) -> list[str]:
    if not data.manifest.get("files"):
        return []  # still being written: the manifest lists files only once the bundle is complete
    return [f"{e.state}: {e.path}" for e in data.evidence if e.state != "ok"]


def detection(data: Bundle) -> dict[str, Any]:
    alert = data.alert or {}
    started = data.manifest.get("started")
    starts, _ = epoch_of(alert.get("starts_at"))
    received = alert.get("received_at")
    return {
        "alert": alert or None,
        "name": alert.get("name"),
        "fired": stamp(starts) if starts is not None else None,
        "received": stamp(float(received)) if received is not None else None,
        "captured": stamp(started),
        "fired_to_capture": duration(started - starts) if starts is not None and started else None,
        "summary": (alert.get("annotations") or {}).get("summary")
        or (alert.get("annotations") or {}).get("description"),
        "watched": watched(data) if data.origin == "watch" and not alert else None,
        "origin": data.origin,
        "started_by": STARTED_BY[data.origin][0],
        "started_with": STARTED_BY[data.origin][1],
    }


def impact(data: Bundle, placed: list[Moment]) -> list[str]:
    """Numbers the evidence has, for the person who writes the impact section."""
    hosts = data.verdicts.get("hosts", [])
    numbers = [
        f"{counted(len(hosts), 'host')} examined; "
        f"{sum(1 for h in hosts if (h.get('verdict') or {}).get('action') not in (None, 'none'))} need action; "
        f"{sum(1 for h in hosts if not h.get('verdict'))} without a verdict."
    ]
    gpus = sorted({str(g) for h in hosts for g in ((h.get("verdict") or {}).get("gpus") or [])})
    if gpus:
        numbers.append(f"GPU(s) named by the verdicts: {', '.join(gpus)}.")
    for entry in hosts:
        host = entry["host"]
        for other in (entry.get("verdict") or {}).get("other_gpus") or []:  # issue 45 item 7: per GPU, not per node
            xids = f": Xid {', '.join(map(str, other.get('xids') or []))}" if other.get("xids") else ""
            numbers.append(
                f"{host}: GPU {other.get('gpu')} has a fault of its own too{xids} (first action {other.get('action')})."
            )
        codes = Counter(
            f"{FAULT_KINDS[e['kind']]} {e['code']}"
            for e, _ in kernel_events(data, host)
            if e.get("kind") in ("xid", "sxid") and e.get("code") is not None
            for _ in range(int(e.get("count") or 1))
        )
        if codes:
            numbers.append(
                f"{host}: kernel log lines per code: " + ", ".join(f"{k} ×{v}" for k, v in sorted(codes.items()))
            )
        for scrape in metric_scrapes(data, host)[-1:]:
            if scrape["values"]:
                numbers.append(
                    f"{host}: at the last scrape " + ", ".join(f"{k} = {v}" for k, v in scrape["values"].items())
                )
        for command in data.host_files(host, "engine-log"):
            oom = (parsed_output(data, command["file"], "engine-log") or {}).get("oom")
            if oom:
                numbers.append(
                    f"{host}: engine out of memory in phase {oom.get('phase')}: tried "
                    f"{oom.get('tried_gib')} GiB with {oom.get('free_gib')} GiB free of {oom.get('total_gib')} GiB."
                )
    faults = [m for m in fault_moments(data, placed) if m.epoch is not None]
    started = data.manifest.get("started")
    if faults and started and faults[0].host in data.manifest.get("replayed_hosts", []):
        numbers.append(
            f"{faults[0].host}'s evidence was replayed from a recording (manifest `replayed_hosts`): the capture"
            " time is the replay's, so the gap from the first fault to it is no detection delay."
        )
    elif faults and started:
        clock_note = " (host local time read as UTC)" if faults[0].clock == CLOCK_HOST_LOCAL else ""
        numbers.append(
            "From the first fault in the logs to nightowl's capture: "
            f"{duration(started - faults[0].epoch)}{clock_note}."
        )
    return numbers
