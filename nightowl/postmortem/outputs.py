"""Raw outputs of the bundle parsed again by their collectors: kernel events, metric scrapes."""

from __future__ import annotations

import time
from typing import Any

from nightowl.engine.private_files import read_regular_text
from nightowl.postmortem.bundle_reader import Bundle

# Kernel-log event kinds that mark a fault; what they are called in the draft.
FAULT_KINDS = {
    "xid": "Xid",
    "sxid": "SXid",
    "fallen_off_bus": "GPU fell off the bus",
    "gpu_reset_required": "GPU reset required",
    "oom_kill": "kernel OOM killer",
    "pcie_aer": "PCIe AER error",
}


METRIC_FIELDS = ("requests_running", "requests_waiting", "kv_cache_usage", "preemptions_total")

# The kinds the draft reads back (``parsed_output``): a run keeps what it parsed of them while it renders it.
KINDS_READ = frozenset({"kernel-log", "metrics", "engine-log"})


def parsed_output(data: Bundle, rel: str, kind: str) -> dict[str, Any] | None:
    """A raw output parsed again by its collector, once per draft (timeline, candidates and impact all ask)."""
    if (rel, kind) not in data.parsed:
        data.parsed[(rel, kind)] = _parse(data, rel, kind)
    result: dict[str, Any] | None = data.parsed[(rel, kind)]
    return result


def _parse(data: Bundle, rel: str, kind: str) -> dict[str, Any] | None:
    """The output as the run's parser saw it (engine/readback.py: the run's own result while it renders its
    draft, else the same head and tail parsed again, with a deadline); one the draft could not read again is
    named in ``data.unread``, never taken as showing nothing. A bundle's ``parsed/`` copy is not taken whole
    here (a bundle may come from anywhere): ``_run_events`` reads what it needs of it, checked."""
    path = data.root / rel
    if not path.exists():
        return None
    from nightowl.collectors import get_collector
    from nightowl.collectors.base import to_jsonable
    from nightowl.engine.readback import ReadBackTimedOut, read_back

    try:
        left = data.read_by - time.monotonic()
        found = read_back(kind, get_collector(kind).parse, path, seconds=left, kept=data.kept, as_json=True)
        return to_jsonable(found)
    except ReadBackTimedOut as exc:
        data.unread.append(f"{rel}: {exc}; what it holds is missing from this draft")
        return None
    except Exception:  # noqa: BLE001 - a parser bug must not cost the draft
        return None


def kernel_events(data: Bundle, host: str) -> list[tuple[dict[str, Any], str]]:
    """Kernel-log events of a host, parsed again from the raw file, with the file they came from."""
    events = []
    for command in data.host_files(host, "kernel-log"):
        parsed = parsed_output(data, command["file"], "kernel-log") or {}
        events += [(event, command["file"]) for event in parsed.get("events", [])]
    return events


def metric_scrapes(data: Bundle, host: str) -> list[dict[str, Any]]:
    scrapes = []
    for command in data.host_files(host, "metrics"):
        parsed = parsed_output(data, command["file"], "metrics")
        if parsed is not None:
            values = {k: parsed.get(k) for k in METRIC_FIELDS if parsed.get(k) is not None}
            scrapes.append({"start": command.get("start"), "file": command["file"], "values": values})
    return scrapes


def lines_of(data: Bundle, rel: str) -> list[str]:
    """The file's lines, read once per draft (citations number them from 1)."""
    key = (rel, "lines")
    if key not in data.parsed:
        path = data.root / rel
        try:
            data.parsed[key] = read_regular_text(path).splitlines() if path.is_file() else []
        except OSError:
            data.parsed[key] = []
    lines: list[str] = data.parsed[key]
    return lines


# Substrings without which a line holds no kernel event the parser reads (its anchors need one of them).
_KERNEL_HINTS = ("NVRM", "Xid", "AER", "PCIe", "of memory", "Killed process", "oom")
MAX_LOCATED_LINES = 20_000  # lines parsed one by one per file; an Xid storm beyond this is counted, not placed


def located_kernel_events(data: Bundle, rel: str) -> list[dict[str, Any]]:
    """Each kernel event with the lines it stands on: ``{event, start, end, count}`` in log order.

    The collector's parse collapses repeats of one message into one event with a count (so memory
    grows with distinct events); a timeline needs each occurrence with its own time and line. So the
    file is read again line by line, each candidate line parsed alone; lines that add to the event
    before them (continuations, AER details) widen its span, and back-to-back repeats of the same
    message fold into one row with a count.
    """
    key = (rel, "kernel-lines")
    if key not in data.parsed:
        data.parsed[key] = _locate(data, rel)
    located: list[dict[str, Any]] = data.parsed[key]
    return located


def _locate(data: Bundle, rel: str) -> list[dict[str, Any]]:
    """The located events, placed until the draft's deadline for reading its outputs again runs out
    (``data.read_by``); lines past it are named in ``data.unread``, never taken as holding nothing."""
    from nightowl.engine.parse_budget import ParseBudgetExceeded, within

    rows: list[dict[str, Any]] = []
    reached = [0]  # the line being placed when the deadline struck
    try:
        within(data.read_by - time.monotonic(), lambda: _place(data, rel, rows, reached))
    except ParseBudgetExceeded:
        data.unread.append(f"{rel}: events from line {reached[0]} on are not placed in the timeline (out of time)")
    return rows


def _place(data: Bundle, rel: str, rows: list[dict[str, Any]], reached: list[int]) -> None:
    from nightowl.collectors import get_collector
    from nightowl.collectors.base import to_jsonable

    parse = get_collector("kernel-log").parse
    seen = _run_events(data, rel)
    parsed_lines = 0
    for number, line in enumerate(lines_of(data, rel), start=1):
        if not any(hint in line for hint in _KERNEL_HINTS):
            continue
        reached[0] = number
        parsed_lines += 1
        if parsed_lines > MAX_LOCATED_LINES:
            data.unread.append(
                f"{rel}: events from line {number} on are not placed in the timeline"
                f" (more than {MAX_LOCATED_LINES} kernel lines)"
            )
            return
        try:
            events = to_jsonable(parse(line)).get("events", [])
        except Exception:  # noqa: BLE001 - a parser bug costs a row, not the draft
            events = []
        if not events:
            if rows and rows[-1]["end"] == number - 1:
                rows[-1]["end"] = number  # continuation or detail of the event above
            continue
        for found in events:
            event = found if seen is None else _as_the_run_saw(found, seen)
            last = rows[-1] if rows else None
            if last is not None and last["end"] >= number - 1 and _same(last["event"], event):
                last["end"], last["count"], last["last_time"] = number, last["count"] + 1, event.get("time")
            else:
                rows.append({"event": event, "start": number, "end": number, "count": 1, "last_time": None})


def _run_events(data: Bundle, rel: str) -> list[dict[str, Any]] | None:
    """The events the run parsed from ``rel`` when the bundle stores it scrubbed (a secret inside a line
    changed the text a line-by-line parse reads), else None: there the line's own parse is the run's."""
    from nightowl.engine.readback import bundle_parsed

    if data.kept is not None and rel in data.kept.scrubbed_results():
        found = parsed_output(data, rel, "kernel-log")
    else:
        found = bundle_parsed("kernel-log", data.root / rel)  # the bundle's copy: only its plain fields are taken
    events = (found or {}).get("events") if found is not None else None
    return [e for e in events if isinstance(e, dict)] if isinstance(events, list) else None


def _as_the_run_saw(event: dict[str, Any], seen: list[dict[str, Any]]) -> dict[str, Any]:
    """A line's event with what the run read of the same event (its message, process), so the timeline and
    the catalog lines say what the verdict saw; an event the run did not see is the line's own."""
    same = [e for e in seen if all(e.get(f) == event.get(f) for f in ("kind", "code", "pci"))]
    timed = [e for e in same if event.get("time") in (e.get("time"), e.get("first_time"), e.get("last_time"))]
    if not same:
        return event
    chosen = (timed or same)[0]
    # what the run read of the line (its message, process, recovery action), not where the line is (its time
    # and count are the line's own); plain values only, never a structure from a bundle's parsed/ copy
    taken = {f: v for f, v in chosen.items() if f not in _LINE_OWN and type(v) in _PLAIN}
    return {**event, **taken}


_LINE_OWN = frozenset({"time", "count", "first_time", "last_time"})
_PLAIN = frozenset({str, int, float, bool, type(None)})


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    fields = ("kind", "code", "pci", "pid", "process", "text", "subkind")
    return all(a.get(f) == b.get(f) for f in fields)
