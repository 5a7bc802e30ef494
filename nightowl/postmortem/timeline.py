"""The merged timeline: the alert, nightowl's own run, and what the host logs show, in one order."""

from __future__ import annotations

from typing import Any

from nightowl.engine import layout
from nightowl.outcome import counted
from nightowl.postmortem.bundle_reader import Bundle, command_outcome
from nightowl.postmortem.citations import cite_numbers, json_lines
from nightowl.postmortem.clocks import CLOCK_HOST_UTC, CLOCK_NIGHTOWL, Moment, duration, epoch_of, stamp
from nightowl.postmortem.job import job_of
from nightowl.postmortem.log_moments import engine_moments, kernel_moments, metric_moments, nccl_moments, probe_moments

TAGS = ("detection", "diagnosis", "repair", "key moment", "context")  # context: a boot's driver load


def timeline(data: Bundle) -> tuple[list[Moment], list[Moment]]:
    """(placed, unplaced): placed entries sorted by time; unplaced ones in log order."""
    moments = _alert_moments(data) + _run_moments(data)  # lanes: alert, nightowl, then one per host
    for host in [h["host"] for h in data.verdicts.get("hosts", [])]:
        moments += kernel_moments(data, host) + engine_moments(data, host) + metric_moments(data, host)
        moments += nccl_moments(data, host) + probe_moments(data, host)
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
            Moment(starts, stamp(starts), clock, "detection", f"alert `{name}` started firing", None, [], -3)
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
                [],
                -2,
            )
        )
    ends, _ = epoch_of(alert.get("ends_at"))
    if ends is not None and alert.get("status") == "resolved":
        moments.append(Moment(ends, stamp(ends), clock, "repair", f"alert `{name}` resolved", None, [], 9))
    return moments


def _run_moments(data: Bundle) -> list[Moment]:
    """nightowl's own run, folded into one row: what it collected, what failed, what it concluded."""
    manifest = data.manifest
    if manifest.get("started") is None:
        return []
    commands = manifest.get("commands", [])
    hosts = list(dict.fromkeys(str(c.get("host")) for c in commands)) or [
        h["host"] for h in data.verdicts.get("hosts", [])
    ]
    failed = [f"{c.get('host')} {c.get('kind')}: {command_outcome(c)}" for c in commands if _failed(c)]
    what = (
        f"nightowl ran runbook `{manifest.get('runbook')}` on {counted(len(hosts), 'host')}: "
        f"{len(commands)} command(s), {len(commands) - len(failed)} ok"
        + (f", {len(failed)} failed ({'; '.join(failed[:4])}{' …' if len(failed) > 4 else ''})" if failed else "")
    )
    finished = manifest.get("finished")
    if finished is not None:
        what += f", until {stamp(finished)} ({duration(finished - manifest['started'])})"
    verdicts, cites = _verdict_words(data)
    if verdicts:
        what += "; verdicts: " + ", ".join(verdicts)
    unique = list({c.label: c for c in cites}.values())
    return [
        Moment(manifest["started"], stamp(manifest["started"]), CLOCK_NIGHTOWL, "diagnosis", what, None, unique, -1)
    ]


def _verdict_words(data: Bundle) -> tuple[list[str], list[Any]]:
    """What the run concluded, with its citations: per host, or for a job once, with the action on the members
    the runbook implicated only (a member not implicated is never written down with the job's action)."""
    job = job_of(data)
    words, cites = [], []
    if job is not None and job.verdict:
        verdict = job.verdict
        action = f"{verdict.get('action')} on {job.targets}"
        if job.not_implicated:
            action += f"; not implicated: {', '.join(job.not_implicated)}"
        words.append(f"the job of {len(job.members)} → `{verdict.get('id')}` ({action})")
        cites += cite_numbers(data, layout.VERDICTS, json_lines(data, layout.VERDICTS, "id", verdict.get("id")))
    for entry in data.verdicts.get("hosts", []):
        verdict = entry.get("verdict")
        if verdict and job is None:
            words.append(f"{entry['host']} → `{verdict.get('id')}` ({verdict.get('action')})")
            cites += cite_numbers(data, layout.VERDICTS, json_lines(data, layout.VERDICTS, "id", verdict.get("id")))
        elif not verdict:
            words.append(f"{entry['host']} → no verdict ({entry.get('status')})")
            cites += cite_numbers(data, layout.VERDICTS, json_lines(data, layout.VERDICTS, "host", entry["host"]))
    return words, cites


def _failed(command: dict[str, Any]) -> bool:
    return bool(command.get("timed_out")) or command.get("exit_code") not in (0, None) or bool(command.get("error"))


def clock_notes(data: Bundle, placed: list[Moment]) -> list[str]:
    """Which clocks the timeline mixes and what is known of the skew between them.

    nightowl cannot read a host's clock and its own at the same instant from a recording, so skew is
    stated as a bound when the evidence gives one (a host entry stamped after nightowl finished, an
    alert received before it started) and as not measured otherwise.
    """
    notes = []
    counts: dict[str, int] = {}
    for moment in placed:
        counts[moment.clock] = counts.get(moment.clock, 0) + 1
    for clock, count in counts.items():
        notes.append(f"{clock}: {count} row(s).")
    finished = data.manifest.get("finished") or data.manifest.get("started")
    for host in {m.host for m in placed if m.host and m.clock != CLOCK_NIGHTOWL}:
        host_epochs = [m.epoch for m in placed if m.host == host and m.clock != CLOCK_NIGHTOWL and m.epoch]
        if finished and host_epochs and max(host_epochs) > finished:
            notes.append(
                f"{host}: its log has an entry {duration(max(host_epochs) - finished)} after nightowl finished: "
                "the host clock (or its zone, read as UTC) is ahead of nightowl's by at least that."
            )
        else:
            notes.append(
                f"{host}: skew against nightowl's clock not measured (no entry both clocks stamped); "
                "rows from this host may be off by the host's clock error"
                + (" and its time zone." if any(m.clock != CLOCK_HOST_UTC for m in placed if m.host == host) else ".")
            )
    alert = data.alert or {}
    starts, _ = epoch_of(alert.get("starts_at"))
    if starts is not None and alert.get("received_at") is not None:
        lag = float(alert["received_at"]) - starts
        notes.append(
            f"{alert.get('source') or 'alert source'} → nightowl: the alert reached nightowl {duration(lag)} "
            + ("after" if lag >= 0 else "before")
            + " it says it started (delivery delay and clock skew together; they cannot be told apart)."
        )
    return notes
