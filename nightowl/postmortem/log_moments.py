"""Timeline entries read from host logs: kernel events, engine log lines, metric scrapes."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from nightowl.postmortem.bundle_reader import Bundle
from nightowl.postmortem.citations import cite_file, cite_lines
from nightowl.postmortem.clocks import (
    CLOCK_HOST_LOCAL,
    CLOCK_HOST_NO_YEAR,
    CLOCK_HOST_UTC,
    CLOCK_HOST_YEARLESS,
    CLOCK_NIGHTOWL,
    Moment,
    duration,
    epoch_of,
    host_time,
    stamp,
    with_capture_year,
)
from nightowl.postmortem.outputs import FAULT_KINDS, METRIC_FIELDS, lines_of, located_kernel_events, metric_scrapes

PROBE_DIVERGED = "known-answer probe: the answer differs"  # how a diverging answer's row begins
MAX_EVENTS_PER_SOURCE = 30  # timeline rows per raw file; the file itself holds the rest


# PyTorch's c10 log prefix (glog style): "[E626 06:24:44.903881913 ProcessGroupNCCL.cpp:616]", month and
# day without a year and the month not zero-padded.
_GLOG_TIME = re.compile(r"\[[EWIF](?P<md>\d{3,4}) (?P<hms>\d\d:\d\d:\d\d)(?P<frac>\.\d+)?")

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
    """Each kernel event (a burst of one message folds into one row) at its own time and lines."""
    moments: list[Moment] = []
    captured = data.manifest.get("started")
    for command in data.host_files(host, "kernel-log"):
        rel = command["file"]
        located = located_kernel_events(data, rel)
        first_fault = min(
            (
                e
                for row in located
                if _is_fault(row["event"]) and (e := host_time(row["event"].get("time"), captured)[0]) is not None
            ),
            default=None,
        )
        lines = lines_of(data, rel)
        for index, row in enumerate(located[:MAX_EVENTS_PER_SOURCE]):
            event = dict(row["event"], count=row["count"])
            if moments and _continues(event, row, lines, moments[-1]):  # the message's next line, not an event
                previous = moments[-1]
                previous.what = f"{previous.what} {' '.join(str(event.get('text') or '').split())}"[:300]
                first_line = previous.cites[0].start if previous.cites else row["start"]
                previous.cites = [c for c in [cite_lines(data, rel, first_line, row["end"])] if c]
                continue
            epoch, clock = host_time(event.get("time"), captured)
            tag, what = "key moment", _event_text(event)
            if row["count"] > 1 and row["last_time"]:
                what += f" (last at {row['last_time']})"
            if event.get("subkind") == "driver_load":  # a boot's driver load is context, not a key moment
                after_fault = first_fault is not None and epoch is not None and epoch > first_fault
                tag = "repair" if after_fault else "context"
                what = f"NVIDIA driver {event.get('driver_version') or ''} loaded" + (
                    " again after the fault" if after_fault else " (this boot)"
                )
            cites = [c for c in [cite_lines(data, rel, row["start"], row["end"])] if c]
            moments.append(Moment(epoch, shown(event.get("time"), epoch, clock), clock, tag, what, host, cites, index))
        if len(located) > MAX_EVENTS_PER_SOURCE:
            rest = located[MAX_EVENTS_PER_SOURCE:]
            cites = [c for c in [cite_lines(data, rel, rest[0]["start"], rest[-1]["end"])] if c]
            moments.append(
                Moment(
                    None,
                    "(see file)",
                    CLOCK_HOST_NO_YEAR,
                    "key moment",
                    f"{len(rest)} more kernel events not listed here",
                    host,
                    cites,
                    MAX_EVENTS_PER_SOURCE,
                )
            )
    return moments


def _continues(event: dict[str, Any], row: dict[str, Any], lines: list[str], previous: Moment) -> bool:
    """A line the kernel printed as the rest of the message before it ("NVRM: A GPU crash dump has been
    created. If possible, please run" / "   NVRM: nvidia-bug-report.sh as root ..."): indented, no time of its
    own, on the line right after the previous event's. It is that event's text, never a moment "(no time written)"."""
    if event.get("time") or event.get("kind") not in (None, "other_nvrm") or not previous.cites:
        return False
    start = int(row["start"])
    raw = lines[start - 1] if 0 < start <= len(lines) else ""
    return raw[:1].isspace() and previous.cites[-1].end == start - 1


def shown(written: str | None, epoch: float | None, clock: str) -> str:
    """The time as the row shows it: as written, with the year nightowl supplied in front."""
    if clock == CLOCK_HOST_YEARLESS and epoch is not None:
        return f"{stamp(epoch)[:19]} (written “{written}”)"
    return str(written or "(no time written)")


def _is_fault(event: dict[str, Any]) -> bool:
    return event.get("kind") in FAULT_KINDS or event.get("subkind") == "crash_dump"


def engine_moments(data: Bundle, host: str) -> list[Moment]:
    moments: list[Moment] = []
    for command in data.host_files(host, "engine-log"):
        seen_fault = False
        messages: Counter[str] = Counter()
        for index, line in enumerate(lines_of(data, command["file"])):
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
            if clock == CLOCK_HOST_NO_YEAR:
                epoch = with_capture_year(written, data.manifest.get("started"))
                clock = CLOCK_HOST_YEARLESS if epoch is not None else clock
            else:
                epoch = epoch_of(written)[0]
            tag = "repair" if ready and seen_fault else "key moment"
            seen_fault = seen_fault or fault
            cites = [c for c in [cite_lines(data, command["file"], index + 1, index + 1)] if c]
            moments.append(
                Moment(epoch, shown(written, epoch, clock), clock, tag, f"engine log: {message}", host, cites, index)
            )
    return moments


def _engine_time(line: str) -> tuple[str | None, str]:
    for pattern, clock in _ENGINE_TIME:
        match = pattern.search(line)
        if match:
            return match.group("ts"), clock
    return None, CLOCK_HOST_NO_YEAR


def metric_moments(data: Bundle, host: str) -> list[Moment]:
    """What changed between consecutive scrapes (the scrapes themselves are part of nightowl's run)."""
    moments = []
    scrapes = metric_scrapes(data, host)
    for index, (first, last) in enumerate(zip(scrapes, scrapes[1:], strict=False)):
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
                [c for f in (first, last) if (c := cite_file(data, f["file"]))],
                index,
            )
        )
    return moments


def nccl_moments(data: Bundle, host: str) -> list[Moment]:
    """PyTorch watchdog timeouts, one row per collective (ranks folded), and the stall's start: the
    watchdog fires once the collective ran ``Timeout(ms)``, so the stall began that long before."""
    from nightowl.collectors.nccl.torch_pg import WATCHDOG, WORK_FIELD

    moments: list[Moment] = []
    captured = data.manifest.get("started")
    for command in data.host_files(host, "nccl-log"):
        groups: dict[tuple[str, str], dict[str, Any]] = {}
        for index, line in enumerate(lines_of(data, command["file"])):
            match, written = WATCHDOG.search(line), _GLOG_TIME.search(line)
            if match is None or written is None:
                continue
            epoch = with_capture_year(
                f"{written['md'][:-2].zfill(2)}-{written['md'][-2:]} {written['hms']}{(written['frac'] or '')[:7]}",
                captured,
            )
            if epoch is None:
                continue
            work = {m["key"]: m["value"].strip() for m in WORK_FIELD.finditer(match["work"])}
            ran_ms = int(match["ran"])
            key = (work.get("SeqNum", "?"), work.get("OpType", "?"))
            group = groups.setdefault(key, {"ranks": [], "first": epoch, "stall": epoch - ran_ms / 1000, "cites": []})
            group["ranks"].append(match["rank"])
            group["first"] = min(group["first"], epoch)
            group["stall"] = min(group["stall"], epoch - ran_ms / 1000)
            group["timeout"] = work.get("Timeout(ms)") or str(ran_ms)
            group["cites"] += [c for c in [cite_lines(data, command["file"], index + 1, index + 1)] if c]
        for order, ((seq, op), group) in enumerate(groups.items()):
            ranks = f"rank(s) {', '.join(sorted(set(group['ranks']), key=int))}"
            cites = group["cites"][:4]
            moments.append(
                Moment(
                    group["stall"],
                    f"{stamp(group['stall'])[:19]} (derived)",
                    CLOCK_HOST_YEARLESS,
                    "key moment",
                    f"NCCL stall began: {op} SeqNum={seq} on {ranks} started and never completed "
                    f"(derived: the watchdog's time less the time it ran, Timeout(ms)={group['timeout']})",
                    host,
                    cites,
                    order,
                )
            )
            moments.append(
                Moment(
                    group["first"],
                    f"{stamp(group['first'])[:19]}",
                    CLOCK_HOST_YEARLESS,
                    "key moment",
                    f"NCCL watchdog timeout: {op} SeqNum={seq} on {ranks} ran past Timeout(ms)={group['timeout']}",
                    host,
                    cites,
                    order,
                )
            )
    return moments


def _probe_digest(verdict: dict[str, Any], host: str) -> str | None:
    """The host's known-answer digest as the verdict cites it (a job member's own value, or the host's)."""
    for item in verdict.get("evidence") or []:
        if item.get("fact") == "known_answer.answer_digest" and item.get("host") in (host, None):
            return str(item["value"]) if item.get("value") else None
    return None


def _created(line: str) -> float | None:
    """The answer's own time: ``created``, the Unix time the server made the completion (OpenAI API, as
    vLLM answers: https://platform.openai.com/docs/api-reference/completions/object)."""
    try:
        document = json.loads(line)
    except ValueError:
        return None
    created = document.get("created") if isinstance(document, dict) else None
    return float(created) if isinstance(created, (int, float)) and not isinstance(created, bool) else None


def probe_moments(data: Bundle, host: str) -> list[Moment]:
    """The known-answer probe's answer: a key moment on a member the verdict implicates from it (the
    diverging answer of a silent-corruption verdict), at the time the replica stamped it; else context."""
    entry: dict[str, Any] = next((h for h in data.verdicts.get("hosts", []) if h.get("host") == host), {})
    verdict = entry.get("verdict") or {}
    digest = _probe_digest(verdict, host)
    implicated = verdict.get("implicated")
    diverging = (
        digest is not None
        and verdict.get("action") not in (None, "none")
        and (host in implicated if isinstance(implicated, list) else True)
    )
    moments: list[Moment] = []
    for command in data.host_files(host, "known-answer"):
        lines = lines_of(data, command["file"])
        index, epoch = next(((i, e) for i, line in enumerate(lines) if (e := _created(line)) is not None), (0, None))
        clock = CLOCK_HOST_UTC
        if epoch is None:  # no time in the answer: when nightowl asked
            epoch, clock = command.get("start"), CLOCK_NIGHTOWL
        what = (
            f"{PROBE_DIVERGED} (answer digest {digest[:12]}…, verdict `{verdict.get('id')}`)"
            if diverging and digest
            else "known-answer probe answered" + (f" (answer digest {digest[:12]}…)" if digest else "")
        )
        cites = [c for c in [cite_lines(data, command["file"], index + 1, index + 1)] if c]
        tag = "key moment" if diverging else "diagnosis"
        moments.append(Moment(epoch, stamp(epoch) if epoch else "(no time written)", clock, tag, what, host, cites))
    return moments
