"""The burst's lines as part of the run's kernel-log evidence.

The runbook's ``kernel-log`` collector reads the journal or dmesg as always; this transport adds to what
each of its commands printed the burst's lines when that output does not already hold them (a followed
file, or a record the journal has not stored yet), so the verdict rests on the lines that fired, and the
bundle's ``kernel-log.out`` holds them and replays as it ran. The ``.err`` beside it says how many were
added, and how many lines the burst did not keep (``Burst.dropped_note``). A command that failed keeps
its exit status; its output is then the burst's lines alone.

Lines are compared by their message (from the kernel-log parser's anchor on): a kmsg record and the
journal's line of the same message differ only in their time stamps, and adding it twice would count
one Xid twice.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from nightowl.collectors.gpu import kernel_log
from nightowl.transports.base import CommandResult, Transport

KERNEL_LOG = "kernel-log"


def _message(line: str) -> str | None:
    start = kernel_log.message_start(line)
    return line[start:].rstrip() if start >= 0 else None


def missing_lines(output: str, lines: Sequence[str]) -> list[str]:
    """The burst lines to add to ``output``: none when it holds every message of the burst, else the
    lines whose message it lacks, with the burst's other lines (AER detail lines carry no message)."""
    have = {message for line in output.splitlines() if (message := _message(line)) is not None}
    wanted = [(line, _message(line)) for line in lines if line.strip()]
    if all(message in have for _, message in wanted if message is not None):
        return []
    return [line for line, message in wanted if message is None or message not in have]


class BurstTransport:
    """Wraps a host's transport for one run; only ``kernel-log`` results change."""

    def __init__(self, inner: Transport, lines: Sequence[str], source: str, dropped: str | None = None) -> None:
        self.inner = inner
        self.lines = [line.encode("utf-8", "replace").decode("utf-8") for line in lines]
        self.source = source
        self.dropped = dropped or ""  # what the burst did not keep, said in the .err beside the output

    @property
    def host(self) -> str:
        return self.inner.host

    @host.setter
    def host(self, name: str) -> None:
        self.inner.host = name

    def connect(self) -> None:
        self.inner.connect()

    def close(self) -> None:
        self.inner.close()

    def run(self, argv: Sequence[str], timeout: float, kind: str | None = None) -> CommandResult:
        result = self.inner.run(argv, timeout, kind)
        if kind != KERNEL_LOG or not self.lines:
            return result
        stdout = result.stdout if result.ok else ""
        added = missing_lines(stdout, self.lines)
        if not added:
            return dataclasses.replace(result, stderr=result.stderr + self.dropped) if self.dropped else result
        joined = stdout + ("" if not stdout or stdout.endswith("\n") else "\n") + "\n".join(added) + "\n"
        note = f"nightowl watch: {len(added)} lines of the burst read from {self.source} added to this output\n"
        return dataclasses.replace(result, stdout=joined, stderr=result.stderr + note + self.dropped)
