"""`nightowl demo`: the xid runbook on a bundled recorded incident."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from nightowl.cli.common import FORMAT_OPTION, OUT_OPTION, VERBOSE_OPTION, fail, load_runbook_or_exit
from nightowl.cli.reporting import run_and_report


@click.command()
@FORMAT_OPTION
@VERBOSE_OPTION
@OUT_OPTION
@click.option(
    "--case",
    default="xid79-fallen-off-bus",
    show_default=True,
    help="which bundled recorded host to replay (see fixtures/hosts/)",
)
def demo(fmt: str, verbose: bool, out_dir: Path | None, case: str) -> None:
    """Run the xid runbook on a bundled recorded incident host.

    The host is a real incident from a public bug report: a GPU that fell off the
    bus (Xid 79) and an nvidia-smi that can no longer read it. Prints the verdict,
    why, the first action and the bundle path.
    """
    from nightowl.paths import data_dir

    host_dir = data_dir("fixtures") / "hosts" / case
    if not case or "/" in case or not host_dir.is_dir():
        cases = ", ".join(sorted(p.name for p in host_dir.parent.iterdir() if p.is_dir()))
        fail(f"no recorded case {case!r}; cases: {cases}")
    loaded = load_runbook_or_exit("xid")
    from nightowl.transports.replay import ReplayTransport

    transports = {case: lambda: ReplayTransport(host_dir, case)}
    sys.exit(int(run_and_report(loaded, transports, {}, fmt, out_dir, allow_invasive=False, verbose=verbose)))
