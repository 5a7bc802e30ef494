"""The stdio MCP server: nightowl's tools (tools.py) served with the official ``mcp`` SDK.

The SDK is imported here only, when ``nightowl mcp`` starts. Tools run in a worker thread (the engine
is synchronous); a triage reports progress as each host finishes. A refusal is a tool error (``isError``)
carrying nightowl's message, so the model can read it and correct its call.
"""

from __future__ import annotations

import contextlib
import json
import sys
import traceback
from typing import Any

from nightowl import __version__
from nightowl.mcp.hooks import ToolError
from nightowl.mcp.tools import Toolbox

INSTRUCTIONS = (
    "nightowl triages GPU servers with read-only runbooks. Verdicts are nightowl's, decided from hashed "
    "evidence: cite the bundle_id and bundle_sha256 of every answer, and the evidence's source files."
)
# Tools that may reach live hosts talk to the world outside the server; the rest read what they are given.
OPEN_WORLD = frozenset({"triage"})


def serve(toolbox: Toolbox) -> None:
    """Serve ``toolbox`` on stdin/stdout until the client closes the connection."""
    import anyio

    anyio.run(_serve, toolbox)


async def _serve(toolbox: Toolbox) -> None:
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    server: Server[Any] = Server(
        "nightowl",
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=lambda ctx, params: _list_tools(toolbox),
        on_call_tool=lambda ctx, params: _call_tool(toolbox, ctx, params),
    )
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


async def _list_tools(toolbox: Toolbox) -> Any:
    import mcp.types as types

    return types.ListToolsResult(
        tools=[
            types.Tool(
                name=tool.name,
                description=tool.description,
                input_schema=tool.input_schema,
                annotations=types.ToolAnnotations(
                    read_only_hint=True,
                    destructive_hint=False,
                    idempotent_hint=tool.name not in OPEN_WORLD,
                    open_world_hint=tool.name in OPEN_WORLD,
                ),
            )
            for tool in toolbox.tools().values()
        ]
    )


async def _call_tool(toolbox: Toolbox, ctx: Any, params: Any) -> Any:
    import anyio
    import anyio.from_thread
    import anyio.lowlevel
    import anyio.to_thread
    import mcp.types as types

    token = anyio.lowlevel.current_token()

    def progress(done: float, total: float | None, message: str | None) -> None:
        # Called from the tool's thread or the engine's host threads: back to the event loop. Progress is
        # a courtesy; a failure to send it must not fail the run.
        with contextlib.suppress(Exception):
            anyio.from_thread.run(ctx.session.report_progress, done, total, message, token=token)

    def error(text: str) -> Any:
        return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)

    try:
        answer = await anyio.to_thread.run_sync(toolbox.call, params.name, dict(params.arguments or {}), progress)
    except ToolError as exc:
        return error(f"nightowl: {exc}")
    except Exception as exc:  # noqa: BLE001 - a bug answers as one, the server keeps serving
        traceback.print_exc(file=sys.stderr)
        return error(f"nightowl: internal error (a bug) in tool {params.name}: {type(exc).__name__}: {exc}")
    answer = json.loads(json.dumps(answer, default=str))
    return types.CallToolResult(
        content=[types.TextContent(text=json.dumps(answer, indent=2, ensure_ascii=False))],
        structured_content=answer,
    )
