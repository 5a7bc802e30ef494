"""A recorded host (docs/reference.md#recorded-hosts-and-bundles) played back as if it were live.

Each collector output is ``<kind>.out`` with optional ``.err``, ``.rc`` and
``.timeout``; a collector taken more than once uses ``<kind>.1.out``,
``<kind>.2.out`` and the replay hands them out in order.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from nightowl.transports.base import CommandResult, TransportError


class ReplayTransport:
    recorded = True  # one recording per kind: the engine tries no fallback commands

    def __init__(self, directory: Path, host: str | None = None) -> None:
        self.directory = Path(directory)
        self.host = host or self.directory.name
        self._taken: dict[str, int] = defaultdict(int)

    def connect(self) -> None:
        if not self.directory.is_dir():
            raise TransportError(f"no recorded host at {self.directory}")
        if (self.directory / "unreachable").exists():
            reason = (self.directory / "unreachable").read_text().strip() or "recorded as unreachable"
            raise TransportError(reason)

    def close(self) -> None:
        return None

    def _stem(self, kind: str) -> str | None:
        """Which recording of ``kind`` to hand out next."""
        self._taken[kind] += 1
        numbered = f"{kind}.{self._taken[kind]}"
        if any((self.directory / f"{numbered}.{ext}").exists() for ext in ("out", "rc", "timeout")):
            return numbered
        if self._taken[kind] == 1 and any(
            (self.directory / f"{kind}.{ext}").exists() for ext in ("out", "rc", "timeout")
        ):
            return kind
        return None

    def run(self, argv: Sequence[str], timeout: float, kind: str | None = None) -> CommandResult:
        started = time.time()
        stem = self._stem(kind) if kind else None
        if stem is None:
            return CommandResult(
                tuple(argv), None, "", "", started, 0.0, error=f"not recorded: {kind or ' '.join(argv)}"
            )
        out, err = self._read(stem, "out") or "", self._read(stem, "err") or ""
        if self._read(stem, "timeout") is not None:
            return CommandResult(tuple(argv), None, out, err, started, timeout, timed_out=True, error="timed out")
        rc_text = (self._read(stem, "rc") or "0").strip()
        rc = int(rc_text) if rc_text.lstrip("-").isdigit() else 0
        return CommandResult(tuple(argv), rc, out, err, started, 0.0)

    def _read(self, stem: str, ext: str) -> str | None:
        path = self.directory / f"{stem}.{ext}"
        return path.read_text(errors="replace") if path.exists() else None
