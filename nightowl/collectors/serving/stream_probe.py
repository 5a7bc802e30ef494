"""`stream-probe`: does one streamed completion end the way OpenAI-compatible servers end it?

A streamed completion is Server-Sent Events: ``data: {json chunk}`` lines, the last chunk with a
``finish_reason``, then ``data: [DONE]`` (OpenAI API reference, "Streaming"; vLLM, SGLang and TGI's
``/v1/completions`` follow it). A stream that stops before ``[DONE]``, or without a finish reason,
is what a client sees when a gateway or proxy buffers or cuts SSE: the engine may be healthy and
users still get truncated answers. One request of one token (``stream_body``), so it costs nothing;
it is a POST, so runbooks run it only when asked (``stream_probe=true``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from nightowl.collectors.base import Collector, registered, to_jsonable

KIND = "stream-probe"
COMMANDS: tuple[tuple[str, ...], ...] = (
    (
        "curl",
        "-sS",
        "-N",
        "--max-time",
        "20",
        "-H",
        "Content-Type: application/json",
        "--data-binary",
        "{stream_body}",
        "--",
        "{base_url}/v1/completions",
    ),
)


@dataclass(frozen=True)
class StreamProbe:
    kind: str = KIND
    chunks: int = 0
    done: bool = False  # saw `data: [DONE]`
    finish_reason: str | None = None
    error: str | None = None
    warnings: tuple[str, ...] = ()


def parse(text: str) -> StreamProbe:
    chunks, done, finish, error = 0, False, None, None
    warnings: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(":") or line.startswith(("event:", "id:", "retry:")):
            continue
        if not line.startswith("data:"):
            document = _json(line)
            if isinstance(document, dict) and (document.get("error") or document.get("object") == "error"):
                error = str(document.get("error") or document.get("message"))[:300]
            else:
                warnings.append(f"not an SSE line: {line[:200]}")
            continue
        payload = line[len("data:") :].strip()
        if payload == "[DONE]":
            done = True
            continue
        chunk = _json(payload)
        if not isinstance(chunk, dict):
            warnings.append(f"chunk is not JSON: {payload[:200]}")
            continue
        if chunk.get("error"):
            error = str(chunk["error"])[:300]
            continue
        chunks += 1
        for choice in chunk.get("choices") or []:
            reason = choice.get("finish_reason") if isinstance(choice, dict) else None
            if isinstance(reason, str):
                finish = reason
    return StreamProbe(chunks=chunks, done=done, finish_reason=finish, error=error, warnings=tuple(warnings))


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def facts(result: StreamProbe) -> dict[str, Any]:
    """Contract-style JSON plus ``complete``: chunks came, one had a finish_reason, then [DONE]."""
    out: dict[str, Any] = to_jsonable(result)
    out["complete"] = result.chunks > 0 and result.done and result.finish_reason is not None
    out["missing_end"] = result.chunks > 0 and not (result.done and result.finish_reason is not None)
    return out


COLLECTOR = Collector(**registered(KIND), commands=COMMANDS, parse=parse, facts=facts)
