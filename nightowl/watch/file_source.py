"""A log file followed as ``tail -F`` does: read to the end, then follow appends, a rename (logrotate's
create) and a truncation (copytruncate); a missing file is waited for.

Reads in chunks of at most ``CHUNK`` bytes and keeps no more than one unfinished line (cut at
``MAX_LINE_CHARS``), so memory stays flat whatever the line rate; a chunk with no message the kernel-log
parser reads is passed on without being split into lines.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from nightowl.collectors.gpu import kernel_log
from nightowl.watch.source import MAX_LINE_CHARS, Batch, Position, clip

CHUNK = 256 * 1024
_HINTS = tuple(hint.encode() for hint in kernel_log.MESSAGE_HINTS)  # tested on the bytes, before decoding


class FileSource:
    def __init__(self, path: Path, resume: Position | None = None, from_start: bool = False) -> None:
        self.path = path
        self.name = f"file:{path}"
        self.fd: int | None = None
        self.ident: tuple[int, int] | None = None  # (st_dev, st_ino) of the open file
        self.offset = 0  # bytes consumed up to the end of the last whole line
        self.partial = b""  # an unfinished last line
        self._notes: list[str] = []
        self._open(resume, from_start)

    # -- opening ------------------------------------------------------------------------------------
    def _open(self, resume: Position | None, from_start: bool) -> None:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return  # not there yet: followed when it appears (from its start, as tail -F does)
        st = os.fstat(fd)
        self.fd, self.ident = fd, (st.st_dev, st.st_ino)
        if resume and (resume.get("dev"), resume.get("inode")) == self.ident and st.st_size >= resume["offset"]:
            self.offset = int(resume["offset"])
        elif resume:
            # Rotated or truncated while nightowl was down: none of this file was judged yet.
            self.offset = 0
            self._notes.append(f"{self.path} is not the file the saved position was in: read from its start")
        else:
            self.offset = 0 if from_start else st.st_size
        os.lseek(fd, self.offset, os.SEEK_SET)

    def _reopen_if_replaced(self) -> None:
        """At the end of the open file: follow the name to a new file, or start over after a truncation."""
        try:
            st = os.stat(self.path)
        except OSError:
            return  # renamed away and not recreated yet: keep the old one
        if self.fd is None:
            self._open(None, from_start=True)
            return
        if (st.st_dev, st.st_ino) != self.ident:
            self._notes.append(f"{self.path} was rotated: following the new file")
            os.close(self.fd)
            self.fd, self.partial = None, b""
            self._open(None, from_start=True)
        elif st.st_size < self.offset + len(self.partial):
            self._notes.append(f"{self.path} was truncated: reading it from its start")
            self.offset, self.partial = 0, b""
            os.lseek(self.fd, 0, os.SEEK_SET)

    # -- reading ------------------------------------------------------------------------------------
    def read(self, timeout: float) -> Batch | None:
        deadline = time.monotonic() + timeout
        while True:
            chunk = os.read(self.fd, CHUNK) if self.fd is not None else b""
            if chunk:
                batch = self._batch(chunk)
                if batch is not None:
                    return batch
                continue
            self._reopen_if_replaced()
            if self.fd is not None and self._has_more():
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            time.sleep(min(0.2, remaining))  # a poll, as tail -F: no inotify dependency, ~0 CPU idle

    def _has_more(self) -> bool:
        assert self.fd is not None
        try:
            return os.fstat(self.fd).st_size > self.offset + len(self.partial)
        except OSError:
            return False

    def _batch(self, chunk: bytes) -> Batch | None:
        data = self.partial + chunk
        end = data.rfind(b"\n")
        if end < 0:
            self.partial = data if len(data) <= MAX_LINE_CHARS * 4 else data[: MAX_LINE_CHARS * 4]
            if len(data) > MAX_LINE_CHARS * 4:  # a line with no end in sight: cut it, skip to its end
                self.offset += len(data)
                self.partial = b""
            return None
        before = self.position()
        whole, self.partial = data[: end + 1], data[end + 1 :]
        self.offset += len(whole)
        if not any(hint in whole for hint in _HINTS):
            return Batch([], before, may_matter=False)  # counted by position only
        text = whole.decode("utf-8", errors="replace")
        return Batch([clip(line) for line in text.splitlines()], before)

    def position(self) -> Position:
        if self.ident is None:
            return {}
        return {"dev": self.ident[0], "inode": self.ident[1], "offset": self.offset}

    def note(self) -> str | None:
        return self._notes.pop(0) if self._notes else None

    def close(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None
