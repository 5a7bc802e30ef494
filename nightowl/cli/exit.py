"""Exit status (docs/reference.md#exit-status), as an enum after httpie's ExitStatus."""

from __future__ import annotations

import sys
from enum import IntEnum
from typing import NoReturn


class ExitStatus(IntEnum):
    OK = 0  # ran; no host needs action
    ACTION_NEEDED = 1  # ran; at least one host needs action
    USAGE = 2  # usage or input error (bad option, invalid runbook, unreadable file)
    NO_VERDICT = 3  # ran, but a host got no verdict and none needs action
    INTERRUPTED = 130  # interrupted; what was collected is saved and marked partial


EXIT_HELP = """\b
Exit status:
  0    ran; no host needs action
  1    ran; at least one host needs action
  2    usage or input error (bad option, invalid runbook, unreadable file)
  3    ran, but at least one host got no verdict and none needs action
  130  interrupted; the partial bundle is saved"""


def fail(message: str, status: ExitStatus = ExitStatus.USAGE) -> NoReturn:
    """Print ``nightowl: message`` on stderr and exit (2 unless told otherwise)."""
    import click

    click.echo(f"nightowl: {message}", err=True)
    sys.exit(int(status))


def status_for(hosts: list[dict]) -> ExitStatus:
    """From the per-host entries of a run (status, verdict)."""
    if any(h.get("verdict") and h["verdict"].get("action") != "none" for h in hosts):
        return ExitStatus.ACTION_NEEDED
    if any(not h.get("verdict") for h in hosts):
        return ExitStatus.NO_VERDICT
    return ExitStatus.OK
