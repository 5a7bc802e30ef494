"""One kernel event as the history keeps it: a key that is the same each time the event is seen.

Shared by the store's writer (``nightowl.history.extract``) and the ``gpu-history`` collector, so an event
in this run's log and the same event recorded by an earlier run have one key.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from typing import Any

# Kernel events kept: the GPU's and the host's faults; driver chatter (other_nvrm) is not history.
SKIPPED_KINDS = frozenset({"other_nvrm"})


def timestamp(text: str | None) -> float | None:
    """Seconds since the epoch of an ISO time from the kernel-log parser (naive = UTC); None if not one."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def event_key(host: str, event: dict[str, Any], boot_id: str | None) -> str:
    """What makes an event itself: the same lines seen again give the same key. Without a time the boot
    tells two identical lines apart."""
    first = event.get("first_time") or event.get("time")
    parts = [host, event.get("kind"), event.get("code"), event.get("pci"), first, event.get("text")]
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
        "count": int(event.get("count") or 1),
        "text": (event.get("text") or "")[:500],
    }
