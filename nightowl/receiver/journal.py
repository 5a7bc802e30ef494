"""The receiver's journal, ``<out>/captures.jsonl``: one durable line per change of a capture's state, the
persisted queue a restarted receiver resumes from, and the lock that makes one receiver own an ``out``.

A line that cannot be written is reported (``error``, until a write succeeds: ``/healthz`` is unhealthy and
the delivery refused, so the sender retries); a line that cannot be read back (cut by a crash, mistyped by
hand) is skipped and reported, never taking the next record with it. A journal that ends mid-line gets its
line ended before the next is appended.
"""

from __future__ import annotations

import json
import math
import os
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from nightowl.logline import LogLine

if TYPE_CHECKING:
    from nightowl.receiver.capture import Capture

JOURNAL = "captures.jsonl"
LOCK = "captures.lock"


class Journal:
    """Appends and reads back ``<out>/captures.jsonl`` (the module docstring says how)."""

    def __init__(self, out_dir: Path, log: Callable[[Any], None]) -> None:
        self.path = out_dir / JOURNAL
        self.error: str | None = None  # the last write that failed, until one succeeds
        self._log = log
        self._cut_line = False  # the journal ends mid-line (a crash mid-write): end it before appending

    def write(self, entry: dict[str, Any]) -> bool:
        """One journal line; the caller holds the receiver's lock. False (and ``error`` set) when it failed."""
        line = json.dumps(entry, default=str) + "\n"
        try:
            _append(self.path, ("\n" if self._cut_line else "") + line)
        except OSError as exc:
            self.error = f"{exc.strerror or exc}"
            self._log(LogLine(f"nightowl serve: cannot write {JOURNAL}: {self.error}", level="error"))
            return False
        self._cut_line = False
        self.error = None
        return True

    def read(self) -> tuple[OrderedDict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
        """The last entry of each capture (its state), oldest first, and the alert record (with a storm's
        ``storm_records``) each admitted capture was journaled with."""
        last: OrderedDict[str, dict[str, Any]] = OrderedDict()
        records: dict[str, dict[str, Any]] = {}
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return last, records
        except OSError as exc:
            self._log(LogLine(f"nightowl serve: cannot read {self.path}: {exc}", level="warning"))
            return last, records
        self._cut_line = bool(data) and not data.endswith(b"\n")
        for number, raw in enumerate(data.split(b"\n"), 1):
            if not raw.strip():
                continue
            try:
                entry = _readable(json.loads(raw.decode(errors="replace")))
            except (ValueError, TypeError) as exc:
                self._log(
                    LogLine(
                        f"nightowl serve: {self.path} line {number} cannot be read ({exc}); skipped", level="warning"
                    )
                )
                continue
            ident = str(entry.get("id") or f"line-{number}")
            last.pop(ident, None)
            last[ident] = entry
            if isinstance(entry.get("alert_record"), dict):
                records[ident] = entry["alert_record"]
            if isinstance(entry.get("storm_records"), list):
                records[ident] = {**records.get(ident, {}), "storm_records": entry["storm_records"]}
        return last, records


def journal_entry(capture: Capture, with_alert: bool = False) -> dict[str, Any]:
    """A capture's journal line; ``with_alert`` adds what a restarted receiver needs to run it (labels
    scrubbed as in the manifest)."""
    entry = capture.to_json()
    if with_alert:
        entry["alert_record"] = {k: v for k, v in capture.manifest_alert().items() if k not in ("queued_s", "storm")}
        if capture.storm is not None:
            entry["storm_records"] = [
                {k: v for k, v in m.manifest_alert().items() if k != "queued_s"} for m in capture.storm.members
            ]
    return entry


class ReceiverBusy(RuntimeError):
    """Another receiver owns this ``out`` folder (its journal and queue)."""


def _append(path: Path, text: str) -> None:
    """Append to the journal and make it durable (a full disk shows here, not later)."""
    with path.open("a") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())


def owner_lock(out_dir: Path) -> IO[str]:
    """An exclusive lock on ``out_dir`` held for the receiver's life; ReceiverBusy names the owner."""
    import fcntl

    handle = (out_dir / LOCK).open("a+")
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.seek(0)
        owner = handle.read().strip() or "?"
        handle.close()
        raise ReceiverBusy(
            f"{out_dir} is already served by another nightowl serve (pid {owner}): one receiver per "
            "journal folder, or every queued capture would run twice; stop it or give this one another `out`"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


_TEXT_FIELDS = (
    "id",
    "alert",
    "source",
    "alert_status",
    "fingerprint",
    "status",
    "reason",
    "rule",
    "runbook",
    "host",
    "bundle",
    "run_id",
    "outcome",
    "host_status",
    "host_error",
    "status_update",
    "starts_at",
)


def _readable(entry: Any) -> dict[str, Any]:
    """A journal entry of the shape the receiver wrote, else ValueError naming the field."""
    if not isinstance(entry, dict):
        raise ValueError("not a JSON object")
    for key in _TEXT_FIELDS:
        if entry.get(key) is not None and not isinstance(entry[key], str):
            raise ValueError(f"{key} is not text")
    for key in ("received_at", "started_at", "finished_at"):
        if entry.get(key) is not None and (
            isinstance(entry[key], bool) or not isinstance(entry[key], (int, float)) or not math.isfinite(entry[key])
        ):
            raise ValueError(f"{key} is not a time")
    dedupe = entry.get("dedupe_key")
    if dedupe is not None and not (isinstance(dedupe, list) and all(isinstance(k, str) for k in dedupe)):
        raise ValueError("dedupe_key is not a list of text")
    for name, kind in (
        ("verdict", dict),
        ("alert_record", dict),
        ("notifications", list),
        ("storm", dict),
        ("storm_records", list),
        ("breaker", dict),
    ):
        if entry.get(name) is not None and not isinstance(entry[name], kind):
            raise ValueError(f"{name} is not a {kind.__name__}")
    if not all(isinstance(r, dict) for r in entry.get("storm_records") or []):
        raise ValueError("storm_records are not alert records")
    notes = entry.get("notifications") or []
    if not all(
        isinstance(n, dict) and isinstance(n.get("target"), str) and isinstance(n.get("status"), str) for n in notes
    ):
        raise ValueError("notifications are not target outcomes")
    return entry
