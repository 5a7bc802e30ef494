"""No verdict rests on an output nightowl could not read (docs/reference.md#unreadable).

An output with text whose parser recognised nothing it needs is ``unreadable`` (its collector's ``assess``
says so in the facts' ``coverage``); one that printed nothing, or got no answer from the host, is hollow. The
runner asks ``unread_reasons`` before it concludes: a verdict resting on either ends "cannot judge" instead.
The engine knows no collector here: only statuses, facts and the conditions the path read. (The runs are the
runner's HostRun and CollectorRun, typed loosely so this module does not import the runner that calls it.)
"""

from __future__ import annotations

from typing import Any

from nightowl.engine.output_status import is_blank


def unreadable(facts: dict[str, Any] | None) -> bool:
    """Whether the parse found nothing it needs in an output with text (the collector's ``assess``)."""
    coverage = (facts or {}).get("coverage")
    return isinstance(coverage, dict) and coverage.get("understood") is False


def unreadable_reason(kind: str, coverage: dict[str, Any]) -> str:
    """The "cannot judge" sentence for an unreadable output, quoting its first unrecognised lines."""
    first = " | ".join(str(line) for line in coverage.get("unread") or [])
    return f"cannot judge: {kind} output not in a form nightowl reads" + (f" (first lines: {first})" if first else "")


def unread_facts(facts: dict[str, Any]) -> dict[str, Any]:
    """What an unreadable output keeps: no fact a rule could read as clean or as a fault."""
    return {
        name: facts[name]
        for name in ("kind", "warnings", "coverage", "normalised", "truncated", "truncated_bytes")
        if name in facts
    }


# The status of an output with text nightowl could not read: no verdict rests on it.
_UNREAD = ("unreadable",)


def _hollow(run: Any) -> bool:
    """A collection that brought nothing back: it printed nothing, or it failed with no answer from the host
    (no exit status: not recorded, the connection failed). An exit status with nothing else, as 127 "not
    found", is the host's answer."""
    if run.facts:
        return False
    return run.status == "no_data" or (run.status == "error" and all(a.rc is None for a in run.attempts))


def _namespace_of(fact_path: str) -> str:
    """The collector namespace a fact path reads (``status.nvidia_smi`` and ``nvidia_smi.gpus``: nvidia_smi)."""
    head, _, rest = fact_path.partition(".")
    return rest.partition(".")[0] if head == "status" else head


def unread_reasons(run: Any, action: str) -> str | None:
    """No verdict rests on an output nightowl could not read: a healthy one on any collected, an ``escalate``
    on one any condition of the path read, any other on one a condition that decided the path read.
    Unread is neither healthy nor a finding about the host (docs/reference.md#unreadable)."""
    collections = run.collections.values()
    unread = {c.namespace: c for c in collections if c.status in _UNREAD}
    # An `escalate` that the last condition took because a collector failed or printed nothing asks a person
    # to look at what nightowl did not read: no finding either. (Skipped by design, e.g. invasive, is not
    # that; and "nothing printed" is no obstacle to a healthy verdict: an L40S has no Fabric section.)
    missing = {c.namespace: c for c in collections if _hollow(c)}
    if not unread and (action != "escalate" or not missing):
        return None
    read: set[str] = set()
    status_read: set[str] = set()  # statuses the condition that led to the verdict read
    for visit in run.visits:
        for cond in visit.conditions:
            if cond.get("value") or action in ("none", "escalate"):
                read.update(_namespace_of(path) for path in cond.get("reads", {}))
            if cond.get("value"):
                status_read = {_namespace_of(p) for p in cond.get("reads", {}) if p.startswith("status.")}
    resting = sorted(unread) if action == "none" else sorted(read & set(unread))
    if action == "escalate":
        resting += sorted((status_read & set(missing)) - set(resting))
        unread |= missing
    if not resting:
        return None
    return "; ".join(unread[ns].reason or f"{unread[ns].kind} unreadable" for ns in resting)


def text_coverage(collector: Any, text: str) -> dict[str, Any] | None:
    """The coverage of an output that shows nothing to judge but has text, when that text is in no form its
    parser reads (a journal's "-- No entries --" is a form it reads: no data, not unreadable); else None."""
    assess = getattr(collector, "assess", None)
    if assess is None or is_blank(text):
        return None
    try:
        coverage = assess(text, collector.facts(collector.parse(text))).get("coverage")
    except Exception:  # noqa: BLE001 - a parser that fails here is no finding either way: no_data stands
        return None
    if not isinstance(coverage, dict) or coverage.get("understood") is not False or coverage.get("recognised"):
        return None  # read, but nothing in it (a NaN-only scrape, no ports listed): no data, not unreadable
    return coverage


def nothing_status(collector: Any, text: str) -> tuple[str, str, dict[str, Any] | None]:
    """The status, reason and coverage of an output that shows nothing to judge: no data (no facts, so no rule
    can read it as clean), or unreadable when it holds text in no form its parser reads (``text_coverage``).
    The one reading of it for the runner's commands and the incremental reads (engine/incremental.py)."""
    coverage = text_coverage(collector, text)
    if coverage is not None:  # an HTML page, a cut fragment: unreadable
        return "unreadable", unreadable_reason(collector.kind, coverage), coverage
    shown = f" ({text.strip()[:80]})" if text.strip() else ""
    return "no_data", f"the command printed nothing to read{shown}", None
