"""`nightowl mcp`: nightowl's read-only tools for LLM investigators, over the Model Context Protocol."""

from __future__ import annotations

import contextlib
import functools
import io
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from nightowl.cli.common import DEFAULT_OUT_HELP, HISTORY_OPTION, fail, out_option


@click.command("mcp")
@click.option(
    "--config",
    "config_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="YAML listing the live hosts `triage` may reach (`hosts:`) and how (known_hosts, ssh_config, "
    "identity, out); default: none, recorded hosts and bundles only",
)
@out_option(f"where triage writes bundles [default: the config's `out`, else {DEFAULT_OUT_HELP}]")
@HISTORY_OPTION
def mcp(config_path: Path | None, out_dir: Path | None) -> None:
    """Serve the Model Context Protocol on stdio: nightowl's read-only tools for LLM agents.

    \b
    Tools: list_runbooks, plan, triage (runbook; replay paths or allowed hosts; params),
    parse, explain_xid, read_bundle, history. Every answer names the bundle id and its
    sha256; verdicts are nightowl's. Invasive collectors never run, whatever is asked.
    Needs the SDK: pip install 'nightowl[mcp]'. Example client entry (docs/reference.md#mcp):
    {"command": "nightowl", "args": ["mcp", "--config", "mcp.yaml"]}
    """
    import importlib.util

    if importlib.util.find_spec("mcp") is None:
        fail("nightowl mcp needs the MCP SDK: pip install 'nightowl[mcp]'")
    from nightowl.cli.common import history_path, run_context, runbook_library
    from nightowl.mcp.config import ConfigError, load_config
    from nightowl.mcp.server import serve
    from nightowl.mcp.tools import Toolbox

    try:
        config = load_config(config_path)
    except ConfigError as exc:
        fail(str(exc))
    # the server's threads run outside this command's click context: what its options chose is handed in
    run = functools.partial(run_for_mcp, context=run_context())
    serve(Toolbox(run, config, out_dir, runbook_library(), history_path()))


def run_for_mcp(request: Any, context: Any = None) -> dict[str, Any]:
    """The one place the MCP server runs a runbook (a ``nightowl.mcp.hooks.RunRequest``), read-only.

    It runs as triage does (``nightowl.run.run_and_save`` through ``cli/running.run_or_exit``, whose
    refusals become tool errors). Invasive collectors are refused here, whatever the request says.
    """
    from nightowl.cli.exit import status_for
    from nightowl.cli.running import opener, replay_transports, run_or_exit

    with _cli_failures_as_tool_errors():
        transports = replay_transports(request.replays)
        if request.hosts:
            from nightowl.transports.ssh import SSHOptions

            ssh = SSHOptions(
                known_hosts=request.ssh.get("known_hosts"),
                ssh_config=request.ssh.get("ssh_config"),
                identity_files=tuple(request.ssh.get("identity_files") or ()),
                host_key_policy="strict",
            )
            for spec in request.hosts:
                transports[spec] = opener(spec, ssh)
        result = run_or_exit(
            request.loaded,
            transports,
            request.params,
            request.out_dir,
            allow_invasive=False,
            context=context,
            on_host_done=request.on_host_done,
        )
    told = result.outcome.as_json() if result.outcome is not None else None  # an agent's ask: origin "hand"
    summary = {**result.summary, "outcome": told}
    summary["exit_status"] = int(status_for(summary["hosts"]))
    return summary


@contextlib.contextmanager
def _cli_failures_as_tool_errors() -> Iterator[None]:
    """The run path refuses with ``fail`` (a message on stderr, then SystemExit): that message, as a
    ToolError. What this thread wrote to stderr is passed on afterwards, for the server's log.

    Only this thread's writes are captured (``_ThreadStderr``): a process-wide redirect needed a lock held for
    the whole run, so one run stuck for good (a FIFO for a policy file) held every later triage."""
    from nightowl.mcp.hooks import ToolError

    captured = io.StringIO()
    router = _ThreadStderr.install()
    router.capture(captured)
    try:
        yield
    except SystemExit as exc:
        lines = [line.removeprefix("nightowl: ") for line in captured.getvalue().splitlines() if line.strip()]
        raise ToolError("\n".join(lines) or f"the run was refused (exit {exc.code})") from None
    finally:
        router.capture(None)
        router.real.write(captured.getvalue())


class _ThreadStderr(io.TextIOBase):
    """``sys.stderr`` for the server: a thread that asked for it writes into its own buffer, any other thread to
    the real stderr."""

    _lock = threading.Lock()

    def __init__(self, real: Any) -> None:
        super().__init__()
        self.real = real
        self._local = threading.local()

    @classmethod
    def install(cls) -> _ThreadStderr:
        with cls._lock:
            if not isinstance(sys.stderr, cls):
                sys.stderr = cls(sys.stderr)
            return sys.stderr

    def capture(self, buffer: io.StringIO | None) -> None:
        self._local.buffer = buffer

    def _target(self) -> Any:
        buffer = getattr(self._local, "buffer", None)
        return self.real if buffer is None else buffer

    def write(self, text: str) -> int:
        return int(self._target().write(text))

    def flush(self) -> None:
        self._target().flush()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return str(getattr(self.real, "encoding", None) or "utf-8")

    def fileno(self) -> int:
        return int(self.real.fileno())

    def isatty(self) -> bool:
        return bool(self.real.isatty())

    def writable(self) -> bool:
        return True
