"""Exit status (docs/reference.md#exit-status), as an enum after httpie's ExitStatus."""

from __future__ import annotations

import sys
from enum import IntEnum
from typing import Any, NoReturn

import click


class ExitStatus(IntEnum):
    OK = 0  # ran; no host needs action
    ACTION_NEEDED = 1  # ran; at least one host needs action
    USAGE = 2  # usage or input error (bad option, invalid runbook, unreadable file)
    NO_VERDICT = 3  # ran, but a host got no verdict and none needs action
    SOFTWARE = 70  # internal error (a bug), as sysexits.h EX_SOFTWARE; never 1, which means "act on a host"
    INTERRUPTED = 130  # interrupted (SIGINT); what was collected is saved and marked partial
    TERMINATED = 143  # terminated (SIGTERM); saved and marked partial, as for 130


# What each status means, as docs/reference.md#exit-status states it (generated from here by
# nightowl/docgen.py); `--help` says the same in short (EXIT_HELP).
MEANINGS: dict[ExitStatus, str] = {
    ExitStatus.OK: "ran; no host needs action",
    ExitStatus.ACTION_NEEDED: "ran; at least one host needs action (a verdict whose action is not `none`)",
    ExitStatus.USAGE: "usage or input error: bad option, invalid runbook (the message names file and line), "
    "unreadable file, a parameter a collector cannot use (an unreadable `xid_policy`, also when an alert's rule "
    "gives it)",
    ExitStatus.NO_VERDICT: "ran, but at least one host got no verdict (unreachable, every collector failed, a rule "
    "that could not be evaluated, evidence too thin to judge: a `cannot_judge` node) and none needs action",
    ExitStatus.SOFTWARE: "internal error (a bug): one line says so and where the traceback and the partial bundle "
    "were saved (as sysexits.h EX_SOFTWARE; never 1, which means act on a host)",
    ExitStatus.INTERRUPTED: "interrupted (SIGINT, Ctrl-C): what was collected so far is saved and marked partial; the "
    "command a signal cut is in the manifest with its elapsed time, and a second signal never cuts the save",
    ExitStatus.TERMINATED: "terminated (SIGTERM, as Kubernetes, Slurm and systemd stop programs): saved and marked "
    "partial as for 130",
}

EXIT_HELP = """\b
Exit status:
  0    ran; no host needs action
  1    ran; at least one host needs action
  2    usage or input error (bad option, invalid runbook, unreadable file)
  3    ran, but at least one host got no verdict and none needs action
  70   internal error (a bug): the traceback and partial bundle are saved
  130  interrupted (SIGINT, Ctrl-C); the partial bundle is saved
  143  terminated (SIGTERM, as Kubernetes, Slurm and systemd stop programs); the partial bundle is saved"""


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


def report_crash(exc: BaseException) -> NoReturn:
    """One line on stderr: it is a bug, where the traceback (and any partial bundle) went; exit 70."""
    import tempfile
    import time
    import traceback
    from pathlib import Path

    where = "not saved"
    try:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        path = Path(tempfile.gettempdir()) / f"nightowl-crash-{stamp}-{__import__('os').getpid()}.txt"
        from nightowl.engine.private_files import write_private  # tracebacks can hold collected output: 0600

        write_private(path, "".join(traceback.format_exception(exc)))
        where = str(path)
    except OSError as error:
        where = f"not saved ({error})"
    bundle = getattr(exc, "partial_bundle", None)
    tail = f"; partial bundle at {bundle}" if bundle else ""
    click.echo(
        f"nightowl: internal error (a bug, please report it): {type(exc).__name__}: {exc}; "
        f"traceback saved to {where}{tail}",
        err=True,
    )
    sys.exit(int(ExitStatus.SOFTWARE))


SIGPIPE_STATUS = 141  # 128 + SIGPIPE: what a shell reports for `yes | head -1`'s writer


def reader_went_away() -> NoReturn:
    """stdout's reader closed it (``nightowl bundles | head -1``): not a bug, nothing more to say.
    stdout is pointed at /dev/null so the interpreter's last flush cannot raise again."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    sys.exit(SIGPIPE_STATUS)


class GuardedGroup(click.Group):
    """The command group: an unexpected exception exits 70 with one line, never a bare traceback or 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except BrokenPipeError:
            reader_went_away()
        except Exception as exc:  # noqa: BLE001 - the last line of defence
            report_crash(exc)
