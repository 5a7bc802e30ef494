"""Log lines of `nightowl serve` and `nightowl check`: JSON lines for log pipelines, or text.

A JSON line is one object: ``time`` (RFC 3339, UTC), ``level`` (``info``, ``warning``, ``error``),
``logger`` (``nightowl.serve`` or ``nightowl.check``), ``msg`` (the text line), and where known
``node``, ``runbook``, ``verdict``, ``action``, ``status``, ``alert``, ``bundle`` and ``reason``, so
Loki, Elasticsearch or ``jq`` can select on them (JSON Lines: https://jsonlines.org/). ``auto`` picks
JSON when stderr is not a terminal (a DaemonSet's, systemd's or Slurm's log), text on a terminal.
"""

from __future__ import annotations

import json
import time
from typing import Any, TextIO

LOG_FORMATS = ("auto", "json", "text")


class LogLine(str):
    """A log line's text that also carries its fields: callers wanting text use it as a str."""

    fields: dict[str, Any]

    def __new__(cls, text: str, **fields: Any) -> LogLine:
        line = super().__new__(cls, text)
        line.fields = {key: value for key, value in fields.items() if value is not None}
        return line


def resolve_format(choice: str, stream: TextIO) -> str:
    """``auto`` -> ``text`` on a terminal, ``json`` otherwise."""
    if choice != "auto":
        return choice
    isatty = getattr(stream, "isatty", None)
    return "text" if isatty is not None and isatty() else "json"


def render(line: str, fmt: str, logger: str, now: float | None = None) -> str:
    """One line of output for ``line`` (a LogLine or plain text, logged at ``info``)."""
    now = time.time() if now is None else now
    fields = dict(getattr(line, "fields", {}))
    level = str(fields.pop("level", "info"))
    if fmt != "json":
        from nightowl.safetext import one_line

        return f"{time.strftime('%H:%M:%S', time.localtime(now))} {one_line(line)}"
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"
    record = {"time": stamp, "level": level, "logger": logger, "msg": str(line), **fields}
    return json.dumps(record, default=str, ensure_ascii=False)


def verdict_level(status: str | None, verdict: dict[str, Any] | None) -> str:
    """``warning`` when the node needs action or got no verdict, else ``info``."""
    if status not in (None, "ok", "captured") or not verdict:
        return "warning"
    return "info" if verdict.get("action") in (None, "none") else "warning"
