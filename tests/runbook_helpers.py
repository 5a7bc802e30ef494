"""Run a built-in runbook on recorded-host folders made in a test (composed inputs, labelled as such)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nightowl.transports.base import CommandResult
from nightowl.transports.replay import ReplayTransport


class RecordingReplay(ReplayTransport):
    """A replayed host that also remembers every argv the engine asked it to run."""

    def __init__(self, directory: Path, host: str, ran: list[tuple[str, ...]]) -> None:
        super().__init__(directory, host)
        self.ran = ran

    def run(self, argv: Sequence[str], timeout: float, kind: str | None = None) -> CommandResult:
        self.ran.append(tuple(argv))
        return super().run(argv, timeout, kind)


def run_runbook_on(
    runbook_id: str, transports: dict[str, Any], params: dict[str, Any] | None = None, allow_invasive: bool = False
) -> list[Any]:
    """Run a built-in runbook on the given transports (bundle in a temporary folder); the host runs."""
    import tempfile

    from nightowl.collectors import get_collector
    from nightowl.engine.runner import RunOptions
    from nightowl.engine.session import run_runbook
    from nightowl.library import runbooks

    loaded = runbooks.load(runbook_id)
    options = RunOptions(params=loaded.resolve_params(params), allow_invasive=allow_invasive)
    with tempfile.TemporaryDirectory() as out:
        runs, _ = run_runbook(loaded, transports, get_collector, options, Path(out))
    return runs


def make_host(root: Path, name: str, files: dict[str, str]) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    for filename, text in files.items():
        (folder / filename).write_text(text)
    return folder


def run_on(runbook_id: str, folder: Path, params: dict[str, Any] | None = None) -> tuple[dict, list[str]]:
    """(verdict, path) of one run on a recorded host folder."""

    runs = run_runbook_on(runbook_id, {folder.name: lambda: ReplayTransport(folder, folder.name)}, params)
    return runs[0].verdict or {}, list(runs[0].path)
