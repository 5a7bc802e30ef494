"""``nightowl sweep`` of node-health over recorded hosts, through the CLI's own run_sweep: one call shape for the
tests that read a sweep's report (its domains, its GPUs column), so they cannot drift on options."""

from __future__ import annotations

from pathlib import Path

from nightowl.cli.common import param_values
from nightowl.cli.exit import ExitStatus
from nightowl.cli.sweep_report import run_sweep
from nightowl.library import runbooks
from nightowl.transports.replay import ReplayTransport


def node_health_sweep(
    tmp_path: Path,
    recorded: dict[str, Path],
    fmt: str = "json",
    domains: dict[str, dict[str, str]] | None = None,
    forks: int = 4,
) -> ExitStatus:
    """Sweep node-health over ``recorded`` (host name -> its recorded folder), printing the report as ``fmt``
    (read it with capsys), the bundle under ``tmp_path/b``; ``domains``: each host's failure domains."""
    transports = {name: (lambda d=d, n=name: ReplayTransport(d, n)) for name, d in recorded.items()}
    return run_sweep(
        runbooks.load("node-health"),
        transports,
        param_values((), None),
        {"command_timeout": None, "host_timeout": None},
        fmt=fmt,
        textfile=None,
        log_format=None,
        out_dir=tmp_path / "b",
        forks=forks,
        domains=domains,
    )
