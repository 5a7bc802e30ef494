"""Human and machine renderings of a run's result (docs/reference.md#verdicts shape)."""

from __future__ import annotations

import json
from typing import Any

_SEVERITY_MARK = {"ok": "OK", "info": "INFO", "warning": "WARNING", "critical": "CRITICAL"}


def text_report(summary: dict[str, Any]) -> str:
    lines = [f"runbook {summary['runbook']}  run {summary['run_id']}"]
    for host in summary["hosts"]:
        verdict = host.get("verdict")
        if not verdict:
            lines.append(f"\n{host['host']}: NO VERDICT ({host['status']}) {host.get('error') or ''}".rstrip())
            lines.append(f"  path: {' -> '.join(host['path']) or '(none)'}")
            continue
        mark = _SEVERITY_MARK.get(verdict["severity"], verdict["severity"].upper())
        lines.append(f"\n{host['host']}: {mark} {verdict['id']}")
        lines.append(f"  first action: {verdict['action']}")
        lines.append(f"  why: {verdict['summary']}")
        if verdict.get("gpus"):
            lines.append(f"  gpus: {', '.join(map(str, verdict['gpus']))}")
        lines.append(f"  path: {' -> '.join(host['path'])}")
        if verdict.get("next"):
            lines.append(f"  next: {verdict['next']['command']}")
        for item in verdict.get("evidence", [])[:8]:
            value = json.dumps(item["value"], default=str)
            value = value if len(value) <= 160 else value[:157] + "..."
            source = f"  [{item['source']}]" if item.get("source") else ""
            reason = f" ({item['reason']})" if item.get("reason") else ""
            lines.append(f"  evidence: {item['fact']} = {value}{reason}{source}")
    lines.append(f"\nbundle: {summary['bundle']}")
    return "\n".join(lines)


def json_report(summary: dict[str, Any]) -> str:
    return json.dumps(summary, indent=2, default=str)
