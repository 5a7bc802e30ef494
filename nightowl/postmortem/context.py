"""Everything a template needs, assembled from the bundle alone."""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from nightowl.postmortem.before import before_incident
from nightowl.postmortem.bundle_reader import Bundle, load
from nightowl.postmortem.candidates import candidates, open_questions
from nightowl.postmortem.clocks import Moment, duration, stamp
from nightowl.postmortem.decision_paths import decision_paths
from nightowl.postmortem.job import (
    JobView,
    first_actions,
    impact_numbers,
    impact_sentence,
    job_of,
    one_candidate,
    one_path,
    summary_entries,
)
from nightowl.postmortem.sre import (
    action_items,
    fault_moments,
    lessons,
    resolution,
    time_to_detect,
    title,
    trigger,
)
from nightowl.postmortem.sre import (
    impact_sentence as host_impact_sentence,
)
from nightowl.postmortem.summary import detection, headline, impact, integrity
from nightowl.postmortem.timeline import TAGS, clock_notes, timeline


def row(moment: Moment) -> dict[str, Any]:
    """A timeline row for templates: the moment's fields, its lane, and ``cite`` (ids alone)."""
    return {**asdict(moment), "cite": moment.cite, "lane": moment.host or _lane_of(moment)}


def _lane_of(moment: Moment) -> str:
    return "nightowl" if moment.what.startswith("nightowl") else "alert"


def bundle_context(bundle: Path | Bundle) -> dict[str, Any]:
    """Everything a template needs, read from the bundle alone; a job's bundle tells the job once."""
    data = bundle if isinstance(bundle, Bundle) else load(bundle)
    placed, unplaced = timeline(data)
    context = _context(data, placed, unplaced)
    job = job_of(data)
    return context if job is None else _as_one_incident(context, data, job, placed)


def _as_one_incident(context: dict[str, Any], data: Bundle, job: JobView, placed: list[Moment]) -> dict[str, Any]:
    """A job's draft: one Summary bullet, Impact, root cause, first action and decision path for the job,
    action items only for the implicated members; the timeline keeps a lane per member."""
    found = one_candidate(job, context["candidates"])
    hosts, host_cites = summary_entries(job, found)
    # Members' logs keep different clocks (a year written, or taken from the capture): the window is measured
    # on the clock of the first fault only, never across two clocks that cannot be compared.
    moments = [m for m in fault_moments(data, placed) if m.epoch]
    faults = [m.epoch for m in moments if m.clock == moments[0].clock and m.epoch is not None]
    window = None
    if faults:
        window = f"at {stamp(faults[0])}"
        if faults[-1] - faults[0] > 0:
            window = f"from {stamp(faults[0])} to {stamp(faults[-1])} ({duration(faults[-1] - faults[0])})"
    impact_lines = [impact_numbers(job)] + context["impact"][1:]
    verdict_id = (job.verdict or {}).get("id") or "no verdict"
    return {
        **context,
        "title": f"{verdict_id} on {job.targets} (job of {len(job.members)} members)",
        "headline": f"{verdict_id} on the job of {len(job.members)} members",
        "hosts": hosts,
        "host_cites": host_cites,
        "job": job,
        "impact": impact_lines,
        "impact_sentence": impact_sentence(job, data, window),
        "resolution": {**context["resolution"], "first_actions": first_actions(job)},
        "candidates": found,
        "action_items": action_items(data, found, members=job.members),
        "lessons": {**context["lessons"], "went_well": job_lessons(job, context["lessons"]["went_well"])},
        "paths": one_path(context["paths"], job),
    }


def job_lessons(job: JobView, went_well: list[str]) -> list[str]:
    first = (
        f"The runbook reached one verdict for the job of {len(job.members)} members from captured evidence, "
        f"naming {job.targets}: was it right?"
    )
    return [first if line.startswith("The runbook reached a verdict") else line for line in went_well]


def _context(data: Bundle, placed: list[Moment], unplaced: list[Moment]) -> dict[str, Any]:
    found, unbacked = candidates(data)
    detect = time_to_detect(data, placed)
    solved = resolution(data, placed)
    hosts = data.verdicts.get("hosts", [])
    return {
        "run_id": data.manifest.get("run_id") or data.verdicts.get("run_id") or data.root.name,
        "runbook": data.manifest.get("runbook") or data.verdicts.get("runbook"),
        "runbook_title": getattr(data.runbook, "title", None),
        "headline": headline(data),
        "title": title(data),
        "status": "draft",
        "hosts": hosts,
        "lanes": ["alert", "nightowl"] + [h["host"] for h in hosts],
        "started": stamp(data.manifest.get("started")),
        "finished": stamp(data.manifest.get("finished")),
        "partial": bool(data.manifest.get("partial")),
        "detection": {**detection(data), "time_to_detect": detect},
        "impact": impact(data, placed),
        "impact_sentence": host_impact_sentence(data, placed),
        "trigger": trigger(data, placed),
        "resolution": {**solved, "repairs": [row(m) for m in solved["repairs"]]},
        "action_items": action_items(data, found),
        "lessons": lessons(data, placed, detect),
        "timeline": [row(m) for m in placed],
        "unplaced": [row(m) for m in unplaced],
        "clock_notes": clock_notes(data, placed),
        "paths": decision_paths(data),
        "candidates": found,
        "host_cites": {c["host"]: c["cites"] for c in found},
        "questions": open_questions(data, placed, unplaced, unbacked),
        "evidence": [asdict(e) for e in data.evidence],
        "integrity": integrity(data),
        "before": before_incident(data),
        "tags": TAGS,
        "generated": stamp(time.time()),
        "redacted": False,
    }
