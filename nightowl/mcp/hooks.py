"""The outside pieces the tools reach, each through one function here, so each can be re-pointed alone.

- Running a runbook: ``RunHook``, given to the server by ``nightowl/cli/mcp_cmd.py`` (``run_for_mcp``,
  through ``nightowl.run.run_and_save`` as triage runs); the CLI turns the run path's refusals into
  tool errors, and this package may not import the CLI (an import cycle between the two folders).
- The history of a host: ``host_history`` below.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class ToolError(Exception):
    """A refusal or failure, sent back as a tool error (``isError``) carrying this message."""


@dataclass(frozen=True)
class RunRequest:
    """One read-only run: a validated runbook on recorded hosts (``replays``) and allowed live ``hosts``.

    ``params`` are the model's values, already checked against the runbook's declared types.
    ``on_host_done`` is called (from the engine's threads) as each host finishes.
    """

    loaded: Any
    replays: tuple[Path, ...]
    hosts: tuple[str, ...]
    params: dict[str, Any]
    out_dir: Path
    ssh: dict[str, Any] = field(default_factory=dict)
    on_host_done: Callable[[Any], None] | None = None


# Runs the request with invasive collectors refused and returns the summary of `triage --format json`, with
# the run's Outcome as JSON under `outcome` (nightowl/outcome.py: its bundle's id and sha256 among it);
# raises ToolError with the run path's own message when it refuses.
RunHook = Callable[[RunRequest], dict[str, Any]]


def host_history(host: str, gpu: str | None, since: str | None, path: Path | None = None) -> Any:
    """The timeline the history store ``path`` (the server's command chose it) holds for ``host``
    (docs/reference.md#history): the one call into it."""
    try:
        from nightowl.history import StoreError, query
    except ImportError:
        raise ToolError("no history store in this build") from None
    from nightowl.ages import parse_age

    seconds = None
    if since is not None:
        seconds = parse_age(since)
        if seconds is None:
            raise ToolError(f"since {since!r}: expected an age such as 90m, 24h or 30d")
    if path is None:
        raise ToolError("history is off for this server (--history off)")
    try:
        return {"store": str(path), "timeline": query.timeline(path, host, gpu, seconds)}
    except StoreError as exc:
        raise ToolError(f"history store unreadable (no history): {exc}") from None
