"""An Outcome (nightowl/outcome.py) made from a record as the notify tests write one, for the target tests
that need no run: a real run's Outcome comes from outcome_from_run (tests/receiver/test_outcome.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nightowl.outcome import Outcome, finding_lines


def outcome_of(record: dict[str, Any], line: str) -> Outcome:
    """``record`` (alert, host, source, fingerprint, verdict, status_update path, labels) as an Outcome."""
    update = record.get("status_update")
    text = Path(update).read_text() if update and Path(update).is_file() else ""
    verdict = record.get("verdict")
    return Outcome(
        origin="alert",
        runbook=str(record.get("runbook") or "xid"),
        host=record.get("host"),
        title=str(record.get("alert") or "alert"),
        line=line,
        run_id=record.get("run_id"),
        verdict=verdict,
        findings=tuple(finding_lines(verdict)),
        status_update=update,
        status_update_text=text,
        labels=record.get("labels") or {},
        annotations=record.get("annotations") or {},
        incident=record.get("fingerprint") if record.get("source") == "pagerduty" else None,
        source=record.get("source"),
        context=record,
    )
