"""``journalctl -k -f -o json``: the kernel log through journald, resumed by its cursor.

Each entry becomes the line ``journalctl -o short-iso`` would print (``2024-06-01T10:00:00+0000 host
kernel: NVRM: Xid ...``), which the kernel-log parser reads. With no saved cursor it follows from after
the newest entry (whose cursor it asks for first), so the position is known from the start. When
journalctl exits (journald restarted, the journal rotated away under it) it is started again after the
last cursor read, with a growing pause. Lines are read from its pipe as they come and cut at
``MAX_LINE_CHARS``; the pipe holds the rest. journalctl runs in its own session: a Ctrl-C or a signal to
the watcher's process group stops the watcher, which then ends journalctl itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import time
from datetime import datetime, timezone
from typing import Any

from nightowl.collectors.gpu import kernel_log
from nightowl.watch.source import MAX_LINE_CHARS, Batch, Position, clip

BATCH_ENTRIES = 512
RESTART_PAUSE = (1.0, 30.0)  # first and longest pause before journalctl is started again


def entry_line(entry: dict[str, Any]) -> str | None:
    """The short-iso line of one journal entry, None for one without a message."""
    message = entry.get("MESSAGE")
    if isinstance(message, list):  # journald gives a message that is not UTF-8 as a list of bytes
        message = bytes(b for b in message if isinstance(b, int) and 0 <= b < 256).decode("utf-8", "replace")
    if not isinstance(message, str):
        return None
    try:
        micros = int(entry.get("__REALTIME_TIMESTAMP") or 0)
    except ValueError:
        micros = 0
    stamp = datetime.fromtimestamp(micros / 1e6, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S+0000")
    host = entry.get("_HOSTNAME") or "localhost"
    return f"{stamp} {host} kernel: {message}"


class JournalSource:
    name = "journal"

    def __init__(self, resume: Position | None = None, journalctl: str = "journalctl") -> None:
        self.journalctl = journalctl
        self.cursor: str | None = (resume or {}).get("cursor")
        self.proc: subprocess.Popen[bytes] | None = None
        self.buffer = b""
        self.pause = RESTART_PAUSE[0]
        self.next_start = 0.0
        self._notes: list[str] = []
        if self.cursor is None:
            self.cursor = self._last_cursor()
        self._start()

    def _last_cursor(self) -> str | None:
        """The cursor of the newest kernel entry, so the position is known before the first new one (a
        burst in the first entries is then held, and judged again after a restart, like any other)."""
        argv = [self.journalctl, "-k", "-n", "1", "-o", "json", "--no-pager"]
        try:
            out = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            return None
        for raw in reversed(out.splitlines()):
            try:
                entry = json.loads(raw)
            except ValueError:
                continue
            if isinstance(entry, dict) and isinstance(entry.get("__CURSOR"), str):
                return str(entry["__CURSOR"])
        return None

    def _argv(self) -> list[str]:
        argv = [self.journalctl, "-k", "-f", "-o", "json", "--no-pager"]
        return [*argv, f"--after-cursor={self.cursor}"] if self.cursor else [*argv, "-n", "0"]

    def _start(self) -> None:
        try:
            self.proc = subprocess.Popen(
                self._argv(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as exc:
            self.proc = None
            self._notes.append(f"cannot start journalctl: {exc}")
            self.next_start = time.monotonic() + self.pause
            return
        assert self.proc.stdout is not None
        os.set_blocking(self.proc.stdout.fileno(), False)

    def _restart_later(self, why: str) -> None:
        self._notes.append(f"journalctl ended ({why}); starting it again in {self.pause:.0f}s")
        if self.proc is not None:
            with contextlib.suppress(Exception):
                self.proc.kill()
                self.proc.wait(timeout=1)
        self.proc, self.buffer = None, b""
        self.next_start = time.monotonic() + self.pause
        self.pause = min(self.pause * 2, RESTART_PAUSE[1])

    def read(self, timeout: float) -> Batch | None:
        if self.proc is None:
            if time.monotonic() < self.next_start:
                time.sleep(min(timeout, max(0.0, self.next_start - time.monotonic())))
                return None
            self._start()
            if self.proc is None:
                return None
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        before = self.position()
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            return None
        lines: list[str] = []
        while len(lines) < BATCH_ENTRIES:
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                break
            if not chunk:
                self._restart_later(f"exit {self.proc.poll()}")
                break
            self.pause = RESTART_PAUSE[0]
            lines.extend(self._entries(chunk))
        if not lines:
            return None
        return Batch(lines, before, may_matter=kernel_log.may_hold_message("\n".join(lines)))

    def _entries(self, chunk: bytes) -> list[str]:
        data = self.buffer + chunk
        *whole, self.buffer = data.split(b"\n")
        if len(self.buffer) > 4 * MAX_LINE_CHARS:  # an entry too big to be a kernel line: dropped
            self.buffer = b""
        lines = []
        for raw in whole:
            try:
                entry = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(entry, dict):
                continue
            self.cursor = entry.get("__CURSOR") or self.cursor
            line = entry_line(entry)
            if line is not None:
                lines.append(clip(line))
        return lines

    def position(self) -> Position:
        return {"cursor": self.cursor} if self.cursor else {}

    def note(self) -> str | None:
        return self._notes.pop(0) if self._notes else None

    def close(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(Exception):
                self.proc.kill()
                self.proc.wait(timeout=1)
            self.proc = None
