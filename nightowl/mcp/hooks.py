"""The outside pieces the tools reach, each through one function here, so each can be re-pointed alone.

- Running a runbook: ``RunHook``, given to the server by ``nightowl/cli/mcp_cmd.py`` (``run_for_mcp``),
  because today's run path lives in the CLI (``cli/running.py``) and this package may not import the CLI
  (that would be an import cycle between the two folders).
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


# Runs the request with invasive collectors refused and returns the summary of `triage --format json`;
# raises ToolError with the run path's own message when it refuses.
RunHook = Callable[[RunRequest], dict[str, Any]]


def host_history(host: str, gpu: str | None, since: str | None) -> Any:
    """The events the history store holds for ``host``: the one call into ``nightowl.history``."""
    try:
        from nightowl import history  # type: ignore[attr-defined]
    except ImportError:
        raise ToolError("no history store in this build") from None
    query = getattr(history, "query", None)
    if query is None:
        raise ToolError("no history store in this build (nightowl.history has no query())")
    return query(host=host, gpu=gpu, since=since)
