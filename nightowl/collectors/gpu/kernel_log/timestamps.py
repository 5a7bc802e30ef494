"""The time in front of a kernel-log line, in every way the kernel log reaches a person.

Decision: a yearless or non-English time stays as written."""

from __future__ import annotations

import re
from datetime import datetime

# --- timestamps (decision: a yearless or non-English time stays as written) -------------------
_SYSLOG_TIME = re.compile(r"^\s*(\S+\s+\d{1,2}\s+\d{1,2}:\d\d:\d\d(?:\.\d+)?)\s")  # Mar 29 15:38:59, lis 12 ...
_ISO_TIME = re.compile(r"(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d:\d\d)(?:[.,](\d+))?(Z|[+-]\d\d:?\d\d)?")
_SLASH_TIME = re.compile(r"(\d{4})/(\d\d)/(\d\d)[ T](\d\d:\d\d:\d\d)")  # Go log package (device plugin)
_BRACKET = re.compile(r"\[\s*([^\]]*?)\s*\]")
_MONOTONIC = re.compile(r"\d+\.\d+")
_DMESG_T = re.compile(r"(?:\S+\s+)?(\S+)\s+(\d{1,2})\s+(\d\d):(\d\d):(\d\d)\s+(\d{4})")  # Tue Mar  5 10:00:00 2024
_MONTHS = {
    m: i
    for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), start=1)
}


# --- timestamps -----------------------------------------------------------------------------------
def _iso(date: str, clock: str, fraction: str | None, zone: str | None) -> str | None:
    text = f"{date}T{clock}"
    if fraction:
        text += "." + fraction[:6].ljust(6, "0")
    if zone:
        text += "+00:00" if zone == "Z" else f"{zone[:3]}:{zone[-2:]}"
    try:
        datetime.fromisoformat(text)
    except ValueError:
        return None
    return text


def _dmesg_t(inside: str) -> str | None:
    match = _DMESG_T.fullmatch(inside)
    if match is None:
        return None
    month = _MONTHS.get(match.group(1)[:3].lower())
    if month is None:
        return None
    try:
        stamp = datetime(
            int(match.group(6)),
            month,
            int(match.group(2)),
            int(match.group(3)),
            int(match.group(4)),
            int(match.group(5)),
        )
    except ValueError:
        return None
    return stamp.isoformat()


# A /dev/kmsg record (Documentation/ABI/testing/dev-kmsg): "priority,sequence,microseconds,flags;message".
_KMSG_RECORD = re.compile(r"^\s*\d+,\d+,(\d+),[^;]*;")


def parse_time(prefix: str) -> tuple[str | None, str | None]:
    """(time, monotonic) from the text before a message.

    ``time`` is ISO 8601 when the prefix holds an absolute, parseable time, else the time as written
    (a yearless syslog time, a dmesg -T time in another language, monotonic seconds), else None.
    ``monotonic`` is the ``[ 123.456]`` seconds when a wall-clock time is also present (syslog).
    """
    wall: str | None = None
    monotonic: str | None = None
    kmsg = _KMSG_RECORD.match(prefix)
    if kmsg is not None:  # microseconds since boot, written as dmesg writes them: "5.678901"
        micros = int(kmsg.group(1))
        return f"{micros // 1_000_000}.{micros % 1_000_000:06d}", None
    bracket = _BRACKET.search(prefix)
    if bracket is not None and _MONOTONIC.fullmatch(bracket.group(1)):
        monotonic = bracket.group(1)
    syslog = _SYSLOG_TIME.match(prefix)
    iso = _ISO_TIME.search(prefix)
    if syslog is not None and (iso is None or iso.start() > syslog.end()):
        wall = syslog.group(1)
    elif iso is not None:
        wall = _iso(*iso.groups()) or iso.group(0)
    elif bracket is not None and monotonic is None and any(c.isdigit() for c in bracket.group(1)):
        wall = _dmesg_t(bracket.group(1)) or bracket.group(1)  # also dmesg -H "[  +0.000844]" as written
    else:
        slash = _SLASH_TIME.search(prefix)
        if slash is not None:
            wall = _iso("-".join(slash.groups()[:3]), slash.group(4), None, None) or slash.group(0)
    if wall is None:
        return monotonic, None
    return wall, monotonic


def seconds_of(prefix: str) -> float | None:
    """Seconds of a line's time, monotonic or wall clock, to measure spans within one log; None if unknown."""
    wall, monotonic = parse_time(prefix)
    return _seconds(monotonic) if monotonic else _seconds(wall)


def _seconds(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None
