"""`replica-metrics`: the engine's /metrics at ``{base_url}/metrics``, read as `metrics` reads it, plus
what a first look across replicas needs besides: when the process started and how many HTTP 5xx it
answered.

``process_start_time_seconds`` is the standard process metric of the Prometheus Python client that
vLLM's and SGLang's servers export (prometheus/client_python ``ProcessCollector``); a value that
changes between two scrapes is a restart. ``http_requests_total{status="5xx"}`` is the counter of
prometheus-fastapi-instrumentator that vLLM's API server mounts (vllm/entrypoints/openai/api_server.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from nightowl.collectors.base import Collector, Fact
from nightowl.collectors.serving import metrics
from nightowl.collectors.serving.metrics import PRODUCES as METRICS_FACTS

KIND = "replica-metrics"
COMMANDS: tuple[tuple[str, ...], ...] = (("curl", "-sS", "--fail", "--max-time", "5", "--", "{base_url}/metrics"),)
_START = re.compile(r"^process_start_time_seconds(?:\{[^}]*\})?\s+(\S+)", re.MULTILINE)
_HTTP = re.compile(r"^http_requests_total\{([^}]*)\}\s+(\S+)", re.MULTILINE)
_STATUS = re.compile(r'status="([^"]*)"')


@dataclass(frozen=True)
class ReplicaScrape:
    scrape: metrics.MetricsScrape
    process_start_time: float | None
    http_5xx_total: float | None


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def parse(text: str) -> ReplicaScrape:
    start = _START.search(text)
    errors: float | None = None
    for labels, value in _HTTP.findall(text):
        status = _STATUS.search(labels)
        number = _float(value)
        if status and status.group(1).startswith("5") and number is not None:
            errors = (errors or 0.0) + number
    if errors is None and _HTTP.search(text):
        errors = 0.0  # the counter is exported and no 5xx series exists yet
    return ReplicaScrape(metrics.parse(text), _float(start.group(1)) if start else None, errors)


def facts(result: ReplicaScrape) -> dict[str, Any]:
    """The `metrics` facts plus ``process_start_time`` and ``http_5xx_total``."""
    out = metrics.facts(result.scrape)
    out["kind"] = KIND
    out["process_start_time"] = result.process_start_time
    out["http_5xx_total"] = result.http_5xx_total
    return out


# The metrics collector's facts, plus what a replica's scrape adds.
PRODUCES = (
    *METRICS_FACTS,
    Fact("process_start_time", "float | None", "when the engine process started (Unix seconds)"),
    Fact("http_5xx_total", "float | None", "HTTP 5xx responses since start"),
)


COLLECTOR = Collector(
    produces=PRODUCES,
    kind=KIND,
    commands=COMMANDS,
    parse=parse,
    facts=facts,
    timeout=10.0,
    description="GET {base_url}/metrics: the metrics facts plus process start time and HTTP 5xx count",
)
