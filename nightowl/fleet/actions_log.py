"""``actions.jsonl``: every scheduler action nightowl took or held, append-only and hash-chained.

One JSON object a line: ``{when, node, what, why, bundle, bundle_sha256, result, prev, hash}``.
``hash`` is the sha256 of ``prev`` and the line's other fields (canonical JSON), ``prev`` the hash of
the line before (``""`` for the first), so a line edited, removed or reordered breaks the chain
(`verify`). Appends take an exclusive lock on the file: checks that run at once never interleave.

A line cut short (a crash or a full disk mid-write) never stops the log: reading skips it, and the next
append ends it with a newline and first writes a ``break`` line (``what: log``, ``result: break``) that
names the cut line and its sha256, chained to the last whole line; `verify` reports where the break is.
Actions log their intent before acting (``result: intended``) and the outcome after, so an action the
process did not live to log is still in the log (docs/reference.md#scheduler-actions-actionsjsonl).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

FIELDS = ("when", "node", "what", "why", "bundle", "bundle_sha256", "result")


def _digest(prev: str, record: dict[str, Any]) -> str:
    body = json.dumps({k: record.get(k) for k in FIELDS}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256((prev + "\n" + body).encode()).hexdigest()


def append(path: Path, record: dict[str, Any]) -> dict[str, Any]:
    """Append one action (``when`` defaults to now, ISO 8601 UTC); returns the line as written. Written and
    fsynced before it returns: a caller that acts after logging its intent acts only once the line is on disk.
    An OSError (a full disk, a read-only file system) reaches the caller, who then must not act."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        data = handle.read()
        lines = _lines(data.decode("utf-8", errors="replace"))
        prev = _last_hash(lines)
        out = []
        if data and not data.endswith(b"\n"):
            out.append(b"\n")  # end the cut line: the next line must not run on from it
        cut = _cut_tail(lines, data)
        if cut is not None:
            brk = _chained(prev, {"node": None, "what": "log", "why": cut, "result": "break"})
            out.append(json.dumps(brk, sort_keys=True).encode() + b"\n")
            prev = brk["hash"]
        line = _chained(prev, record)
        out.append(json.dumps(line, sort_keys=True).encode() + b"\n")
        handle.write(b"".join(out))
        handle.flush()
        os.fsync(handle.fileno())
    return line


def _chained(prev: str, record: dict[str, Any]) -> dict[str, Any]:
    line = {k: record.get(k) for k in FIELDS}
    line["when"] = line["when"] or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    line["prev"] = prev
    line["hash"] = _digest(prev, line)
    return line


def _lines(text: str) -> list[tuple[int, str, dict[str, Any] | None]]:
    """Each line with text: its number, its text, and its object (None for a line that is no JSON object)."""
    found = []
    for number, text_line in enumerate(text.split("\n"), 1):
        if text_line.strip():
            found.append((number, text_line, _object(text_line)))
    return found


def _object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _last_hash(lines: list[tuple[int, str, dict[str, Any] | None]]) -> str:
    whole = [obj for _, _, obj in lines if obj is not None]
    return str(whole[-1].get("hash") or "") if whole else ""


def _cut_tail(lines: list[tuple[int, str, dict[str, Any] | None]], data: bytes) -> str | None:
    """Why the log needs a break line before the next one: its last line is cut (no JSON object, or no
    newline after it); None when it ends with a whole line, or with a break already recorded."""
    if not lines:
        return None
    number, text, obj = lines[-1]
    if obj is not None and data.endswith(b"\n"):
        return None
    digest = hashlib.sha256(text.encode("utf-8", errors="replace")).hexdigest()
    return f"line {number} cut ({len(text.encode())} bytes, sha256 {digest}); the log goes on after it"


def read(path: Path) -> list[dict[str, Any]]:
    """The log's whole lines, oldest first; none when the file does not exist. A cut line (a crash or a full
    disk mid-write) is skipped: `verify` says where it is."""
    if not path.exists():
        return []
    return [obj for _, _, obj in _lines(path.read_bytes().decode("utf-8", errors="replace")) if obj is not None]


def verify(path: Path) -> list[str]:
    """Where the chain breaks (``line N: ...``); empty when every line follows from the one before. A cut
    line is reported as such; the break line after it chains to the last whole line, so a cut is one
    problem, not a chain broken from there on."""
    if not path.exists():
        return []
    problems = []
    prev, before = "", 0
    for number, _, line in _lines(path.read_bytes().decode("utf-8", errors="replace")):
        if line is None:
            problems.append(f"line {number}: cut short (not a whole JSON line); the log goes on after it")
            continue
        if line.get("prev") != prev:
            problems.append(f"line {number}: prev is not the hash of line {before}")
        if line.get("hash") != _digest(line.get("prev") or "", line):
            problems.append(f"line {number}: hash does not match its fields")
        prev, before = line.get("hash") or "", number
    return problems


ENV = "NIGHTOWL_ACTIONS_LOG"


def default_path() -> Path:
    """``$NIGHTOWL_ACTIONS_LOG``, else ``actions.jsonl`` in the state dir: where `slurm` and `k8s` log by
    default (`sweep`, `check` and `serve` watch only ``$NIGHTOWL_ACTIONS_LOG``: :func:`watched_path`)."""
    from nightowl.paths import state_dir

    return Path(os.environ[ENV]) if os.environ.get(ENV) else state_dir() / "actions.jsonl"


def watched_path() -> Path | None:
    """The actions log reports watch for an open breaker: ``$NIGHTOWL_ACTIONS_LOG`` only. Reports never
    look the state dir up themselves: under slurmd's bare environment that lookup cost a health check
    its deadline (tests/fleet/test_slurm_healthcheck.py), and a report must not slow the check it reports."""
    return Path(os.environ[ENV]) if os.environ.get(ENV) else None


def breaker_state(path: Path | None, window_s: float = 3600.0, now: float | None = None) -> dict[str, Any] | None:
    """Whether the circuit breaker held actions lately, from the log: ``{open, held_in_window, held_total,
    window_s, last_held: {when, node, why} | None, error}``. ``open`` is a held action inside the window.
    None when there is no log (nightowl never acted, or none is watched); a log that cannot be read says so in ``error``
    (and ``open`` is None: unknown, never a closed breaker)."""
    if path is None or not path.exists():
        return None
    try:
        lines = _lines(path.read_bytes().decode("utf-8", errors="replace"))
        if lines and lines[-1][2] is None:  # the last action may have been a held one: unknown, not closed
            raise ValueError(f"line {lines[-1][0]} cut short")
        entries = [obj for _, _, obj in lines if obj is not None]
    except (OSError, ValueError) as exc:
        return {"open": None, "held_in_window": None, "held_total": None, "window_s": window_s, "last_held": None,
                "error": f"cannot read {path.name}: {exc}"}  # fmt: skip
    now = time.time() if now is None else now
    # a resume a node's cap held (nightowl/fleet/node_caps.py) waits for a hardware ticket: not the breaker
    held = [e for e in entries if e.get("result") == "held" and not str(e.get("why") or "").startswith("node cap:")]
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
