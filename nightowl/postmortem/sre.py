"""The sections of the Google SRE postmortem template that the evidence can start for a person:
impact as a sentence, trigger, resolution, time to detect, typed action items, lessons-learned prompts.

Template: https://sre.google/sre-book/example-postmortem/ (Summary, Impact, Root Causes, Trigger,
Resolution, Detection, Action Items, Lessons Learned, Timeline, Supporting information). Each line
here states what the bundle shows and cites it; what the bundle cannot show is left as a prompt.
"""

from __future__ import annotations

import re
from typing import Any

from nightowl.knowledge import actions
from nightowl.outcome import counted, most_severe
from nightowl.postmortem.bundle_reader import Bundle
from nightowl.postmortem.candidates import candidates
from nightowl.postmortem.clocks import CLOCK_NIGHTOWL, Moment, duration, epoch_of, stamp
from nightowl.postmortem.log_moments import PROBE_DIVERGED
from nightowl.postmortem.outputs import metric_scrapes


def title(data: Bundle) -> str:
    """The draft's title: the verdict the run's Outcome names, on its host: as the bundle's outcome.json says;
    for a bundle without one (or the run's own draft, rendered before it), chosen as the Outcome chooses it
    (nightowl/outcome.py: the most severe, the first of equals)."""
    hosts = data.verdicts.get("hosts", [])
    others = f" and {counted(len(hosts) - 1, 'other host')}" if len(hosts) > 1 else ""
    if data.outcome is not None:
        verdict, host = data.outcome.get("verdict"), data.outcome.get("host")
        if not isinstance(verdict, dict) or not verdict.get("id"):
            return f"no verdict on {counted(len(hosts), 'host')}"
        return f"{verdict.get('id')} on {host if isinstance(host, str) else '?'}{others}"
    named = most_severe(h["verdict"] for h in hosts if h.get("verdict"))
    worst = next((h for h in hosts if named is not None and h.get("verdict") is named), None)
    if worst is None:
        return f"no verdict on {counted(len(hosts), 'host')}"
    return f"{worst['verdict'].get('id')} on {worst['host']}{others}"


def fault_moments(data: Bundle, placed: list[Moment]) -> list[Moment]:
    """The host-log key moments the verdicts' own evidence cites, in timeline order (a diverging known-answer
    probe answer only when no log line is cited). Without such a citation, every host-log key moment but a
    driver load: a boot line is context, not the fault."""
    logged = [m for m in placed if m.tag == "key moment" and m.clock != CLOCK_NIGHTOWL and m.host]
    evidence = [(c.path, c.start, c.end) for found in candidates(data)[0] for c in found["cites"]]
    cited = [
        m
        for m in logged
        if any(c.path == path and c.start <= end and start <= c.end for c in m.cites for path, start, end in evidence)
    ]
    # A diverging probe answer is the fault when nothing else shows it; a cited log fault (an Xid) is the cause
    # the answer only reveals, and the two are on clocks that cannot be compared (the answer's, the log's).
    in_logs = [m for m in cited if not m.what.startswith(PROBE_DIVERGED)]
    return in_logs or cited or [m for m in logged if not m.what.startswith("NVIDIA driver ")]


def first_fault(data: Bundle, placed: list[Moment]) -> Moment | None:
    return next(iter(fault_moments(data, placed)), None)


def impact_sentence(data: Bundle, placed: list[Moment]) -> str:
    """One sentence from what the evidence shows; who and how badly beyond it is for a person."""
    hosts = data.verdicts.get("hosts", [])
    acting = [h for h in hosts if (h.get("verdict") or {}).get("action") not in (None, "none")]
    gpus = sorted({str(g) for h in acting for g in (h["verdict"].get("gpus") or [])})
    serving = [
        h["host"] for h in hosts if data.host_files(h["host"], "metrics") or data.host_files(h["host"], "engine-log")
    ]
    parts = []
    if acting:
        what = f"GPU(s) {', '.join(gpus)} on " if gpus else ""
        parts.append(
            f"{what}{len(acting)} of {counted(len(hosts), 'host')} ({', '.join(h['host'] for h in acting)}) need action"
        )
    else:
        parts.append(f"none of {counted(len(hosts), 'host')} needs action by the evidence")
    if serving:
        parts.append(f"{len(serving)} serving replica(s) ({', '.join(serving)}) were examined")
    faults = [m.epoch for m in fault_moments(data, placed) if m.epoch]
    if faults:
        window = f"at {stamp(faults[0])}"
        if faults[-1] - faults[0] > 0:
            window = f"from {stamp(faults[0])} to {stamp(faults[-1])} ({duration(faults[-1] - faults[0])})"
        parts.append(f"the evidence shows faults {window}")
    parts += off_the_bus(data, placed)
    for host in serving:
        scrapes = metric_scrapes(data, host)
        if scrapes and scrapes[-1]["values"]:
            values = scrapes[-1]["values"]
            shown = ", ".join(f"{k.replace('_', ' ')} {v:g}" for k, v in values.items() if isinstance(v, (int, float)))
            parts.append(f"at the last scrape {host} had {shown}")
    return "; ".join(parts) + "."


_OFF_BUS = re.compile(r"^(?:Xid 79|GPU fell off the bus) on ([0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2})\b")


def off_the_bus(data: Bundle, placed: list[Moment]) -> list[str]:
    """How long each GPU that fell off the bus had been gone when nightowl looked (issue 45 item 9): from its
    first Xid 79 / "fallen off the bus" line to the capture, on the host's clock read as UTC. A replayed host's
    capture time is the replay's, so there the span is said to be unknown rather than given."""
    started = data.manifest.get("started")
    replayed = set(data.manifest.get("replayed_hosts") or [])
    first: dict[tuple[str, str], Moment] = {}
    for m in placed:
        found = _OFF_BUS.match(m.what) if m.host and m.epoch is not None else None
        if found and m.tag == "key moment":
            first.setdefault((m.host or "", found.group(1)), m)
    told = []
    for (host, gpu), m in first.items():
        assert m.epoch is not None
        since = f"GPU {gpu} on {host} off the bus since {stamp(m.epoch)}"
        if host in replayed:
            told.append(f"{since} (for how long is not known: the capture time is the replay's)")
        elif isinstance(started, (int, float)) and started >= m.epoch:
            told.append(f"{since}, {duration(started - m.epoch)} before nightowl's capture")
        else:
            told.append(f"{since} (for how long is not known: no capture time after it)")
    return told


def trigger(data: Bundle, placed: list[Moment]) -> dict[str, Any] | None:
    first = first_fault(data, placed)
    if first is None:
        return None
    return {"when": first.shown, "clock": first.clock, "host": first.host, "what": first.what, "cites": first.cites}


def resolution(data: Bundle, placed: list[Moment]) -> dict[str, Any]:
    firsts = [
        {
            "host": h["host"],
            "action": h["verdict"].get("action"),
            "id": h["verdict"].get("id"),
            "steps": actions.steps_line(h["verdict"].get("first_step")),  # by the host's tenancy
        }
        for h in data.verdicts.get("hosts", [])
        if h.get("verdict") and h["verdict"].get("action") != "none"
    ]
    alert = data.alert or {}
    ends, _ = epoch_of(alert.get("ends_at"))
    finished = data.manifest.get("finished")
    if not alert:
        alert_state = (
            "No alert is recorded, so whether the first action resolved the incident is for a person to fill in."
        )
    elif alert.get("status") == "resolved" and ends is not None:
        after = f", {duration(ends - finished)} after nightowl's capture" if finished and ends >= finished else ""
        alert_state = f"The alert `{alert.get('name')}` resolved at {stamp(ends)}{after}."
    else:
        alert_state = (
            f"The alert `{alert.get('name')}` was still {alert.get('status') or 'firing'} when the bundle was "
            "written; record when and after which action it resolved."
        )
    repairs = [m for m in placed if m.tag == "repair" and m.host]
    return {"first_actions": firsts, "alert": alert_state, "repairs": repairs}


def time_to_detect(data: Bundle, placed: list[Moment]) -> str | None:
    alert = data.alert or {}
    starts, _ = epoch_of(alert.get("starts_at"))
    first = first_fault(data, placed)
    if starts is None or first is None or first.epoch is None:
        return None
    gap = starts - first.epoch
    if gap < 0:
        return f"the alert started {duration(gap)} before the first fault the host logs show (clocks differ?)"
    return f"{duration(gap)} from the first fault in the host logs ({first.shown}) to the alert"


def action_items(data: Bundle, found: list[dict[str, Any]], members: list[str] | None = None) -> list[dict[str, Any]]:
    """Mitigate (the verdict's first action), prevent (by action), process (the incident's own gaps).
    For a job (``members``), the evidence gaps are one item, so no healthy member reads as one to act on."""
    items = []
    for c in found:
        gpus = f" (GPU {', '.join(map(str, c['gpus']))})" if c.get("gpus") else ""
        items.append({"type": "mitigate", "text": f"{c['action']} on {c['host']}{gpus}", "cites": c["verdict_cites"]})
    for entry in data.verdicts.get("hosts", []):  # a second GPU's own fault is its own item (issue 45 item 7)
        for other in (entry.get("verdict") or {}).get("other_gpus") or []:
            codes = f" (Xid {', '.join(map(str, other.get('xids') or []))})" if other.get("xids") else ""
            text = f"{entry['host']}: GPU {other.get('gpu')}{codes} has a fault of its own: {other.get('action')}"
            items.append({"type": "mitigate", "text": f"{text}; name it in any ticket for this node", "cites": []})
    # What keeps a verdict's fault from coming back, per first action: actions.csv's prevention column.
    prevent = {row.action: row.prevention for row in actions.rows() if row.prevention}
    for action in dict.fromkeys(c["action"] for c in found):
        if action in prevent:
            hosts = ", ".join(c["host"] for c in found if c["action"] == action)
            items.append({"type": "prevent", "text": f"{hosts}: {prevent[action]}", "cites": []})
    if not data.alert:
        items.append(
            {
                "type": "process",
                "text": "Route the alert that should catch this to nightowl (none was recorded).",
                "cites": [],
            }
        )
    gaps = [
        (entry["host"], kind, collector["status"])
        for entry in data.trace.get("hosts", [])
        for kind, collector in (entry.get("collectors") or {}).items()
        if collector.get("status") not in ("ok", None)
    ]
    if members is not None and gaps:
        listed = ", ".join(f"{kind} on {host} ({status})" for host, kind, status in gaps)
        items.append({"type": "process", "text": f"Evidence the job's run could not collect: {listed}.", "cites": []})
    for host, kind, status in gaps if members is None else []:
        items.append({"type": "process", "text": f"Make {kind} collectable on {host} ({status}).", "cites": []})
    items.append({"type": "process", "text": "Confirm or reject each root-cause candidate in this draft.", "cites": []})
    items.append(
        {
            "type": "process",
            "text": "Keep this bundle with the ticket; check it with `nightowl postmortem --verify`.",
            "cites": [],
        }
    )
    return [dict(item, owner="TBD") for item in items]


def lessons(data: Bundle, placed: list[Moment], detect: str | None) -> dict[str, list[str]]:
    """Prompts from the path taken, for the people who write the section."""
    hosts = data.verdicts.get("hosts", [])
    well, wrong = [], []
    judged = [h for h in hosts if h.get("verdict")]
    if judged:
        well.append(
            f"The runbook reached a verdict on {len(judged)} of {counted(len(hosts), 'host')} from captured evidence: "
            "was it right?"
        )
    alert = data.alert or {}
    if alert:
        well.append(
            f"The alert `{alert.get('name')}` fired and evidence was captured automatically: was it early enough?"
        )
    elif data.origin == "watch":
        well.append(f"{watched(data)}: was it early enough, and did the right people hear of it?")
    elif data.origin == "schedule":
        well.append("A scheduled check (`nightowl check` or `sweep`) captured the evidence: was it early enough?")
    else:
        wrong.append("No alert started this run: how was the problem noticed, and how late?")
    if detect:
        wrong.append(f"Time to detect: {detect}. Could an earlier signal have caught it?")
    for entry in hosts:
        if not entry.get("verdict"):
            wrong.append(f"{entry['host']} got no verdict ({entry.get('status')}): what stopped it?")
    failed = [
        f"{e['host']} {k}"
        for e in data.trace.get("hosts", [])
        for k, c in (e.get("collectors") or {}).items()
        if c.get("status") not in ("ok", None)
    ]
    if failed:
        wrong.append(f"Evidence that could not be collected: {', '.join(failed)}. Did its absence slow the diagnosis?")
    if data.unread:
        wrong.append(f"Evidence this draft could not read again: {'; '.join(dict.fromkeys(data.unread))}.")
    lucky = [
        "Did the fault hit a host with spare capacity, or at a quiet hour? Would it have been worse elsewhere?",
    ]
    if len({m.host for m in placed if m.tag == "key moment" and m.host}) == 1 and len(hosts) == 1:
        lucky.append("Only one host shows the fault: was it luck that it did not spread (same batch, firmware, rack)?")
    return {"went_well": well, "went_wrong": wrong, "lucky": lucky}


def watched(data: Bundle) -> str:
    """One sentence on a watch burst that started the run: which line, and how long until the capture."""
    trigger = data.trigger or {}
    started, seen = data.manifest.get("started"), trigger.get("first_seen")
    lag = ""
    if isinstance(seen, (int, float)) and not isinstance(seen, bool) and isinstance(started, (int, float)):
        lag = f" {max(0.0, started - seen):.1f} s after"
    line = str(trigger.get("first_line") or "").strip()
    said = f" (`{line[:160]}`)" if line else ""
    return f"`nightowl watch` captured evidence automatically{lag or ' on'} the first trigger line{said}"
