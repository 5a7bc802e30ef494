"""Everything a template needs, assembled from the bundle alone."""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from nightowl.postmortem.before import before_incident
from nightowl.postmortem.bundle_reader import Bundle, load
from nightowl.postmortem.candidates import candidates, open_questions
from nightowl.postmortem.clocks import Moment, stamp
from nightowl.postmortem.decision_paths import decision_paths
from nightowl.postmortem.sre import (
    action_items,
    impact_sentence,
    lessons,
    resolution,
    time_to_detect,
    title,
    trigger,
)
from nightowl.postmortem.summary import detection, headline, impact, integrity
from nightowl.postmortem.timeline import TAGS, clock_notes, timeline


def row(moment: Moment) -> dict[str, Any]:
    """A timeline row for templates: the moment's fields, its lane, and ``cite`` (ids alone)."""
    return {**asdict(moment), "cite": moment.cite, "lane": moment.host or _lane_of(moment)}


def _lane_of(moment: Moment) -> str:
    return "nightowl" if moment.what.startswith("nightowl") else "alert"


def bundle_context(bundle: Path | Bundle) -> dict[str, Any]:
    """Everything a template needs, read from the bundle alone."""
    data = bundle if isinstance(bundle, Bundle) else load(bundle)
    placed, unplaced = timeline(data)
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
        "impact_sentence": impact_sentence(data, placed),
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
