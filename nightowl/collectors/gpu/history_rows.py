"""One kernel event as the history keeps it: a key that is the same each time the event is seen.

Shared by the store's writer (``nightowl.history.extract``) and the ``gpu-history`` collector, so an event
in this run's log and the same event recorded by an earlier run have one key; ``same_event`` also finds one
event read through two clocks (journald's zoned time, ``dmesg -T``'s local one), whose keys differ.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

# Kernel events kept: the GPU's and the host's faults; driver chatter (other_nvrm) is not history.
SKIPPED_KINDS = frozenset({"other_nvrm"})


# One event read through two clocks (issue "trust, round four", item 5). journald stamps a line when it is
# logged and prints the zone (``-o short-iso``: ``+0200``); ``dmesg -T`` adds the boot time to the kernel's
# monotonic stamp and prints local time with no zone, and moves with every clock step after boot (dmesg(1):
# "the timestamp could be inaccurate"). A zone offset is a whole quarter hour within UTC-12 .. UTC+14 (the
# IANA tz database: +05:45 Nepal, +12:45 Chatham, +14:00 Kiritimati).
ZONE_STEP_SECONDS = 900
MAX_ZONE_SECONDS = 14 * 3600
# Readings this far apart are one incident (an NTP step after boot, dmesg -T's drift); gpu-history already
# calls two incidents less than a minute apart one incident logged twice.
CLOCK_STEP_SECONDS = 60.0
# The kernel's own stamp (printk's, in dmesg and syslog alike) is printed to the microsecond.
MONOTONIC_SLACK_SECONDS = 0.001
_SECONDS = re.compile(r"\s*\d{1,10}\.\d{1,9}\s*")


def _moment(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None


def timestamp(text: str | None) -> float | None:
    """Seconds since the epoch of an ISO time from the kernel-log parser (naive = UTC); None if not one."""
    moment = _moment(text)
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    try:
        return moment.timestamp()
    except (OverflowError, ValueError, OSError):
        return None


def zone_known(text: str | None) -> bool:
    """Whether an event time names its zone (journald, ISO dmesg), unlike ``dmesg -T``'s local time."""
    moment = _moment(text)
    return moment is not None and moment.tzinfo is not None


def monotonic_of(event: dict[str, Any]) -> float | None:
    """The kernel's seconds since boot for an event: syslog's ``[ 123.456]`` beside its wall time, or plain
    ``dmesg``'s, whose only time it is; None when the source has none."""
    for value in (event.get("monotonic"), event.get("first_time") or event.get("time")):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str) and _SECONDS.fullmatch(value):
            return float(value)
    return None


def _key_time(first: Any) -> Any:
    """The time as the key holds it: a zoned time in UTC (``21:29:39+02:00`` is ``19:29:39+00:00``)."""
    moment = _moment(first)
    if moment is None or moment.tzinfo is None:
        return first
    try:
        return moment.astimezone(timezone.utc).isoformat()
    except (OverflowError, ValueError):
        return first


def event_key(host: str, event: dict[str, Any], boot_id: str | None) -> str:
    """What makes an event itself: the same lines seen again give the same key. The boot and the kernel's
    monotonic stamp, where the source has both, name it whatever the wall clock said; else its time (in
    UTC when zoned). Without a time the boot tells two identical lines apart."""
    first = event.get("first_time") or event.get("time")
    monotonic = monotonic_of(event)
    what = [host, event.get("kind"), event.get("code"), event.get("pci")]
    if monotonic is not None and boot_id:
        parts = [*what, "boot", boot_id, f"{monotonic:.6f}", event.get("text")]
    else:
        parts = [*what, _key_time(first), event.get("text")]
        if not first:
            parts.append(boot_id)
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:32]


def event_row(host: str, event: dict[str, Any], boot_id: str | None) -> dict[str, Any]:
    first = event.get("first_time") or event.get("time")
    last = event.get("last_time") or first
    return {
        "key": event_key(host, event, boot_id),
        "pci": event.get("pci"),
        "uuid": event.get("uuid"),
        "kind": event.get("kind"),
        "code": event.get("code") if isinstance(event.get("code"), int) else None,
        "boot_id": boot_id,
        "first_time": first,
        "last_time": last,
        "first_ts": timestamp(first),
        "last_ts": timestamp(last),
        "monotonic": monotonic_of(event),
        "count": int(event.get("count") or 1),
        "text": (event.get("text") or "")[:500],
    }


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def same_event(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two rows of one host are one event read twice: the same text on the same GPU, in the same
    boot (when both know it), at the same monotonic stamp (when both have one), else at wall times a clock
    step apart, or a zone offset apart when exactly one of the two times names its zone."""
    if a.get("key") == b.get("key"):
        return True
    if any(a.get(name) != b.get(name) for name in ("kind", "code", "pci", "text")):
        return False
    if a.get("boot_id") and b.get("boot_id") and a["boot_id"] != b["boot_id"]:
        return False
    mono_a, mono_b = _number(a.get("monotonic")), _number(b.get("monotonic"))
    if mono_a is not None and mono_b is not None:
        return abs(mono_a - mono_b) <= MONOTONIC_SLACK_SECONDS
    first_a, first_b = _number(a.get("first_ts")), _number(b.get("first_ts"))
    if first_a is None or first_b is None:
        return False
    apart = abs(first_a - first_b)
    if apart <= CLOCK_STEP_SECONDS:
        return True
    if zone_known(a.get("first_time")) == zone_known(b.get("first_time")):
        return False  # one clock on both sides: an hour apart is an hour apart
    offset = round(apart / ZONE_STEP_SECONDS) * ZONE_STEP_SECONDS
    return offset <= MAX_ZONE_SECONDS and abs(apart - offset) <= CLOCK_STEP_SECONDS


def merged(kept: Mapping[str, Any], seen: Mapping[str, Any]) -> dict[str, Any]:
    """``kept`` (a stored row) after ``seen``, the same event read again (``same_event``), maybe through
    another clock: the times of the reading that names its zone, a later last occurrence moved onto that
    clock, the larger count, and the boot, UUID and monotonic stamp whichever side knows them."""
    row = dict(kept)
    base, other = kept, seen
    if zone_known(seen.get("first_time")) and not zone_known(kept.get("first_time")):
        row.update({name: seen.get(name) for name in ("first_time", "last_time", "first_ts", "last_ts")})
        base, other = seen, kept
    first_base, first_other, last_other = (
        _number(base.get("first_ts")), _number(other.get("first_ts")), _number(other.get("last_ts"))
    )  # fmt: skip
    if first_base is not None and first_other is not None and last_other is not None:
        moved = last_other - (first_other - first_base)  # the other reading's last time, on the kept clock
        last = _number(row.get("last_ts"))
        if last is None or moved > last + 1:
            row["last_ts"] = moved
            row["last_time"] = datetime.fromtimestamp(moved, timezone.utc).isoformat()
    row["count"] = max(int(kept.get("count") or 1), int(seen.get("count") or 1))
    for name in ("boot_id", "uuid", "monotonic"):
        row[name] = row.get(name) if row.get(name) is not None else seen.get(name)
    return row
