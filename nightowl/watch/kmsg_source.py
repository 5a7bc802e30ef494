"""``/dev/kmsg``: the kernel's record stream, one record per read (Documentation/ABI/testing/dev-kmsg).

A record is ``prio,seq,usec,flags;message`` and, on continuation lines starting with a blank, its
dictionary (``SUBSYSTEM=pci``); the kernel-log parser reads the first line as it is. The position is the
boot id and the last sequence number read: on a restart in the same boot the records up to it are
skipped; with no saved position the watch starts at the current end (the backlog is read through, not
judged, to learn its last number). A reader that falls behind the
ring buffer gets ``EPIPE`` once, and the next read returns the oldest record still there: the records
lost are counted (from the gap in sequence numbers) and reading goes on.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
from collections.abc import Callable
from pathlib import Path

from nightowl.collectors.gpu import kernel_log
from nightowl.watch.source import Batch, Position, clip

KMSG = Path("/dev/kmsg")
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
RECORD_BYTES = 8192  # a read gets one whole record; the kernel caps one at about 8 KB (CONSOLE_EXT_LOG_MAX)
BATCH_RECORDS = 512


def boot_id() -> str | None:
    try:
        return BOOT_ID.read_text().strip()
    except OSError:
        return None


class KmsgSource:
    name = "kmsg"

    def __init__(
        self,
        resume: Position | None = None,
        path: Path = KMSG,
        current_boot: Callable[[], str | None] = boot_id,
    ) -> None:
        self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        self.boot = current_boot()
        self.seq: int | None = None
        self.skip_to: int | None = None
        self.lost = 0
        self._notes: list[str] = []
        if resume and resume.get("boot_id") == self.boot and isinstance(resume.get("seq"), int):
            self.skip_to = resume["seq"]  # read from the oldest record, skip what was judged
            self.seq = resume["seq"]
        elif resume and resume.get("boot_id") != self.boot:
            # Another boot: nothing of this one was judged, so read it from the oldest record kept.
            self._notes.append("the saved position is of another boot: reading this boot's kernel log from its start")
        else:
            self._skip_backlog()

    def _skip_backlog(self) -> None:
        """Start at the current end, knowing the last record's number (SEEK_END would not tell it), so a
        restart soon after resumes exactly there."""
        while True:
            try:
                record = self._read_record()
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno in (errno.EPIPE, errno.EINTR):
                    continue
                raise
            fields = record.split(b",", 2)
            if len(fields) > 1 and fields[1].isdigit():
                self.seq = int(fields[1])

    def read(self, timeout: float) -> Batch | None:
        before = self.position()
        lines: list[str] = []
        waited = False
        while len(lines) < BATCH_RECORDS:
            try:
                record = self._read_record()
            except BlockingIOError:
                if lines or waited:
                    break
                ready, _, _ = select.select([self.fd], [], [], timeout)
                waited = True
                if not ready:
                    break
                continue
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # overrun: records were overwritten before we read them
                    self._notes.append("kernel log overrun (EPIPE): some records were overwritten before read")
                    continue
                if exc.errno == errno.EINTR:
                    continue
                raise
            line = self._line(record)
            if line is not None:
                lines.append(line)
        if not lines:
            return None
        text = "\n".join(lines)
        return Batch(lines, before, may_matter=kernel_log.may_hold_message(text))

    def _read_record(self) -> bytes:
        return os.read(self.fd, RECORD_BYTES)

    def _line(self, record: bytes) -> str | None:
        head, _, _ = record.partition(b"\n")  # the dictionary lines after it are not the message
        fields = head.split(b",", 3)
        try:
            seq = int(fields[1])
        except (IndexError, ValueError):
            return None
        if self.skip_to is not None:
            if seq <= self.skip_to:
                return None
            self.skip_to = None
        if self.seq is not None and seq > self.seq + 1:
            self.lost += seq - self.seq - 1
        self.seq = seq
        return clip(head.decode("utf-8", errors="replace"))

    def position(self) -> Position:
        return {"boot_id": self.boot, "seq": self.seq}

    def note(self) -> str | None:
        return self._notes.pop(0) if self._notes else None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)
