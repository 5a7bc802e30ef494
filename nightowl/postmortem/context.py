"""Everything a template needs, assembled from the bundle alone."""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from nightowl.postmortem.bundle import Bundle, load
from nightowl.postmortem.candidates import candidates, open_questions
from nightowl.postmortem.clocks import stamp
from nightowl.postmortem.paths import decision_paths
from nightowl.postmortem.summary import detection, headline, impact, integrity
from nightowl.postmortem.timeline import TAGS, timeline


def bundle_context(bundle: Path | Bundle) -> dict[str, Any]:
    """Everything a template needs, read from the bundle alone."""
    data = bundle if isinstance(bundle, Bundle) else load(bundle)
    placed, unplaced = timeline(data)
    found, unbacked = candidates(data)
    return {
        "run_id": data.manifest.get("run_id") or data.verdicts.get("run_id") or data.root.name,
        "runbook": data.manifest.get("runbook") or data.verdicts.get("runbook"),
        "runbook_title": getattr(data.runbook, "title", None),
        "headline": headline(data),
        "hosts": data.verdicts.get("hosts", []),
        "started": stamp(data.manifest.get("started")),
        "finished": stamp(data.manifest.get("finished")),
        "partial": bool(data.manifest.get("partial")),
        "detection": detection(data),
        "impact": impact(data, placed),
        "timeline": [asdict(m) for m in placed],
        "unplaced": [asdict(m) for m in unplaced],
        "paths": decision_paths(data),
        "candidates": found,
        "host_cites": {c["host"]: c["cites"] for c in found},
        "questions": open_questions(data, placed, unplaced, unbacked),
        "evidence": [asdict(e) for e in data.evidence],
        "integrity": integrity(data),
        "tags": TAGS,
        "generated": stamp(time.time()),
        "redacted": False,
    }
