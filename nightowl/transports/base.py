"""The one interface every transport (local, ssh, replay, http) implements."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class CommandResult:
    """What running one argv on one host produced.

    ``rc`` is None when the command never produced an exit status (timed out,
    could not be started, transport failure); ``error`` then says why.
    """

    argv: tuple[str, ...]
    rc: int | None
    stdout: str
    stderr: str
    started: float  # epoch seconds
    duration: float  # seconds
    timed_out: bool = False
    error: str | None = None
    stdout_truncated_bytes: int = 0
    extra: dict[str, str] = field(default_factory=dict)
    # Set when nightowl itself was behind: the command's deadline passed before nightowl had read what
    # the host had already sent (the command ended by itself on the host, or its output was waiting
    # unread). The output says nothing about the host then; the text says what was read (late_note).
    late: str | None = None

    @property
    def ok(self) -> bool:
        return self.rc == 0 and not self.timed_out and self.error is None and self.late is None

    @property
    def host_seconds(self) -> float | None:
        """The command's own time by the host's clock where a batch read it (``extra["host_seconds"]``:
        transports/batch.py), or None (not batched, or the clock could not be read)."""
        try:
            return float(self.extra["host_seconds"])
        except (KeyError, ValueError):
            return None


# How one CommandResult is kept on disk, in a recorded host and in a bundle's hosts/<host>/ (docs/reference.md
# #recorded-hosts-and-bundles): ``<kind>.out`` and, each only when it says something, the files beside it.
# Named here, under the engine, so the replay transport reads what engine/layout.py names for bundles.
OUT, ERR, RC, TIMEOUT, TRUNCATED, LATE = ".out", ".err", ".rc", ".timeout", ".truncated", ".late"
UNREACHABLE = "unreachable"  # a recorded host that could not be reached: this file, holding the reason


# coreutils ``timeout`` exits 124 when it stopped the command (137 when it had to SIGKILL it): the
# command ran long on the host itself.
REMOTE_TIMEOUT_EXITS = (124, 137)


def late_note(read_by_deadline: int, total: int, seconds: float, more: bool = False) -> str:
    """Why a late output cannot be judged: how much nightowl had read by the deadline, of how much."""
    of = f"at least {total}" if more else str(total)
    return f"nightowl was overloaded (read {read_by_deadline} of {of} bytes in {seconds:.1f} s)"


class TransportError(Exception):
    """The host itself cannot be reached (refused, timed out, auth, host key).

    Raised by ``connect``; a transport that raised it is ``unreachable`` for the
    rest of the run.
    """


class Transport(Protocol):
    """Runs argv lists on one host. Never raises for a failing command."""

    host: str

    def connect(self) -> None:
        """Open the connection (no-op for local/replay); raise TransportError."""

    def run(self, argv: Sequence[str], timeout: float, kind: str | None = None) -> CommandResult:
        """Run one argv with a deadline. ``kind`` names the collector (replay uses it)."""

    def close(self) -> None:
        """Release the connection."""


def is_recorded(transport: object) -> bool:
    """Whether ``transport`` hands out a recording (replay, a host recorded unreachable): one take per kind,
    no fallback commands, and a capture time that is the replay's, not the incident's."""
    return bool(getattr(transport, "recorded", False))


class Unreachable:
    """A host known to be unreachable before any connection: a spec no transport could be built for, or a
    host a bundle recorded as unreachable (``recorded``: replayed, so no fallback commands are tried).
    ``connect`` raises the reason, so the run reports the host ``unreachable`` with it."""

    def __init__(self, host: str, reason: str, recorded: bool = False) -> None:
        self.host = host
        self.reason = reason or "unreachable"
        self.recorded = recorded

    def connect(self) -> None:
        raise TransportError(self.reason)

    def run(self, argv: Sequence[str], timeout: float, kind: str | None = None) -> CommandResult:
        raise TransportError(self.reason)

    def close(self) -> None:
        return None
