"""A recorded host (docs/reference.md#recorded-hosts-and-bundles) played back as if it were live.

Each collector output is ``<kind>.out`` with optional ``.err``, ``.rc`` and
``.timeout``; a collector taken more than once uses ``<kind>.1.out``,
``<kind>.2.out`` and the replay hands them out in order.

A recorded folder is input from elsewhere: only regular files inside it are read, at most
``output_cap_bytes`` of each (as a live command's output is capped). A FIFO, a device or a
symlink that leaves the folder (``kernel-log.out -> /etc/shadow``) is that command's error.
"""

from __future__ import annotations

import os
import re
import stat
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from nightowl.transports.base import ERR, LATE, OUT, RC, TIMEOUT, TRUNCATED, UNREACHABLE, CommandResult, TransportError
from nightowl.transports.capped import CappedOutput

_EXIT_CODE = re.compile(r"-?[0-9]{1,5}")
# The files that say a recording of a kind exists (an .err alone is no recording).
_TAKEN_MARKS = (OUT, RC, TIMEOUT, LATE)


class ReplayTransport:
    recorded = True  # one recording per kind: the engine tries no fallback commands

    def __init__(self, directory: Path, host: str | None = None, output_cap_bytes: int = 64 * 1024 * 1024) -> None:
        self.directory = Path(directory)
        self.host = host or self.directory.name
        self.output_cap_bytes = output_cap_bytes
        self._taken: dict[str, int] = defaultdict(int)

    def connect(self) -> None:
        if not self.directory.is_dir():
            raise TransportError(f"no recorded host at {self.directory}")
        if (self.directory / UNREACHABLE).exists():
            try:
                reason = self._read_capped(self.directory / UNREACHABLE, 4096)[0].strip()
            except RefusedFile as exc:
                reason = str(exc)
            raise TransportError(reason or "recorded as unreachable")

    def close(self) -> None:
        return None

    def _stem(self, kind: str) -> str | None:
        """Which recording of ``kind`` to hand out next."""
        self._taken[kind] += 1
        numbered = f"{kind}.{self._taken[kind]}"
        if any((self.directory / f"{numbered}{suffix}").exists() for suffix in _TAKEN_MARKS):
            return numbered
        if self._taken[kind] == 1 and any((self.directory / f"{kind}{suffix}").exists() for suffix in _TAKEN_MARKS):
            return kind
        return None

    def run(self, argv: Sequence[str], timeout: float, kind: str | None = None) -> CommandResult:
        started = time.time()
        stem = self._stem(kind) if kind else None
        if stem is None:
            return CommandResult(
                tuple(argv), None, "", "", started, 0.0, error=f"not recorded: {kind or ' '.join(argv)}"
            )
        try:
            out_path = self.directory / f"{stem}{OUT}"
            out, dropped = self._read_capped(out_path, self.output_cap_bytes) if os.path.lexists(out_path) else ("", 0)
            err = self._read(stem, ERR) or ""
            timeout_mark = self._read(stem, TIMEOUT)
            late_mark = self._read(stem, LATE)
            rc_raw = self._read(stem, RC)
            rc_text = "0" if rc_raw is None else rc_raw.strip()  # no file: exit 0; an empty one is unreadable
        except RefusedFile as exc:
            return CommandResult(tuple(argv), None, "", "", started, 0.0, error=str(exc))
        if late_mark is not None:
            return CommandResult(tuple(argv), None, out, err, started, 0.0, late=late_mark.strip() or "recorded late")
        if timeout_mark is not None:
            return CommandResult(tuple(argv), None, out, err, started, timeout, timed_out=True, error="timed out")
        if not _EXIT_CODE.fullmatch(rc_text):
            # "none": recorded without an exit status; anything else is unreadable. Neither is a success.
            why = "ended without an exit status" if rc_text == "none" else f"unreadable exit code {rc_text[:40]!r}"
            return CommandResult(tuple(argv), None, out, err, started, 0.0, error=f"{stem}{RC}: {why}")
        dropped += self._recorded_cut(stem)
        return CommandResult(tuple(argv), int(rc_text), out, err, started, 0.0, stdout_truncated_bytes=dropped)

    def _recorded_cut(self, stem: str) -> int:
        """The bytes a live run had already cut from this output (``<kind>.truncated``), so a replay judges
        the same cut log as the run did and says so."""
        try:
            text = self._read(stem, TRUNCATED)
        except RefusedFile:
            return 0
        return int(text.strip()) if text is not None and text.strip().isdigit() else 0

    def _read(self, stem: str, suffix: str) -> str | None:
        path = self.directory / f"{stem}{suffix}"
        if not os.path.lexists(path):
            return None
        return self._read_capped(path, self.output_cap_bytes)[0]

    def _read_capped(self, path: Path, cap: int) -> tuple[str, int]:
        """The first ``cap`` bytes of a regular file inside the folder, and how many bytes were dropped."""
        try:
            inside = path.resolve().is_relative_to(self.directory.resolve())
            info = os.stat(path)
        except (OSError, RuntimeError) as exc:
            raise RefusedFile(f"cannot read {path.name}: {exc}") from None
        if not inside:
            raise RefusedFile(f"refused {path.name}: a link that leaves the recorded folder")
        if not stat.S_ISREG(info.st_mode):
            raise RefusedFile(f"refused {path.name}: not a regular file")
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
            with os.fdopen(fd, "rb") as handle:
                kept = _head_and_tail(handle, cap)
        except OSError as exc:
            raise RefusedFile(f"cannot read {path.name}: {exc.strerror}") from None
        text, dropped, _ = kept.text()
        return text, dropped


def _head_and_tail(handle: BinaryIO, cap: int) -> CappedOutput:
    """A file kept as a live output is (its head and tail within ``cap``), reading only what is kept."""
    kept = CappedOutput(cap)
    size = os.fstat(handle.fileno()).st_size
    if size <= cap:
        kept.add(handle.read(cap + 1))
        return kept
    kept.add(handle.read(kept.head_cap))
    kept.skip(size - kept.head_cap - kept.tail_cap)
    handle.seek(size - kept.tail_cap)
    kept.add(handle.read(kept.tail_cap))
    return kept


class RefusedFile(Exception):
    """A recorded file that is not a regular file inside the folder, or cannot be read."""
