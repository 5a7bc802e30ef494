"""What a followed kernel log gives the watcher: batches of lines, each with where to resume to read it again.

Three sources implement it: a file followed across rotation (``file_source``), ``/dev/kmsg``
(``kmsg_source``) and ``journalctl -k -f`` (``journal_source``). A position is a small JSON-able dict the
source alone reads back (an inode and offset, a boot id and sequence number, a journal cursor), saved in
the state dir so a restart resumes where the last judged line ended.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

Position = dict[str, Any]

MAX_LINE_CHARS = 16 * 1024  # a longer line is cut here: a runaway writer cannot grow the watcher


@dataclass(frozen=True)
class Batch:
    """Lines read together, in order; ``before`` is the position to resume at to read them again."""

    lines: list[str]
    before: Position
    # Whether any line may hold a message the kernel-log parser reads (False: skip the batch at once).
    may_matter: bool = True


class Source(Protocol):
    name: str  # "file:/var/log/kern.log", "kmsg", "journal"

    def read(self, timeout: float) -> Batch | None:
        """The next lines, waiting at most ``timeout`` seconds; None when nothing came."""

    def position(self) -> Position:
        """Where the lines returned so far end."""

    def note(self) -> str | None:
        """Something worth logging that happened while reading (an overrun, a rotation), once."""

    def close(self) -> None: ...


def clip(line: str) -> str:
    return line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS]
