"""``actions.jsonl``: every scheduler action nightowl took or held, append-only and hash-chained.

One JSON object a line: ``{when, node, what, why, bundle, bundle_sha256, result, prev, hash}``.
``hash`` is the sha256 of ``prev`` and the line's other fields (canonical JSON), ``prev`` the hash of
the line before (``""`` for the first), so a line edited, removed or reordered breaks the chain
(`verify`). Appends take an exclusive lock on the file: checks that run at once never interleave.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import time
from pathlib import Path
from typing import Any

FIELDS = ("when", "node", "what", "why", "bundle", "bundle_sha256", "result")


def _digest(prev: str, record: dict[str, Any]) -> str:
    body = json.dumps({k: record.get(k) for k in FIELDS}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256((prev + "\n" + body).encode()).hexdigest()


def append(path: Path, record: dict[str, Any]) -> dict[str, Any]:
    """Append one action (``when`` defaults to now, ISO 8601 UTC); returns the line as written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        lines = [line for line in handle.read().splitlines() if line.strip()]
        prev = json.loads(lines[-1])["hash"] if lines else ""
        line = {k: record.get(k) for k in FIELDS}
        line["when"] = line["when"] or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        line["prev"] = prev
        line["hash"] = _digest(prev, line)
        handle.write(json.dumps(line, sort_keys=True) + "\n")
        handle.flush()
    return line


def read(path: Path) -> list[dict[str, Any]]:
    """The log's lines, oldest first; none when the file does not exist."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def verify(path: Path) -> list[str]:
    """Where the chain breaks (``line N: ...``); empty when every line follows from the one before."""
    problems = []
    prev = ""
    for number, line in enumerate(read(path), 1):
        if line.get("prev") != prev:
            problems.append(f"line {number}: prev is not the hash of line {number - 1}")
        if line.get("hash") != _digest(line.get("prev") or "", line):
            problems.append(f"line {number}: hash does not match its fields")
        prev = line.get("hash") or ""
    return problems


ENV = "NIGHTOWL_ACTIONS_LOG"


def default_path() -> Path:
    """``$NIGHTOWL_ACTIONS_LOG``, else ``actions.jsonl`` in the state dir: where `slurm` and `k8s` log by
    default (`sweep`, `check` and `serve` watch only ``$NIGHTOWL_ACTIONS_LOG``: :func:`watched_path`)."""
    import os

    from nightowl.paths import state_dir

    return Path(os.environ[ENV]) if os.environ.get(ENV) else state_dir() / "actions.jsonl"


def watched_path() -> Path | None:
    """The actions log reports watch for an open breaker: ``$NIGHTOWL_ACTIONS_LOG`` only. Reports never
    look the state dir up themselves: under slurmd's bare environment that lookup cost a health check
    its deadline (tests/fleet/test_slurm_healthcheck.py), and a report must not slow the check it reports."""
    import os

    return Path(os.environ[ENV]) if os.environ.get(ENV) else None


def breaker_state(path: Path | None, window_s: float = 3600.0, now: float | None = None) -> dict[str, Any] | None:
    """Whether the circuit breaker held actions lately, from the log: ``{open, held_in_window, held_total,
    window_s, last_held: {when, node, why} | None, error}``. ``open`` is a held action inside the window.
    None when there is no log (nightowl never acted, or none is watched); a log that cannot be read says so in ``error``
    (and ``open`` is None: unknown, never a closed breaker)."""
    if path is None or not path.exists():
        return None
    try:
        entries = read(path)
    except (OSError, ValueError) as exc:
        return {"open": None, "held_in_window": None, "held_total": None, "window_s": window_s, "last_held": None,
                "error": f"cannot read {path.name}: {exc}"}  # fmt: skip
    now = time.time() if now is None else now
    held = [e for e in entries if e.get("result") == "held"]
    recent = [e for e in held if now - _epoch(e.get("when")) < window_s]
    last = recent[-1] if recent else None
    return {
        "open": bool(recent),
        "held_in_window": len(recent),
        "held_total": len(held),
        "window_s": window_s,
        "last_held": {k: last.get(k) for k in ("when", "node", "why")} if last else None,
        "error": None,
    }


def _epoch(when: Any) -> float:
    """A log line's ``when`` as Unix time; one that cannot be read counts as now (unknown age is not old)."""
    from datetime import datetime

    try:
        return datetime.fromisoformat(str(when).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return time.time()


def breaker_line(state: dict[str, Any] | None) -> str | None:
    """One line for reports and notes when the breaker is open or its log unreadable; None otherwise."""
    if not state:
        return None
    if state.get("error"):
        return f"circuit breaker: unknown ({state['error']})"
    if not state.get("open"):
        return None
    last = state.get("last_held") or {}
    return (
        f"circuit breaker open: {state['held_in_window']} action(s) held in the last {state['window_s']:g} s "
        f"(last: {last.get('node')}: {last.get('why')})"
    )
