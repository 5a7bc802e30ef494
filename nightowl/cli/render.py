"""Human and machine renderings of a run's result (docs/reference.md#verdicts shape).

The text is written for a person at 3 a.m.: the first action and a one-line why, with a few chosen
facts in words (never ``None``, ``null`` or a raw dict); the path and every piece of evidence come
with ``-v``. A job (``scope: job``) prints its verdict once, then one row per member.
"""

from __future__ import annotations

import re
import time
from typing import Any

_SEVERITY_MARK = {"ok": "OK", "info": "INFO", "warning": "WARNING", "critical": "CRITICAL"}
# Facts shown without -v: enough to see why, not the whole trace.
CHOSEN_FACTS = 3
_WIDTH = 160


def human(value: Any, width: int = _WIDTH, fact: str = "") -> str:
    """A fact's value in words: ``not read`` for a missing value, ``yes``/``no``, lists joined, dicts as pairs;
    a time fact's epoch seconds as a UTC time, never ``1.79617e+09`` (issue 45 item 9)."""
    text = _words(value, fact)
    return text if len(text) <= width else text[: width - 3].rstrip() + "..."


_TIME_FACT = re.compile(r"(?:^|[._])(?:\w*_)?(?:time|at|started|since)$")


def _words(value: Any, fact: str = "") -> str:
    if value is None:
        return "not read"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)) and 1e9 <= value < 1e11 and _TIME_FACT.search(fact):
        return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(value))
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        if not value:
            return "none"
        if all(isinstance(v, dict) for v in value):
            texts = [str(v.get(k)) for v in value for k in ("message", "text", "line") if v.get(k)][:2]
            count = f"{len(value)} {'entry' if len(value) == 1 else 'entries'}"
            return f"{count}: " + "; ".join(texts) if texts else count
        shown = ", ".join(_words(v) for v in value[:8])
        return shown + (f" and {len(value) - 8} more" if len(value) > 8 else "")
    if isinstance(value, dict):
        if not value:
            return "none"
        pairs = [f"{k}: {_brief(v) if isinstance(v, (dict, list)) else _words(v, str(k))}" for k, v in value.items()]
        return "; ".join(pairs[:6]) + (f" and {len(pairs) - 6} more" if len(pairs) > 6 else "")
    return str(value)


def _brief(value: Any) -> str:
    if isinstance(value, list):
        return _words(value) if all(not isinstance(v, (dict, list)) for v in value) else f"{len(value)} entries"
    return f"{len(value)} fields"


def _evidence_line(item: dict[str, Any]) -> str:
    from nightowl.engine.job import held_where  # a job's fact: whose value it is (one member's, or some only)

    host = held_where(item)
    missing = item.get("value") is None and item.get("reason")
    value = item["reason"] if missing else human(item.get("value"), fact=item["fact"])
    return f"{item['fact']}{host}: {value}"


def _declared_evidence(verdict: dict[str, Any]) -> list[dict[str, Any]]:
    """Evidence the runbook chose (not the conditions taken, which are the trace)."""
    return [e for e in verdict.get("evidence", []) if ": " not in e["fact"]]


def _verdict_lines(name: str, verdict: dict[str, Any], path: list[str], verbose: bool) -> list[str]:
    mark = _SEVERITY_MARK.get(verdict["severity"], verdict["severity"].upper())
    lines = [
        f"\n{name}: {mark} {verdict['id']}",
        f"  first action: {verdict['action']}",
        f"  why: {verdict['summary']}",
    ]
    steps = _steps_line(verdict)
    if steps:  # the action's steps for this host's tenancy (bare metal, VM, managed: docs/reference.md#tenancy)
        lines.insert(2, f"  steps: {steps}")
    if verdict.get("gpus"):
        lines.append(f"  gpus: {human(verdict['gpus'])}")
    for part, why in (verdict.get("unavailable") or {}).items():
        lines.append(f"  {part}: unavailable ({why})" if verbose else f"  {part}: unavailable")
    if verdict.get("next"):
        lines.append(f"  next: {verdict['next']['command']}")
    declared = _declared_evidence(verdict)
    chosen = declared if verbose else [e for e in declared if "host" not in e][:CHOSEN_FACTS]
    lines += [f"  fact: {_evidence_line(item)}" for item in chosen]
    if verbose:
        lines.append(f"  path: {' -> '.join(path)}")
        for item in verdict.get("evidence", []):
            if item not in declared:
                source = f"  [{item['source']}]" if item.get("source") else ""
                node = item["fact"].partition(": ")[0]
                lines.append(f"  condition held at {node} (read: {human(item.get('value'))}){source}")
        for item in declared:
            if item.get("source"):
                lines.append(
                    f"  source of {item['fact']}{' on ' + item['host'] if item.get('host') else ''}: {item['source']}"
                )
    return lines


def _steps_line(verdict: dict[str, Any]) -> str | None:
    if verdict.get("action") in (None, "none"):
        return None
    from nightowl.knowledge.actions import steps_line

    return steps_line(verdict.get("first_step"))


def _no_verdict_lines(host: dict[str, Any], verbose: bool) -> list[str]:
    lines = [f"\n{host['host']}: NO VERDICT ({host['status']}) {host.get('error') or ''}".rstrip()]
    if verbose or not host["path"]:
        lines.append(f"  path: {' -> '.join(host['path']) or '(none)'}")
    return lines


def _job_lines(summary: dict[str, Any], verbose: bool) -> list[str]:
    job = summary["job"]
    members = job["members"]
    first = summary["hosts"][0] if summary["hosts"] else {"path": []}
    verdict = job.get("verdict")
    name = f"job ({len(members)} members)"
    if verdict:
        lines = _verdict_lines(name, verdict, first["path"], verbose)
    else:
        lines = _no_verdict_lines({**first, "host": name}, verbose)
    width = max([len(m["host"]) for m in members] + [4])
    lines.append(f"\n  {'host'.ljust(width)}  role")
    for member in members:
        facts = "; ".join(f"{fact}: {human(value, 40, fact)}" for fact, value in member["facts"].items())
        lines.append(f"  {member['host'].ljust(width)}  {member['role']}" + (f"  ({facts})" if facts else ""))
    return lines


def text_report(summary: dict[str, Any], verbose: bool = False) -> str:
    """The run for a person; ``verbose`` adds the path, the conditions taken and every source."""
    from nightowl.safetext import all_one_line, printable

    summary = all_one_line(summary)  # the same shape, each string one line
    lines = [f"runbook {summary['runbook']}  run {summary['run_id']}"]
    if summary.get("job"):
        lines += _job_lines(summary, verbose)
    else:
        for host in summary["hosts"]:
            verdict = host.get("verdict")
            if verdict:
                lines += _verdict_lines(host["host"], verdict, host["path"], verbose)
            else:
                lines += _no_verdict_lines(host, verbose)
    lines.append(f"\nbundle: {summary['bundle']}" + ("" if verbose else "  (-v for the path and every fact)"))
    return printable("\n".join(lines))  # a replica's text never reaches the terminal as escape sequences


def json_report(summary: dict[str, Any]) -> str:
    """The report as JSON: indented, or compact when it covers many hosts (nightowl/engine/jsondoc.py)."""
    from nightowl.engine.jsondoc import dumps

    return dumps(summary, hosts=len(summary.get("hosts") or ()))
