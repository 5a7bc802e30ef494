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
