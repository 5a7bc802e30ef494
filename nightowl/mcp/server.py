"""The stdio MCP server: nightowl's tools (tools.py) served with the official ``mcp`` SDK.

The SDK is imported here only, when ``nightowl mcp`` starts. Tools run in a thread of their own (the engine
is synchronous); a triage reports progress as each host finishes. A refusal is a tool error (``isError``)
carrying nightowl's message, so the model can read it and correct its call. A call that is not done within
the config's ``tool_timeout`` answers an error and frees its caller; its thread is a daemon, left to finish,
never holding the server. When the client closes stdin (the MCP stdio shutdown) the server stops serving at
once and exits, stuck threads or not (issue "trust, round four", item 8). Every answer and error text goes
through the bundle scrubber.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import threading
import traceback
from collections.abc import AsyncIterator, Callable
from typing import IO, Any, TypeVar

from nightowl import __version__
from nightowl.mcp.front import Front
from nightowl.mcp.hooks import ToolError
from nightowl.mcp.tools import Toolbox, scrubbed

T = TypeVar("T")
TOOL_THREAD = "nightowl-mcp-tool-"  # the name of a tool call's thread, then the tool's

INSTRUCTIONS = (
    "nightowl triages GPU servers with read-only runbooks. Verdicts are nightowl's, decided from hashed "
    "evidence: cite the bundle_id and bundle_sha256 of every answer, and the evidence's source files."
)
# Tools that may reach live hosts talk to the world outside the server; the rest read what they are given.
OPEN_WORLD = frozenset({"triage"})


SERVER_INFO = {
    "capabilities": {"tools": {"listChanged": False}},
    "instructions": INSTRUCTIONS,
    "serverInfo": {"name": "nightowl", "version": __version__},
}


def tool_listing(toolbox: Toolbox) -> list[dict[str, Any]]:
    """The ``tools/list`` entries as JSON: the one listing both the front and the SDK serve."""
    return [
        {
            "name": tool.name,
            "description": tool.description,
            "inputSchema": tool.input_schema,
            "annotations": {
                "readOnlyHint": True,
                "destructiveHint": False,
                "idempotentHint": tool.name not in OPEN_WORLD,
                "openWorldHint": tool.name in OPEN_WORLD,
            },
        }
        for tool in toolbox.tools().values()
    ]


def serve(toolbox: Toolbox) -> None:
    """Serve ``toolbox`` on stdin/stdout until the client closes the connection."""
    wire_in, wire_out = _claim_stdio()
    replay: list[bytes] = []
    answered_handshake: Any = None
    if os.environ.get("NIGHTOWL_MCP_FRONT", "1") != "0":
        listing = tool_listing(toolbox)  # before the SDK import starts competing for the CPU
        ready = threading.Event()
        loader = threading.Thread(target=_import_sdk, args=(ready,), name="mcp-sdk-import", daemon=True)
        loader.start()
        front = Front(wire_in, wire_out, SERVER_INFO, lambda: listing, ready)
        replay, ended = front.run()
        if ended:
            return
        loader.join()
        answered_handshake = front.handshake_id
    import anyio

    anyio.run(_serve, toolbox, wire_in, wire_out, replay, answered_handshake)
    _exit_past_stuck_threads(wire_out)


def _exit_past_stuck_threads(wire_out: IO[bytes]) -> None:
    """The client is gone: exit now, after flushing what was written, if a tool's work still runs. Interpreter
    shutdown would wait for it: it joins every thread not a daemon, and every concurrent.futures pool thread
    (the engine's), daemon or not; a tool's own thread is where such pools start."""
    main = threading.main_thread()
    running = [t for t in threading.enumerate() if t is not main and t.is_alive()]
    if any(not t.daemon or t.name.startswith(TOOL_THREAD) for t in running):
        for stream in (wire_out, sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(0)


def _claim_stdio() -> tuple[IO[bytes], IO[bytes]]:
    """The wire on private descriptors; fd 0 reads the null device and fd 1 writes to stderr, so nothing
    the engine or a collector prints can corrupt the protocol (as the SDK's own stdio transport does)."""
    wire_in = os.fdopen(os.dup(0), "rb")
    wire_out = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    return wire_in, wire_out


def _import_sdk(ready: threading.Event) -> None:
    try:
        import mcp.server.lowlevel  # noqa: F401
        import mcp.server.stdio  # noqa: F401
    finally:
        ready.set()


async def _serve(toolbox: Toolbox, wire_in: IO[bytes], wire_out: IO[bytes], replay: list[bytes], answered: Any) -> None:
    import anyio
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    server: Server[Any] = Server(
        "nightowl",
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=lambda ctx, params: _list_tools(toolbox),
        on_call_tool=lambda ctx, params: _call_tool(toolbox, ctx, params),
    )
    ended = anyio.Event()
    wire = anyio.wrap_file(io.TextIOWrapper(wire_in, encoding="utf-8", errors="replace"))
    reader = _Replaying(replay, wire, ended)
    writer = _Writer(wire_out, answered)
    async with anyio.create_task_group() as group:

        async def stop_at_end_of_input() -> None:
            # stdin closed (the MCP stdio shutdown): the client is gone, nobody reads the answers of the calls
            # still running, so they are not waited for
            await ended.wait()
            group.cancel_scope.cancel()

        group.start_soon(stop_at_end_of_input)
        async with stdio_server(stdin=reader, stdout=writer) as (read_stream, write_stream):  # type: ignore[arg-type]
            await server.run(read_stream, write_stream, server.create_initialization_options())
        group.cancel_scope.cancel()


class _Replaying:
    """The lines the front read for the SDK to see (the handshake, the first message it did not answer),
    then the wire; ``ended`` is set when the wire ends."""

    def __init__(self, first: list[bytes], rest: Any, ended: Any) -> None:
        self._first = first
        self._rest = rest
        self._ended = ended

    async def __aiter__(self) -> AsyncIterator[str]:
        for line in self._first:
            yield line.decode("utf-8", "replace")
        async for line in self._rest:
            yield line
        self._ended.set()


class _Writer:
    """The wire, minus the SDK's answer to the handshake the front already answered."""

    def __init__(self, wire_out: IO[bytes], answered: Any) -> None:
        self._out = wire_out
        self._drop = answered

    async def write(self, text: str) -> None:
        import anyio.to_thread

        if self._drop is not None:
            with contextlib.suppress(ValueError):
                message = json.loads(text)
                if message.get("id") == self._drop and ("result" in message or "error" in message):
                    self._drop = None
                    return
        await anyio.to_thread.run_sync(self._out.write, text.encode())

    async def flush(self) -> None:
        import anyio.to_thread

        await anyio.to_thread.run_sync(self._out.flush)


async def _list_tools(toolbox: Toolbox) -> Any:
    import mcp.types as types

    return types.ListToolsResult(tools=[types.Tool.model_validate(entry) for entry in tool_listing(toolbox)])


async def _call_tool(toolbox: Toolbox, ctx: Any, params: Any) -> Any:
    import anyio.from_thread
    import anyio.lowlevel
    import mcp.types as types

    token = anyio.lowlevel.current_token()

    def progress(done: float, total: float | None, message: str | None) -> None:
        # Called from the tool's thread or the engine's host threads: back to the event loop. Progress is
        # a courtesy; a failure to send it must not fail the run.
        with contextlib.suppress(Exception):
            anyio.from_thread.run(ctx.session.report_progress, done, total, message, token=token)

    def error(text: str) -> Any:
        return types.CallToolResult(content=[types.TextContent(text=scrubbed(text))], is_error=True)

    name, arguments = params.name, dict(params.arguments or {})
    try:
        answer = await in_thread(lambda: toolbox.call(name, arguments, progress), toolbox.config.tool_timeout, name)
    except ToolError as exc:
        return error(f"nightowl: {exc}")
    except Exception as exc:  # noqa: BLE001 - a bug answers as one, the server keeps serving
        traceback.print_exc(file=sys.stderr)
        return error(f"nightowl: internal error (a bug) in tool {params.name}: {type(exc).__name__}: {exc}")
    answer = scrubbed(json.loads(json.dumps(answer, default=str)))
    return types.CallToolResult(
        content=[types.TextContent(text=json.dumps(answer, indent=2, ensure_ascii=False))],
        structured_content=answer,
    )


async def in_thread(work: Callable[[], T], deadline: float, name: str) -> T:
    """``work()`` in a daemon thread of its own, awaited for at most ``deadline`` seconds; past it, a ToolError
    frees the caller and the thread is left to finish (or not): a call stuck for good holds neither a slot of
    a worker pool (anyio's 40, which 41 stuck calls once used up) nor the server's exit."""
    import anyio
    import anyio.from_thread
    import anyio.lowlevel

    finished = anyio.Event()
    token = anyio.lowlevel.current_token()
    outcome: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            outcome.append((True, work()))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, raised there
            outcome.append((False, exc))
        with contextlib.suppress(Exception):  # the caller gave up and the loop may be gone
            anyio.from_thread.run_sync(finished.set, token=token)

    threading.Thread(target=run, name=f"{TOOL_THREAD}{name}", daemon=True).start()
    with anyio.move_on_after(deadline):
        await finished.wait()
    if not outcome:
        raise ToolError(
            f"tool {name} did not finish within {deadline:g} s (the server's tool_timeout); it was abandoned, "
            "and what it runs may still finish (a triage then writes its bundle under the server's out folder)"
        )
    done, value = outcome[0]
    if done:
        return value  # type: ignore[no-any-return]
    raise value
