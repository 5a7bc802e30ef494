"""A log file followed as ``tail -F`` does: read to the end, then follow appends, a rename (logrotate's
create) and a truncation (copytruncate); a missing file is waited for.

Reads in chunks of at most ``CHUNK`` bytes and keeps no more than one unfinished line (cut at
``MAX_LINE_CHARS``), so memory stays flat whatever the line rate; a chunk with no message the kernel-log
parser reads is passed on without being split into lines.

A position is the file's device and inode, the offset, and a hash of the file's first bytes (up to
``HEAD_BYTES``, never past the offset). On start the saved file is found again and finished from the
offset before the file now at the path is read from its start, so what was written while the watch was
stopped is read whatever the rotation did: after a rename (logrotate's ``create``) it is the same inode
under ``PATH.1``, ``PATH.N`` or ``PATH-*`` (``dateext``); after ``copytruncate`` it is the copy there, whose
first bytes hash as saved. A file at the saved inode whose first bytes no longer hash as saved (truncated
and written again past the offset, or a new file on a reused inode) is never resumed inside: it is read
from its start (logrotate(8): ``create``, ``copytruncate``, ``dateext``; docs/reference.md#nightowl-watch).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
import time
from pathlib import Path

from nightowl.collectors.gpu import kernel_log
from nightowl.watch.source import MAX_LINE_CHARS, Batch, Position, clip

CHUNK = 256 * 1024
HEAD_BYTES = 4096  # the first bytes a position hashes: a kernel or syslog line starts with its time
MAX_ROTATED = 256  # names beside the file looked at for the saved one (PATH.1, PATH-20261206, ...)
_HINTS = tuple(hint.encode() for hint in kernel_log.MESSAGE_HINTS)  # tested on the bytes, before decoding


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _head_matches(fd: int, saved: Position) -> bool:
    """Whether the open file begins with the bytes the saved position hashed (True for a position saved
    before positions had a hash: nothing to tell it by)."""
    length, digest = saved.get("head_bytes"), saved.get("head_sha256")
    if not isinstance(length, int) or not isinstance(digest, str):
        return True
    return 0 <= length <= HEAD_BYTES and _digest(os.pread(fd, length, 0)) == digest


def rotated_names(path: Path) -> list[Path]:
    """Where logrotate leaves the file once at ``path``: ``PATH.1`` first, then ``PATH.N`` and ``PATH-*``
    (compressed ones are new files: never the saved one)."""
    pattern = re.compile(re.escape(path.name) + r"(\.\d+|-.+)")
    found: list[Path] = []
    with contextlib.suppress(OSError), os.scandir(path.parent) as entries:
        for entry in entries:
            if pattern.fullmatch(entry.name) and not entry.name.endswith((".gz", ".xz", ".bz2", ".zst")):
                found.append(path.parent / entry.name)
                if len(found) >= MAX_ROTATED:
                    break
    first = path.with_name(path.name + ".1")
    return sorted(found, key=lambda name: (name != first, name.name))


class FileSource:
    def __init__(self, path: Path, resume: Position | None = None, from_start: bool = False) -> None:
        self.path = path
        self.name = f"file:{path}"
        self.fd: int | None = None
        self.ident: tuple[int, int] | None = None  # (st_dev, st_ino) of the open file
        self.offset = 0  # bytes consumed up to the end of the last whole line
        self.partial = b""  # an unfinished last line
        self.head = b""  # the open file's first bytes (up to HEAD_BYTES), as read
        self._head_digest: tuple[int, str] | None = None
        self._notes: list[str] = []
        self._open(resume, from_start)

    # -- opening ------------------------------------------------------------------------------------
    def _open(self, resume: Position | None, from_start: bool) -> None:
        if resume and self._resume(resume):
            return
        if resume:
            # Rotated or truncated while nightowl was down, and the saved file is gone: none of this one was judged.
            self._notes.append(
                f"{self.path}: the file the saved position was in is gone (not at the path as it was, nor beside "
                f"it as {self.path.name}.1, .N or -*): what was written to it after the saved offset is not read; "
                f"{self.path} is read from its start"
            )
        self._open_current(from_start=from_start or bool(resume))

    def _open_current(self, from_start: bool) -> None:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return  # not there yet: followed when it appears (from its start, as tail -F does)
        self._adopt(fd, 0 if from_start else os.fstat(fd).st_size)

    def _adopt(self, fd: int, offset: int) -> None:
        st = os.fstat(fd)
        self.fd, self.ident, self.offset, self.partial = fd, (st.st_dev, st.st_ino), offset, b""
        self._set_head(os.pread(fd, min(offset, HEAD_BYTES), 0))
        os.lseek(fd, offset, os.SEEK_SET)

    def _resume(self, saved: Position) -> bool:
        """Open the file the saved position was in at its offset: the file at the path, else the one
        rotation left beside it (then the path's file is read from its start once it is finished)."""
        offset = saved.get("offset")
        if not isinstance(offset, int) or offset < 0:
            return False
        ident = (saved.get("dev"), saved.get("inode"))
        for candidate in [self.path, *rotated_names(self.path)]:
            fd = self._open_saved(candidate, ident, saved, by_content=candidate != self.path)
            if fd is None:
                continue
            self._adopt(fd, offset)
            if candidate != self.path:
                self._notes.append(
                    f"{self.path} was rotated while the watch was stopped: reading the rest of {candidate} "
                    f"from the saved offset {offset}, then {self.path} from its start"
                )
            return True
        return False

    @staticmethod
    def _open_saved(candidate: Path, ident: tuple[object, object], saved: Position, by_content: bool) -> int | None:
        """``candidate`` opened if it is the saved file: its inode (a rename), or beside the path its first
        bytes (copytruncate's copy), and it still begins as it did and reaches the offset."""
        try:
            st = os.stat(candidate)
        except OSError:
            return None
        same_inode = (st.st_dev, st.st_ino) == ident
        copy = by_content and int(saved.get("head_bytes") or 0) > 0
        if not (same_inode or copy) or st.st_size < saved["offset"]:
            return None
        try:
            fd = os.open(candidate, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError:
            return None
        if not _head_matches(fd, saved) or not os.path.samestat(st, os.fstat(fd)) or not _is_file(fd):
            os.close(fd)
            return None
        return fd

    def _set_head(self, head: bytes) -> None:
        self.head, self._head_digest = head, None

    def _grow_head(self, at: int, chunk: bytes) -> None:
        """Add to ``head`` what of ``chunk`` (read at offset ``at``) falls in the first HEAD_BYTES."""
        have = len(self.head)
        if have < HEAD_BYTES and at <= have < at + len(chunk):
            self._set_head(self.head + chunk[have - at : HEAD_BYTES - at])

    def _head_intact(self) -> bool:
        """Whether the open file still begins with the bytes read from it (one short read of at most
        HEAD_BYTES per chunk)."""
        assert self.fd is not None
        try:
            return not self.head or os.pread(self.fd, len(self.head), 0) == self.head
        except OSError:
            return True

    def _reopen_if_replaced(self) -> None:
        """At the end of the open file: follow the name to a new file, or start over after a truncation
        (one written past the offset again is seen by its first bytes, before any of it is read)."""
        try:
            st = os.stat(self.path)
        except OSError:
            return  # renamed away and not recreated yet: keep the old one
        if self.fd is None:
            self._open_current(from_start=True)
            return
        if (st.st_dev, st.st_ino) != self.ident:
            self._notes.append(f"{self.path} was rotated: following the new file")
            os.close(self.fd)
            self.fd, self.partial = None, b""
            self._open_current(from_start=True)
        elif st.st_size < self.offset + len(self.partial):
            self._start_over()

    def _start_over(self) -> None:
        """The open file was truncated (copytruncate): read it again from its start."""
        assert self.fd is not None
        self._notes.append(f"{self.path} was truncated: reading it from its start")
        self.offset, self.partial = 0, b""
        self._set_head(b"")
        os.lseek(self.fd, 0, os.SEEK_SET)

    # -- reading ------------------------------------------------------------------------------------
    def read(self, timeout: float) -> Batch | None:
        deadline = time.monotonic() + timeout
        while True:
            chunk = os.read(self.fd, CHUNK) if self.fd is not None else b""
            if chunk and not self._head_intact():  # truncated and written past the offset: never read inside
                self._start_over()
                continue
            if chunk:
                self._grow_head(self.offset + len(self.partial), chunk)
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
        length = min(self.offset, len(self.head))
        if self._head_digest is None or self._head_digest[0] != length:
            self._head_digest = (length, _digest(self.head[:length]))
        return {
            "dev": self.ident[0],
            "inode": self.ident[1],
            "offset": self.offset,
            "head_bytes": length,
            "head_sha256": self._head_digest[1],
        }

    def note(self) -> str | None:
        return self._notes.pop(0) if self._notes else None

    def close(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None


def _is_file(fd: int) -> bool:
    return stat.S_ISREG(os.fstat(fd).st_mode)
