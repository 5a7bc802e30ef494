"""The clocks a timeline entry can come from, and how times are read and shown."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

# Clocks an entry can come from. Only entries whose clock carries an absolute instant are sorted
# against each other; a time without a year or written in seconds since boot is listed apart.
CLOCK_NIGHTOWL = "nightowl (UTC)"
CLOCK_HOST_UTC = "host log (UTC offset written)"
CLOCK_HOST_LOCAL = "host local time (zone not written; read as UTC)"
CLOCK_HOST_NO_YEAR = "host log, no year written"
CLOCK_HOST_BOOT = "host kernel, seconds since boot"
CLOCK_HOST_YEARLESS = "host local time, year from the capture (zone not written; read as UTC)"

_MONTHS = {
    m: i for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1)
}
# syslog / journalctl "short" (RFC 3164: "Mar 29 15:38:59"), and vLLM's "03-29 15:38:59" (MM-DD).
_SYSLOG = re.compile(r"(?P<mon>[A-Za-z]{3}) +(?P<day>\d{1,2}) (?P<hms>\d\d:\d\d:\d\d)(?P<frac>\.\d+)?")
_MONTH_DAY = re.compile(r"(?P<mon>\d\d)-(?P<day>\d\d) (?P<hms>\d\d:\d\d:\d\d)(?P<frac>\.\d+)?")


def stamp(epoch: float | None) -> str:
    if epoch is None or isinstance(epoch, bool) or not isinstance(epoch, (int, float)):
        return "?"
    try:
        moment = datetime.fromtimestamp(epoch, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):  # 1e400, -1e300: not a moment this machine can show
        return "?"
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def epoch_of(text: str | None) -> tuple[float | None, bool]:
    """(epoch, zone_written) of an ISO 8601 time; a time without a zone is read as UTC."""
    if not text:
        return None, False
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace(" ", "T", 1))
    except ValueError:
        return None, False
    if moment.year <= 1:  # Alertmanager writes 0001-01-01T00:00:00Z for "not ended"
        return None, False
    zone_written = moment.tzinfo is not None
    if not zone_written:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp(), zone_written


def duration(seconds: float) -> str:
    seconds = abs(seconds)
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def with_capture_year(written: str, captured: float | None) -> float | None:
    """The instant of a yearless time ("Mar 29 15:38:59", vLLM's "03-29 15:38:59") in the capture's year.

    A log is written before it is captured, so a time that would fall more than a day after the
    capture belongs to the year before: "Dec 31 23:59:58" captured on 2 January is last year's.
    The day of slack absorbs zone and clock differences. Month names are English (syslog's C locale);
    anything else stays unplaced.
    """
    if captured is None:
        return None
    match = _SYSLOG.fullmatch(written.strip()) or _MONTH_DAY.fullmatch(written.strip())
    if match is None:
        return None
    month_text = match.group("mon")
    month = int(month_text) if month_text.isdigit() else _MONTHS.get(month_text.lower())
    if month is None:
        return None
    year = datetime.fromtimestamp(captured, tz=timezone.utc).year
    for candidate in (year, year - 1, year - 2):  # 29 February exists in a leap year only
        try:
            moment = datetime.fromisoformat(
                f"{candidate:04d}-{month:02d}-{int(match.group('day')):02d}T{match.group('hms')}"
                f"{(match.group('frac') or '')[:7]}+00:00"
            )
        except ValueError:
            continue
        if moment.timestamp() <= captured + 86400:
            return moment.timestamp()
    return None


def host_time(written: str | None, captured: float | None = None) -> tuple[float | None, str]:
    """(epoch, clock) of a time a host log wrote; ``captured`` (nightowl's clock) supplies a missing year."""
    if not written:
        return None, CLOCK_HOST_NO_YEAR
    if re.fullmatch(r"\d+\.\d+", written):
        return None, CLOCK_HOST_BOOT
    epoch, zone = epoch_of(written)
    if epoch is None:
        yearless = with_capture_year(written, captured)
        return (yearless, CLOCK_HOST_YEARLESS) if yearless is not None else (None, CLOCK_HOST_NO_YEAR)
    return epoch, CLOCK_HOST_UTC if zone else CLOCK_HOST_LOCAL


@dataclass
class Moment:
    epoch: float | None
    shown: str
    clock: str
    tag: str
    what: str
    host: str | None = None  # the lane: a host, or None for the alert and nightowl's own run
    cites: list[Any] = field(default_factory=list)  # citations.Cite, to the line
    order: int = 0

    @property
    def cite(self) -> str | None:
        """The evidence ids alone ("E1, E3"), for templates written before line citations."""
        return ", ".join(dict.fromkeys(c.id for c in self.cites)) or None
