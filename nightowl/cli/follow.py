"""`triage --follow`: run the runbook a verdict names next, on the hosts it names, into the same bundle."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nightowl.engine import layout


def next_steps(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """Distinct ``next`` of the verdicts (a job's members all carry the same one)."""
    seen: dict[str, dict[str, Any]] = {}
    for host in summary["hosts"]:
        step = (host.get("verdict") or {}).get("next")
        if step and not step.get("error") and step.get("hosts"):
            seen.setdefault(step["command"], step)
    return list(seen.values())


def follow(
    summary: dict[str, Any],
    transports: dict[str, Any],
    allow_invasive: bool,
    limits: dict[str, float | None] | None,
) -> list[dict[str, Any]]:
    """Run each next step at once; its bundle goes under ``<bundle>/next/``. Returns their summaries."""
    from nightowl.cli.common import load_runbook_or_exit
    from nightowl.cli.running import run_or_exit

    done = []
    for step in next_steps(summary):
        chosen = {h: transports[h] for h in step["hosts"] if h in transports}
        if not chosen:
            continue
        loaded = load_runbook_or_exit(step["runbook"])
        params = {k: v for k, v in step["params"].items() if v is not None}
        out = Path(summary["bundle"]) / layout.NEXT
        done.append(run_or_exit(loaded, chosen, params, out, allow_invasive, limits).summary)
    return done
