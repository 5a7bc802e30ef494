"""PyTorch ProcessGroupNCCL lines in a distributed job's log, read for the ``nccl-log`` collector.

Watchdog timeouts in all their generations, last enqueued / last completed NCCL work per rank,
DistBackendError with its "Last error:", flight-recorder dump announcements, and whether ranks
time out on different collectives. Formats are from PyTorch ProcessGroupNCCL.cpp (1.x to 2.6+)
and from real logs (fixtures/corpus/nccl/INDEX.md, ``torch_*`` samples); see
docs/sources.md#pytorch-nccl.

The readers take the log as ``nccl_log`` prepared it (launcher prefixes removed; the lines joined
with "\\n" for the patterns that span lines) and return what they read; the collector turns that
into its result, errors and warnings. This module imports nothing from ``nccl_log``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

# --------------------------------------------------------------------------------------------
# Pattern tables
# --------------------------------------------------------------------------------------------

# PyTorch ProcessGroupNCCL. "[Rank 3]", "[PG 1 Rank 0]", "[PG 0 (default_pg) Rank 7]",
# "[PG ID 0 PG GUID 0(default_pg) Rank 1]" (PyTorch 1.x to 2.6+ formats, corpus torch_*).
RANK_TAG = r"\[(?P<tag>[^\[\]\n]*?)\bRank (?P<rank>\d+)\]"
WATCHDOG = re.compile(  # the rank tag may be cut off a paste: the timeout stands, its rank unknown
    r"(?:" + RANK_TAG + r"\s+)?Watchdog\s+caught\s+collective\s+operation\s+timeout:\s*"
    r"WorkNCCL\((?P<work>(?:[^()]|\([^()]*\))*)\)\s+ran\s+for\s+(?P<ran>\d+)\s+milliseconds"
)
WATCHDOG_TRIGGER = re.compile(r"Watchdog\s+caught\s+collective\s+operation\s+timeout")
WORK_FIELD = re.compile(r"(?P<key>\w+(?:\(ms\))?)=(?P<value>\[[^\]]*\]|[^,]*)")
PROGRESS = re.compile(
    RANK_TAG + r"\s+(?P<body>[^\[\]]{0,400}?)last enqueued NCCL work: (?P<enq>-?\d+),?\s+"
    r"last completed NCCL work: (?P<comp>-?\d+)",
    re.IGNORECASE,
)
AT_WORK = re.compile(r"(?:at work|NCCL work): (?P<seq>-?\d+),", re.IGNORECASE)
PG_ID = re.compile(r"\bPG(?: ID)? (\d+)")
DIST_ERROR = re.compile(
    r"(?P<exc>(?:torch\.distributed\.|c10::)?DistBackendError|RuntimeError|std::runtime_error)'?"
    r"(?:\s+what\(\))?\s*:\s*(?P<msg>.+)$"
)
LAST_ERROR = re.compile(r"Last error:\s*(?P<text>.*)$")
# "terminate called after throwing an instance of 'c10::DistBackendError'" then "  what():  ..."
THROWN_TYPE = re.compile(r"instance of '(?P<exc>[\w:.]+)'\s*$")
WHAT = re.compile(r"^what\(\):\s*(?P<msg>.+)$")
# Flight-recorder dump announced by a rank (ProcessGroupNCCL.cpp, PyTorch 2.4+; corpus pr137523).
FR_DUMP = re.compile(RANK_TAG + r"\s+(?:ProcessGroupNCCL preparing to dump debug info|Received a dump signal)")

MAX_TEXT = 400  # error texts are evidence, not whole log lines of megabytes


# --------------------------------------------------------------------------------------------
# Result pieces
# --------------------------------------------------------------------------------------------


@dataclass
class WatchdogTimeout:
    rank: int | None
    seq: int | None
    op: str | None
    timeout_ms: int | None
    ran_ms: int | None
    pg: int | None = None
    numel_in: int | None = None
    numel_out: int | None = None


@dataclass
class WorkProgress:
    rank: int
    pg: int | None
    at_work: int | None
    last_enqueued: int
    last_completed: int
    timed_out: bool


@dataclass
class DistBackendError:
    rank: int | None
    exception: str
    text: str
    last_error: str | None


@dataclass
class WatchdogSighting:
    """One distinct watchdog timeout, the offset of its rank in the joined text, and its message."""

    offset: int
    timeout: WatchdogTimeout
    text: str


@dataclass
class WatchdogReading:
    sightings: list[WatchdogSighting]
    warnings: list[str]


@dataclass
class ProgressReading:
    entries: list[WorkProgress]
    last_enqueued: dict[int, int]
    last_completed: dict[int, int]


class LogLine(Protocol):
    """A log line with its launcher prefix removed (``nccl_log.Line``)."""

    text: str
    rank_hint: int | None


# --------------------------------------------------------------------------------------------
# Small helpers (the collector's NCCL side uses them too)
# --------------------------------------------------------------------------------------------


def int_or_none(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value.strip())
    except ValueError:
        return None


def clip_text(text: str) -> str:
    text = text.strip()
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 3] + "..."


# --------------------------------------------------------------------------------------------
# Readers
# --------------------------------------------------------------------------------------------


def _pg(tag: str) -> int | None:
    match = PG_ID.search(tag)
    return int(match.group(1)) if match else None


def _work_fields(work: str) -> dict[str, str]:
    return {m.group("key"): m.group("value").strip() for m in WORK_FIELD.finditer(work)}


def _already_seen(timeout: WatchdogTimeout, seen: list[WatchdogTimeout]) -> bool:
    """Same rank, collective and elapsed time; a PG tag missing on one copy does not make it new."""
    for earlier in seen:
        same = (earlier.rank, earlier.seq, earlier.op, earlier.timeout_ms, earlier.ran_ms) == (
            timeout.rank,
            timeout.seq,
            timeout.op,
            timeout.timeout_ms,
            timeout.ran_ms,
        )
        if same and (earlier.pg is None or timeout.pg is None or earlier.pg == timeout.pg):
            earlier.pg = earlier.pg if earlier.pg is not None else timeout.pg
            return True
    return False


def _whole_numbers(match: re.Match[str]) -> bool:
    """Whether the work's numeric fields read as numbers (a blank put where a word was wrapped breaks one)."""
    fields = _work_fields(match.group("work"))
    return all(fields[key].isdigit() for key in ("SeqNum", "NumelIn", "NumelOut", "Timeout(ms)") if key in fields)


def _watchdog_matches(joined: str) -> list[tuple[int, re.Match[str]]]:
    """Each watchdog message (the offset of its "Watchdog caught" words, its match), in order, read with the line
    breaks inside it taken out: a terminal may wrap the message anywhere, inside a word too ("...timeout: Work" /
    "NCCL(SeqNum=1890, ..."), and PyTorch prints it on one line, so no break in it is the message's own: a break
    is read as the blank it replaced, else as nothing."""
    found: list[tuple[int, re.Match[str]]] = []
    for trigger in WATCHDOG_TRIGGER.finditer(joined):
        line = joined.rfind("\n", 0, trigger.start())
        begin = joined.rfind("\n", 0, max(line, 0)) + 1  # the line before too: the rank tag may end it
        text = joined[begin : trigger.end() + 1200]
        for gap in (" ", ""):  # where a blank was (a wrap at a space), or inside a word
            at = trigger.start() - begin - (0 if gap else text.count("\n", 0, trigger.start() - begin))
            match = next((m for m in WATCHDOG.finditer(text.replace("\n", gap)) if m.start() <= at < m.end()), None)
            if match is not None and _whole_numbers(match):
                found.append((trigger.start(), match))
                break
    return found


def read_watchdogs(joined: str) -> WatchdogReading:
    """Distinct watchdog timeouts in order of appearance, and a warning when some are unreadable."""
    sightings: list[WatchdogSighting] = []
    seen: list[WatchdogTimeout] = []
    matched = 0
    for offset, match in _watchdog_matches(joined):
        fields = _work_fields(match.group("work"))
        timeout = WatchdogTimeout(
            rank=int_or_none(match.group("rank")),
            seq=int_or_none(fields.get("SeqNum")),
            op=fields.get("OpType") or None,
            timeout_ms=int_or_none(fields.get("Timeout(ms)")),
            ran_ms=int(match.group("ran")),
            pg=_pg(match.group("tag") or ""),
            numel_in=int_or_none(fields.get("NumelIn")),
            numel_out=int_or_none(fields.get("NumelOut")),
        )
        matched += 1
        if _already_seen(timeout, seen):  # the same timeout is printed again inside the exception text
            continue
        seen.append(timeout)
        text = " ".join(match.group(0).split())
        sightings.append(WatchdogSighting(offset, timeout, text))
    warnings: list[str] = []
    mentioned = len(WATCHDOG_TRIGGER.findall(joined))
    if mentioned > matched:
        warnings.append(f"{mentioned} watchdog timeout messages, {len(seen)} distinct ones readable (truncated lines?)")
    return WatchdogReading(sightings, warnings)


def read_progress(joined: str) -> ProgressReading:
    """Per-rank "last enqueued / last completed NCCL work" lines; the last one of a rank wins."""
    reading = ProgressReading([], {}, {})
    for match in PROGRESS.finditer(joined):
        body = match.group("body")
        at_work = AT_WORK.search(body)
        rank = int(match.group("rank"))
        entry = WorkProgress(
            rank=rank,
            pg=_pg(match.group("tag") or ""),
            at_work=int(at_work.group("seq")) if at_work else None,
            last_enqueued=int(match.group("enq")),
            last_completed=int(match.group("comp")),
            timed_out=bool(re.search(r"\bTimeout at\b", body, re.IGNORECASE)),
        )
        if entry not in reading.entries:
            reading.entries.append(entry)
        reading.last_enqueued[rank] = entry.last_enqueued
        reading.last_completed[rank] = entry.last_completed
    return reading


def _thrown(lines: Sequence[LogLine], index: int) -> tuple[str, str] | None:
    """(exception type, message) of a C++/Python exception line, or None."""
    line = lines[index].text
    match = DIST_ERROR.search(line)
    if match:
        return match.group("exc"), match.group("msg").strip()
    what = WHAT.match(line)
    thrown = THROWN_TYPE.search(lines[index - 1].text) if what and index > 0 else None
    if what and thrown:
        return thrown.group("exc"), what.group("msg").strip()
    return None


def read_fr_dump_ranks(joined: str) -> list[int]:
    """Ranks that announce a flight-recorder dump."""
    return sorted({int(m.group("rank")) for m in FR_DUMP.finditer(joined)})


def read_dist_backend_errors(lines: Sequence[LogLine]) -> list[DistBackendError]:
    """DistBackendError (or an NCCL RuntimeError) per throwing line, with its "Last error:" if shown."""
    errors: list[DistBackendError] = []
    for index, line in enumerate(lines):
        thrown = _thrown(lines, index)
        if thrown is None:
            continue
        exception, message = thrown
        if "DistBackendError" not in exception and not message.startswith("NCCL"):
            continue
        rank = line.rank_hint
        if rank is None:
            tagged = re.search(RANK_TAG, message)
            rank = int(tagged.group("rank")) if tagged else None
        last_error = _last_error(message, lines[index + 1 : index + 5])
        text = message.split("Last error:")[0].strip()
        errors.append(DistBackendError(rank, exception, clip_text(text), last_error))
    return errors


def _last_error(message: str, following: Sequence[LogLine]) -> str | None:
    inline = LAST_ERROR.search(message)
    if inline and inline.group("text").strip():
        return clip_text(inline.group("text"))
    for position, line in enumerate(following):
        if DIST_ERROR.search(line.text):
            return None
        match = LAST_ERROR.search(line.text)
        if match:
            if match.group("text").strip():
                return clip_text(match.group("text"))
            rest = [f.text for f in following[position + 1 :] if f.text.strip()]
            return clip_text(rest[0]) if rest else None
    return None


def collective_mismatch(timeouts: Iterable[WatchdogTimeout]) -> bool | None:
    """Do ranks of one process group time out on different collectives?

    True when, within a PG, ranks share no SeqNum, or report different OpTypes for the same
    SeqNum; False when they agree; None when fewer than two ranks of a PG are visible.
    """
    groups: dict[int | None, dict[int, list[WatchdogTimeout]]] = {}
    for timeout in timeouts:
        if timeout.rank is not None:
            groups.setdefault(timeout.pg, {}).setdefault(timeout.rank, []).append(timeout)
    verdict: bool | None = None
    for by_rank in groups.values():
        if len(by_rank) < 2:
            continue
        seq_sets = [{t.seq for t in items if t.seq is not None} for items in by_rank.values()]
        if all(seq_sets):
            common = set.intersection(*seq_sets)
            if not common:
                return True
            for seq in common:
                ops = {t.op for items in by_rank.values() for t in items if t.seq == seq}
                if len(ops) > 1:
                    return True
            verdict = False
        else:
            ops = {t.op for items in by_rank.values() for t in items}
            if len(ops) > 1:
                return True
    return verdict
