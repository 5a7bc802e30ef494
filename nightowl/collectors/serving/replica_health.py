"""`replica-health`: is one serving replica alive, how fast does it answer, which engine version.

One curl, GET only, two URLs: ``{base_url}/health`` (vLLM and TGI answer 200 with an empty body
when the engine is up, SGLang too; vLLM answers 503 while its engine core is dead or sleeping) and
``{base_url}/version`` (vLLM's ``{"version": "0.6.3"}``; TGI and SGLang answer 404 there, which
leaves the version unknown, never guessed). ``-w`` writes a marker line after each transfer with
the URL, the HTTP status and the time taken, so a refused connection (status 000, curl exit 7) is
read as "down", with its latency, and not as a failed collector. ``-i`` keeps each answer's headers:
the ``Date`` of the ``/health`` answer is the replica's own clock at the first look, which the engine's
``process_start_time_seconds`` is compared with (a restart just before the first scrape is seen, and
when it was); output recorded without headers reads as before, with that time unknown.
Routes: vLLM vllm/entrypoints/openai/api_server.py (``/health``, ``/version``), TGI router
``/health`` (docs/sources.md#serving-metrics).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any

from nightowl.collectors.base import Collector, registered, to_jsonable

KIND = "replica-health"
MARKER = "nightowl-probe"
# curl reads write-out names case-insensitively; upper case keeps them apart from the engine's
# lower-case {parameter} placeholders.
WRITE_OUT = "\\n" + MARKER + " %{URL_EFFECTIVE} %{HTTP_CODE} %{TIME_TOTAL}\\n"
COMMANDS: tuple[tuple[str, ...], ...] = (
    ("curl", "-sS", "-i", "--max-time", "5", "-w", WRITE_OUT, "--", "{base_url}/health", "{base_url}/version"),
)
_MARKER_LINE = re.compile(rf"^{MARKER} (\S+) (\d{{3}}) ([0-9.]+)\s*$")
MAX_BODY = 300
MAX_TIME = float(COMMANDS[0][COMMANDS[0].index("--max-time") + 1])
# No HTTP status (000) after nearly the whole --max-time is curl's timeout (exit 28): something took the
# connection, or the node, and never answered. No status well before it is a connection that failed at once
# (curl exit 7, refused: nothing listens on the port). The exit code itself is on curl's stderr, which the
# parser does not read; the time tells the two apart without it.
TIMED_OUT_SHARE = 0.9


@dataclass(frozen=True)
class Probe:
    url: str
    path: str
    http_status: int | None  # None: no HTTP answer (refused, timed out, DNS)
    seconds: float | None
    body: str
    date: float | None = None  # the answer's Date header (Unix seconds), when headers were kept (-i)


@dataclass(frozen=True)
class ReplicaHealth:
    kind: str = KIND
    probes: tuple[Probe, ...] = ()
    warnings: tuple[str, ...] = field(default_factory=tuple)


def _path(url: str) -> str:
    match = re.match(r"^[a-z]+://[^/]+(/.*)?$", url)
    return (match.group(1) if match else None) or "/"


def parse(text: str) -> ReplicaHealth:
    """curl output with marker lines -> one probe per URL, its body being the text before its marker."""
    probes: list[Probe] = []
    warnings: list[str] = []
    body: list[str] = []
    for line in text.splitlines():
        match = _MARKER_LINE.match(line)
        if match is None:
            body.append(line)
            continue
        url, status, seconds = match.group(1), int(match.group(2)), float(match.group(3))
        date, text = _headers("\n".join(body))
        probes.append(Probe(url, _path(url), status or None, seconds, text.strip()[:MAX_BODY], date))
        body = []
    rest = "\n".join(body).strip()
    if rest:
        warnings.append(f"text after the last probe: {rest[:200]}")
    if text.strip() and not probes:
        warnings.append("no probe marker line: not the output of the replica-health command")
    return ReplicaHealth(probes=tuple(probes), warnings=tuple(warnings))


_STATUS_LINE = re.compile(r"^HTTP/[0-9.]+ \d{3}")


def _headers(text: str) -> tuple[float | None, str]:
    """(the Date header as Unix seconds, the body) of one answer; text without headers is all body."""
    text = text.lstrip("\r\n")
    if not _STATUS_LINE.match(text):
        return None, text
    head, _, body = text.replace("\r\n", "\n").partition("\n\n")
    date = None
    for line in head.splitlines()[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "date":
            try:
                date = parsedate_to_datetime(value.strip()).timestamp()
            except (TypeError, ValueError):
                date = None
    return date, body


def _version(body: str) -> str | None:
    try:
        document = json.loads(body)
    except ValueError:
        return None
    version = document.get("version") if isinstance(document, dict) else None
    return str(version) if isinstance(version, (str, int, float)) else None


def facts(result: ReplicaHealth) -> dict[str, Any]:
    """Contract-style JSON plus ``alive`` (``/health`` answered 2xx), ``health_status``,
    ``health_seconds``, ``answered`` (any HTTP answer at all), ``version``, ``server_time`` and
    ``no_answer`` (why /health got no HTTP status: ``refused`` or ``timed out``)."""
    out: dict[str, Any] = to_jsonable(result)
    health = next((p for p in result.probes if p.path.rstrip("/").endswith("/health")), None)
    version = next((p for p in result.probes if p.path.rstrip("/").endswith("/version")), None)
    out["health_status"] = health.http_status if health else None
    out["health_seconds"] = health.seconds if health else None
    out["alive"] = None if health is None else bool(health.http_status and 200 <= health.http_status < 300)
    out["answered"] = None if health is None else health.http_status is not None
    out["version"] = _version(version.body) if version and version.http_status == 200 else None
    out["server_time"] = health.date if health else None
    out["no_answer"] = no_answer(health)
    return out


def no_answer(probe: Probe | None) -> str | None:
    """Why a probe got no HTTP status: ``timed out`` or ``refused``; None when it got one (or was not made)."""
    if probe is None or probe.http_status is not None:
        return None
    if probe.seconds is not None and probe.seconds >= MAX_TIME * TIMED_OUT_SHARE:
        return "timed out"
    return "refused"


COLLECTOR = Collector(**registered(KIND), commands=COMMANDS, parse=parse, facts=facts)
