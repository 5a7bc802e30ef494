"""What a watcher keeps on disk: the position of the last judged line (so a restart never judges a line
twice) and the health file a liveness probe reads. Both are small JSON files replaced atomically."""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any

from nightowl.watch.source import Position


def write_json(path: Path, doc: Any) -> None:
    """Write-to-temp, fsync, rename: a reader (or a restart after a crash) sees the old file or the new."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    data = json.dumps(doc, indent=1, sort_keys=True).encode()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


class Cursor:
    """The saved position of one source (``source`` names it, so a file's offset is never read as a
    journal cursor)."""

    def __init__(self, path: Path, source: str) -> None:
        self.path = path
        self.source = source
        self.saved: Position | None = None

    def load(self) -> Position | None:
        doc = read_json(self.path)
        if isinstance(doc, dict) and doc.get("source") == self.source and isinstance(doc.get("position"), dict):
            self.saved = doc["position"]
            return self.saved
        return None

    def save(self, position: Position) -> bool:
        """Save if it changed; False (and nothing raised) when the state dir cannot be written."""
        if position == self.saved or not position:
            return True
        try:
            write_json(self.path, {"source": self.source, "position": position, "saved": time.time()})
        except OSError:
            return False
        self.saved = dict(position)
        return True


def health_age(path: Path, now: float | None = None) -> tuple[float | None, dict[str, Any] | None]:
    """(seconds since the follower last wrote it, its content), (None, None) when unreadable."""
    doc = read_json(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("updated"), (int, float)):
        return None, None
    with contextlib.suppress(TypeError):
        return (time.time() if now is None else now) - float(doc["updated"]), doc
    return None, None
