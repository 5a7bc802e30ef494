"""`replica-metrics`: the engine's /metrics at ``{base_url}/metrics``, read as `metrics` reads it, plus
what a first look across replicas needs besides: when the process started and how many HTTP 5xx it
answered.

``process_start_time_seconds`` is the standard process metric of the Prometheus Python client that
vLLM's and SGLang's servers export (prometheus/client_python ``ProcessCollector``); a value that
changes between two scrapes is a restart. ``http_requests_total{status="5xx"}`` is the counter of
prometheus-fastapi-instrumentator that vLLM's API server mounts (vllm/entrypoints/openai/api_server.py).
Both are read from the samples of `metrics.read_samples`, the one reader of the exposition format, never
from the raw text: a format variant it reads (escaped label values, timestamps, exemplars, ``# EOF``)
is read here too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from nightowl.collectors.base import Collector, registered
from nightowl.collectors.serving import metrics

KIND = "replica-metrics"
COMMANDS: tuple[tuple[str, ...], ...] = (("curl", "-sS", "--fail", "--max-time", "5", "--", "{base_url}/metrics"),)
START_METRIC = "process_start_time_seconds"
HTTP_METRIC = "http_requests_total"


@dataclass(frozen=True)
class ReplicaScrape:
    scrape: metrics.MetricsScrape
    process_start_time: float | None
    http_5xx_total: float | None


def parse(text: str) -> ReplicaScrape:
    """The scrape read once by the `metrics` reader; never raises (unreadable lines become warnings)."""
    read = metrics.read_samples(text)
    return ReplicaScrape(metrics.from_samples(read), _start_time(read), _http_5xx(read))


def _start_time(read: metrics.SampleSet) -> float | None:
    """The first finite start time: NaN is no time, and two NaNs compare unequal (a restart that never was)."""
    starts = (s.value for s in read.samples if s.name == START_METRIC and math.isfinite(s.value))
    return next(starts, None)


def _http_5xx(read: metrics.SampleSet) -> float | None:
    """The 5xx responses summed over handlers and methods; 0.0 when the counter is exported with no 5xx
    series yet (the instrumentator adds a label set on its first response); None when unknown."""
    series = [s for s in read.samples if s.name == HTTP_METRIC and s.labels]
    if not series or any(_may_be(line, HTTP_METRIC) for line in read.unread):
        return None  # not exported, or a series was cut short or garbled: it may be the 5xx one
    errors = [s.value for s in series if s.labels.get("status", "").startswith("5")]
    if not all(math.isfinite(value) for value in errors):
        return None  # a NaN/Inf counter counts nothing, and must not read as zero errors
    return math.fsum(errors)


def _may_be(line: str, name: str) -> bool:
    """Whether an unread line is a sample of ``name`` or what is left of one cut short."""
    return line.startswith(name) or name.startswith(line)


def facts(result: ReplicaScrape) -> dict[str, Any]:
    """The `metrics` facts plus ``process_start_time`` and ``http_5xx_total``."""
    out = metrics.facts(result.scrape)
    out["kind"] = KIND
    out["process_start_time"] = result.process_start_time
    out["http_5xx_total"] = result.http_5xx_total
    return out


COLLECTOR = Collector(
    **registered(KIND),
    shows_nothing=metrics.shows_nothing,
    commands=COMMANDS,
    parse=parse,
    facts=facts,
)
