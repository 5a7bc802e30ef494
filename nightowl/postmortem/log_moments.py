"""Timeline entries read from host logs: kernel events, engine log lines, metric scrapes."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from nightowl.postmortem.bundle import Bundle
from nightowl.postmortem.clocks import (
    CLOCK_HOST_LOCAL,
    CLOCK_HOST_NO_YEAR,
    CLOCK_HOST_UTC,
    CLOCK_NIGHTOWL,
    Moment,
    duration,
    epoch_of,
    host_time,
    stamp,
)
from nightowl.postmortem.outputs import FAULT_KINDS, METRIC_FIELDS, kernel_events, metric_scrapes

MAX_EVENTS_PER_SOURCE = 30  # timeline rows per raw file; the file itself holds the rest


_ENGINE_TIME = (  # (regex, clock): where engine logs write their time
    (re.compile(r"(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)"), CLOCK_HOST_UTC),  # TGI (tracing, UTC)
    (re.compile(r"\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)"), CLOCK_HOST_LOCAL),  # SGLang
    (re.compile(r"^(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)"), CLOCK_HOST_LOCAL),  # Python logging default
    (re.compile(r"\b(?:INFO|WARNING|ERROR|DEBUG|CRITICAL) (?P<ts>\d\d-\d\d \d\d:\d\d:\d\d)"), CLOCK_HOST_NO_YEAR),
)
_ENGINE_FAULT = re.compile(
    r"out of memory|OutOfMemoryError|\bERROR\b|CRITICAL|EngineDeadError|Engine core .*failed|Killed|exit code",
    re.IGNORECASE,
)
_ENGINE_READY = re.compile(
    r"Application startup complete|Uvicorn running|The server is fired up|Connected|Starting vLLM API server",
)


def _event_text(event: dict[str, Any]) -> str:
    kind = event.get("kind")
    label = FAULT_KINDS.get(str(kind), "NVRM")
    code = f" {event['code']}" if event.get("code") is not None else ""
    where = f" on {event['pci']}" if event.get("pci") else ""
    process = f" (process {event['process']})" if event.get("process") else ""
    count = f" ×{event['count']}" if (event.get("count") or 1) > 1 else ""
    text = " ".join(str(event.get("text") or "").split())
    return f"{label}{code}{where}{process}{count}: {text[:160]}"


def kernel_moments(data: Bundle, host: str) -> list[Moment]:
    moments: list[Moment] = []
    first_fault: float | None = None
    for index, (event, rel) in enumerate(kernel_events(data, host)[:MAX_EVENTS_PER_SOURCE]):
        epoch, clock = host_time(event.get("time"))
        fault = event.get("kind") in FAULT_KINDS or event.get("subkind") == "crash_dump"
        if fault and epoch is not None and first_fault is None:
            first_fault = epoch
        tag = "key moment"
        what = _event_text(event)
        if event.get("subkind") == "driver_load":
            after_fault = first_fault is not None and epoch is not None and epoch > first_fault
            tag = "repair" if after_fault else "key moment"
            what = f"NVIDIA driver {event.get('driver_version') or ''} loaded" + (
                " again after the fault" if after_fault else " (this boot)"
            )
        cite = data.cite(rel)
        moments.append(
            Moment(
                epoch,
                str(event.get("time") or "(no time written)"),
                clock,
                tag,
                what,
                host,
                cite.id if cite else None,
                index,
            )
        )
    return moments


def engine_moments(data: Bundle, host: str) -> list[Moment]:
    moments: list[Moment] = []
    for command in data.host_files(host, "engine-log"):
        path = data.root / command["file"]
        if not path.exists():
            continue
        cite = data.cite(command["file"])
        seen_fault = False
        messages: Counter[str] = Counter()
        for index, line in enumerate(path.read_text(errors="replace").splitlines()):
            fault, ready = bool(_ENGINE_FAULT.search(line)), bool(_ENGINE_READY.search(line))
            if not (fault or ready):
                continue
            written, clock = _engine_time(line)
            if written is None:
                continue
            message = " ".join(line.split())[:180]
            messages[message] += 1
            if messages[message] > 1 or len(moments) >= MAX_EVENTS_PER_SOURCE:
                continue
            epoch = epoch_of(written)[0] if clock != CLOCK_HOST_NO_YEAR else None
            tag = "repair" if ready and seen_fault else "key moment"
            seen_fault = seen_fault or fault
            moments.append(
                Moment(epoch, written, clock, tag, f"engine log: {message}", host, cite.id if cite else None, index)
            )
    return moments


def _engine_time(line: str) -> tuple[str | None, str]:
    for pattern, clock in _ENGINE_TIME:
        match = pattern.search(line)
        if match:
            return match.group("ts"), clock
    return None, CLOCK_HOST_NO_YEAR


def metric_moments(data: Bundle, host: str) -> list[Moment]:
    moments = []
    scrapes = metric_scrapes(data, host)
    for index, scrape in enumerate(scrapes):
        cite = data.cite(scrape["file"])
        shown = (
            ", ".join(f"{k} {v:g}" if isinstance(v, (int, float)) else f"{k} {v}" for k, v in scrape["values"].items())
            or "no serving metric found"
        )
        moments.append(
            Moment(
                scrape["start"],
                stamp(scrape["start"]),
                CLOCK_NIGHTOWL,
                "diagnosis",
                f"metrics scrape: {shown}",
                host,
                cite.id if cite else None,
                index,
            )
        )
    for first, last in zip(scrapes, scrapes[1:], strict=False):
        if first["start"] is None or last["start"] is None:
            continue
        changes = [
            f"{k} {first['values'][k]:g} → {last['values'][k]:g}"
            for k in METRIC_FIELDS
            if isinstance(first["values"].get(k), (int, float)) and isinstance(last["values"].get(k), (int, float))
        ]
        moments.append(
            Moment(
                last["start"],
                stamp(last["start"]),
                CLOCK_NIGHTOWL,
                "diagnosis",
                f"metric window of {duration(last['start'] - first['start'])}: "
                + (", ".join(changes) or "no comparable values"),
                host,
                ", ".join(c.id for f in (first, last) if (c := data.cite(f["file"]))) or None,
            )
        )
    return moments
