"""The clocks a timeline entry can come from, and how times are read and shown."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone

# Clocks an entry can come from. Only entries whose clock carries an absolute instant are sorted
# against each other; a time without a year or written in seconds since boot is listed apart.
CLOCK_NIGHTOWL = "nightowl (UTC)"
CLOCK_HOST_UTC = "host log (UTC offset written)"
CLOCK_HOST_LOCAL = "host local time (zone not written; read as UTC)"
CLOCK_HOST_NO_YEAR = "host log, no year written"
CLOCK_HOST_BOOT = "host kernel, seconds since boot"


def stamp(epoch: float | None) -> str:
    if epoch is None:
        return "?"
    moment = datetime.fromtimestamp(epoch, tz=timezone.utc)
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


def host_time(written: str | None) -> tuple[float | None, str]:
    if not written:
        return None, CLOCK_HOST_NO_YEAR
    if re.fullmatch(r"\d+\.\d+", written):
        return None, CLOCK_HOST_BOOT
    epoch, zone = epoch_of(written)
    if epoch is None:
        return None, CLOCK_HOST_NO_YEAR
    return epoch, CLOCK_HOST_UTC if zone else CLOCK_HOST_LOCAL


@dataclass
class Moment:
    epoch: float | None
    shown: str
    clock: str
    tag: str
    what: str
    host: str | None = None
    cite: str | None = None
    order: int = 0
