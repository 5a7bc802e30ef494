"""`triage --follow`: run the runbook a verdict names next, on the hosts it names, into the same bundle.

Only what can run from here runs: a host reached by URL only (``--replica``) has no node, so a follow-up
is never run over one (it would be refused command by command: "needs the node"); such a step is said on
stderr with the flag that would give the node. ``local`` (a runbook that reads a replica's /metrics from
this machine, first-look's p99-regression for a replica reached by URL) opens this machine.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from nightowl.engine import layout


def next_steps(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """Distinct ``next`` of the verdicts (a job's members all carry the same one)."""
    seen: dict[str, dict[str, Any]] = {}
    for host in summary["hosts"]:
        step = (host.get("verdict") or {}).get("next")
        if step and not step.get("error") and step.get("hosts"):
            seen.setdefault(step["command"], step)
    return list(seen.values())


def needing_a_node(summary: dict[str, Any], transports: dict[str, Any]) -> list[str]:
    """One line per next step left unrun because the hosts it is for were reached by URL only."""
    from nightowl.cli.replicas import ReplicaOpener

    lines: dict[str, str] = {}
    for host in summary["hosts"]:
        verdict = host.get("verdict") or {}
        step = verdict.get("next") or {}
        if "local" in (step.get("hosts") or []):
            continue  # read from this machine (a replica's /metrics): it runs
        named = dict.fromkeys([*(step.get("hosts") or []), *(verdict.get("implicated") or [])])
        by_url = [h for h in named if isinstance(transports.get(h), ReplicaOpener)]
        if step.get("runbook") and not step.get("error") and by_url:
            lines.setdefault(
                step["runbook"],
                f"not followed: {step['runbook']} on {', '.join(by_url)}: reached by URL only (--replica), and "
                f"{step['runbook']} needs the node: give it with --host NODE (or an inventory that names the node)",
            )
    return list(lines.values())


def follow(
    summary: dict[str, Any],
    transports: dict[str, Any],
    allow_invasive: bool,
    limits: dict[str, float | None] | None,
) -> list[dict[str, Any]]:
    """Run each next step at once; its bundle goes under ``<bundle>/next/``. Returns their summaries."""
    from nightowl.cli.common import load_runbook_or_exit
    from nightowl.cli.replicas import ReplicaOpener
    from nightowl.cli.running import opener, run_or_exit

    for line in needing_a_node(summary, transports):
        click.echo(f"nightowl: {line}", err=True)
    done = []
    for step in next_steps(summary):
        chosen = {h: transports[h] for h in step["hosts"] if h in transports}
        chosen = {h: t for h, t in chosen.items() if not isinstance(t, ReplicaOpener)}
        if "local" in step["hosts"] and "local" not in transports:
            chosen["local"] = opener("local", None)
        if not chosen:
            continue
        loaded = load_runbook_or_exit(step["runbook"])
        params = {k: v for k, v in step["params"].items() if v is not None}
        out = Path(summary["bundle"]) / layout.NEXT
        done.append(run_or_exit(loaded, chosen, params, out, allow_invasive, limits).summary)
    return done
