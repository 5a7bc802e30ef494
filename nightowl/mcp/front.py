"""The opening of a session, answered while the MCP SDK loads: ``initialize``, ``tools/list``, ``ping``.

Importing the SDK takes about two seconds of CPU (its pydantic models of every protocol revision), four
times the half second an agent should wait for nightowl's tool list. So the server starts the import in
a thread and, meanwhile, answers the handshake and the tool list itself, from the same tool listing the
SDK serves. At the first message it does not answer (a ``tools/call``), or once the SDK is loaded, it
hands the connection over: the SDK is given the handshake again (its answer, a duplicate, is dropped) and
every message from there on. tests/mcp/test_mcp.py checks that both paths answer the same, byte for byte
in JSON. ``NIGHTOWL_MCP_FRONT=0`` turns this off.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any

# The revisions the SDK negotiates through `initialize` (mcp_types.version.HANDSHAKE_PROTOCOL_VERSIONS;
# a test keeps them equal): a client asking for another one is handed to the SDK at once.
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")


@dataclass
class Front:
    """Reads the wire until the SDK can take over; returns the lines the SDK must see first."""

    wire_in: IO[bytes]
    wire_out: IO[bytes]
    server_info: dict[str, Any]
    tools: Callable[[], list[dict[str, Any]]]
    sdk_ready: threading.Event
    # The id of the `initialize` answered here: the SDK's answer to it is dropped.
    handshake_id: Any = field(default=None, init=False)

    def run(self) -> tuple[list[bytes], bool]:
        """Answer what can be answered here; return (lines for the SDK, in order; whether stdin ended)."""
        replay: list[bytes] = []
        while not self.sdk_ready.is_set():
            line = self.wire_in.readline()
            if not line:
                return replay, True
            if not line.strip():
                continue
            answer = self._answer(line)
            if answer is None:
                return [*replay, line], False
            if answer is not _FORWARD_LATER:
                self._send(answer)
            if self._is_handshake(line):
                replay.append(line)
        return replay, False

    def _answer(self, line: bytes) -> Any:
        try:
            message = json.loads(line)
        except ValueError:
            return None
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return None
        method, id_ = message.get("method"), message.get("id")
        given = message.get("params")
        params: dict[str, Any] = given if isinstance(given, dict) else {}
        if method == "initialize" and self.handshake_id is None and id_ is not None:
            version = params.get("protocolVersion")
            if version not in HANDSHAKE_VERSIONS:
                return None
            self.handshake_id = id_
            return {"jsonrpc": "2.0", "id": id_, "result": {**self.server_info, "protocolVersion": version}}
        if self.handshake_id is None:
            return None
        if method == "notifications/initialized" and id_ is None:
            return _FORWARD_LATER
        if method == "tools/list" and id_ is not None and not params.get("cursor"):
            return {"jsonrpc": "2.0", "id": id_, "result": {"tools": self.tools()}}
        if method == "ping" and id_ is not None:
            return {"jsonrpc": "2.0", "id": id_, "result": {}}
        return None

    def _is_handshake(self, line: bytes) -> bool:
        try:
            message = json.loads(line)
        except ValueError:
            return False
        return isinstance(message, dict) and message.get("method") in ("initialize", "notifications/initialized")

    def _send(self, message: dict[str, Any]) -> None:
        self.wire_out.write((json.dumps(message, separators=(",", ":"), ensure_ascii=False) + "\n").encode())
        self.wire_out.flush()


_FORWARD_LATER = object()  # not answered here (a notification), but the SDK must see it
