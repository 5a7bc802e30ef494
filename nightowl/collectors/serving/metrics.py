"""`metrics`: a Prometheus text scrape of vLLM, SGLang or TGI (docs/reference.md#parse-output).

The command scrapes ``{metrics_url}`` with curl on the host (the engine port is often not
reachable from where nightowl runs); runbooks default it to ``METRICS_URL``, the vLLM port
(SGLang serves on :30000, TGI on :80 behind its router).

Engines renamed their metrics across releases; ``ALIASES`` (nightowl/knowledge/metric_aliases.csv,
each name with its source) maps every known name of a field to that field, newest name first.
When a scrape carries both names (deprecation windows expose the old and the new series side by
side) only the first one found is read, so nothing is counted twice.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from nightowl import knowledge
from nightowl.collectors.base import Collector, registered, to_jsonable
from nightowl.llmperf.histogram import bound, bound_label, quantile, window_mean

KIND = "metrics"
METRICS_URL = "http://127.0.0.1:8000/metrics"  # default of the `metrics_url` runbook parameter

HISTOGRAMS = ("ttft", "itl", "e2e", "queue", "prefill", "decode")
LENGTH_HISTOGRAMS = ("prompt_tokens", "generation_tokens")  # extra: tokens per request
ENGINE_PREFIXES = (("vllm", "vllm:"), ("sglang", "sglang:"), ("tgi", "tgi_"))


class Alias(NamedTuple):
    field: str  # result field the metric feeds
    engine: str
    metric: str  # name without the _total / _bucket / _count / _sum suffix
    source: str  # "[confidence] where the name is documented or seen"
    versions: str = ""  # engine releases that expose the name, where known


@functools.cache
def aliases() -> tuple[Alias, ...]:
    """nightowl/knowledge/metric_aliases.csv, in file order (newest name of a field first)."""
    rows = knowledge.read_csv("metric_aliases.csv", required=("field", "engine", "metric", "confidence", "source"))
    return tuple(
        Alias(
            row["field"],
            row["engine"],
            row["metric"],
            knowledge.sourced(row, f"metric_aliases.csv: line {line}", required=True),
            row["versions"],
        )
        for line, row in enumerate(rows, start=2)
    )


def __getattr__(name: str) -> Any:
    """``ALIASES``, read from nightowl/knowledge/metric_aliases.csv on first use."""
    if name == "ALIASES":
        return aliases()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# How label sets of one scalar combine. Usage is a fraction per engine: summing two engines at
# 0.6 would read 1.2, so the fullest one is reported (a runbook asks "is any engine full?").
MAX_OVER_LABEL_SETS = frozenset({"kv_cache_usage"})
MODEL_LABELS = ("model_name", "name")  # "name" was SGLang's first label key (sgl-project/sglang PR 1853)


class Sample(NamedTuple):
    name: str
    labels: dict[str, str]
    value: float


@dataclass(frozen=True)
class Histogram:
    count: float | None
    sum: float | None
    buckets: tuple[tuple[float | str, float], ...]  # (le, cumulative); le "+Inf" for infinity


@dataclass(frozen=True)
class MetricsScrape:
    kind: str = KIND
    engine: str | None = None
    requests_running: float | None = None
    requests_waiting: float | None = None
    kv_cache_usage: float | None = None
    preemptions_total: float | None = None
    histograms: dict[str, Histogram | None] = field(default_factory=lambda: dict.fromkeys(HISTOGRAMS))
    length_histograms: dict[str, Histogram | None] = field(default_factory=lambda: dict.fromkeys(LENGTH_HISTOGRAMS))
    prefix_cache_hits: float | None = None
    prefix_cache_queries: float | None = None
    prompt_tokens_total: float | None = None
    generation_tokens_total: float | None = None
    request_success_total: float | None = None
    requests_total: float | None = None
    requests_aborted_total: float | None = None
    requests_retracted: float | None = None
    kv_cache_capacity_tokens: float | None = None
    models: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


SCALAR_FIELDS = (
    "requests_running",
    "requests_waiting",
    "kv_cache_usage",
    "preemptions_total",
    "prefix_cache_hits",
    "prefix_cache_queries",
    "prompt_tokens_total",
    "generation_tokens_total",
    "request_success_total",
    "requests_total",
    "requests_aborted_total",
    "requests_retracted",
    "kv_cache_capacity_tokens",
)


class SampleSet(NamedTuple):
    """What a scrape holds, read once: every collector of /metrics reads these (never the raw text)."""

    samples: list[Sample]  # in scrape order
    declared: set[str]  # every declared metric name (HELP/TYPE lines too: a family may have no sample)
    warnings: list[str]  # one per line that could not be read
    unread: list[str]  # those lines, stripped: a sample cut short or garbled is unknown, not absent


def parse(text: str) -> MetricsScrape:
    """Scrape text -> contract result; lines it cannot read go to ``warnings``, it never raises."""
    return from_samples(read_samples(text))


def from_samples(read: SampleSet) -> MetricsScrape:
    """The contract result of samples `read_samples` read."""
    by_name: dict[str, list[Sample]] = {}
    for sample in read.samples:
        by_name.setdefault(sample.name, []).append(sample)
    scalars: dict[str, Any] = {name: _scalar(name, by_name) for name in SCALAR_FIELDS}
    return MetricsScrape(
        engine=_engine(read.declared | set(by_name)),
        histograms={name: _histogram(name, by_name) for name in HISTOGRAMS},
        length_histograms={name: _histogram(name, by_name) for name in LENGTH_HISTOGRAMS},
        models=_models(read.samples),
        warnings=tuple(read.warnings),
        **scalars,
    )


def read_samples(text: str) -> SampleSet:
    """The samples of a Prometheus text or OpenMetrics scrape; it never raises.

    prometheus_client's parser reads the whole document (escaped label values, timestamps, exemplars,
    ``# EOF``, NaN/Inf, CRLF, HELP/TYPE in any order); when it gives up on one line (a scrape cut
    short), every line is read on its own and the unreadable ones are kept as warnings.
    """
    try:
        from prometheus_client.parser import text_string_to_metric_families

        families = list(text_string_to_metric_families(text))
    except Exception:  # noqa: BLE001 - pasted scrapes are often cut; fall back to a per-line reader
        return _read_lines(text)
    samples = [Sample(s.name, dict(s.labels), float(s.value)) for f in families for s in f.samples]
    warnings: list[str] = []
    return SampleSet(_without_duplicates(samples, warnings), {f.name for f in families}, warnings, [])


MAX_DUPLICATE_WARNINGS = 10


def _without_duplicates(samples: list[Sample], warnings: list[str]) -> list[Sample]:
    """The first sample of each series (name and label set): a series printed twice (two registries, a
    proxy that concatenates scrapes) is one series, never summed into twice its value; each is warned."""
    seen: dict[tuple[str, tuple[tuple[str, str], ...]], int] = {}
    kept: list[Sample] = []
    for sample in samples:
        key = (sample.name, tuple(sorted(sample.labels.items())))
        seen[key] = seen.get(key, 0) + 1
        if seen[key] == 1:
            kept.append(sample)
    duplicated = [(key, n) for key, n in seen.items() if n > 1]
    for (name, labels), count in duplicated[:MAX_DUPLICATE_WARNINGS]:
        label_text = ",".join(f'{k}="{v}"' for k, v in labels)
        warnings.append(f"series {name}{{{label_text}}} appears {count} times: the first value is read, none summed")
    if len(duplicated) > MAX_DUPLICATE_WARNINGS:
        warnings.append(f"... and {len(duplicated) - MAX_DUPLICATE_WARNINGS} more duplicated series")
    return kept


_LABELS = r'\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\}'  # quoted values may hold braces, commas, escaped quotes
_SAMPLE_LINE = re.compile(
    r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)\s*"
    rf"(?P<labels>{_LABELS})?"
    r"\s+(?P<value>\S+)"
    r"(?:\s+-?\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)?"  # timestamp: milliseconds (text format) or seconds (OpenMetrics)
    rf"(?:\s+#\s*{_LABELS}\s+\S+(?:\s+\S+)?)?"  # OpenMetrics exemplar: # {labels} value [timestamp]
    r"\s*$"
)
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
_DECLARATION = re.compile(r"^#\s*(?:HELP|TYPE)\s+([a-zA-Z_:][a-zA-Z0-9_:]*)")


def _read_lines(text: str) -> SampleSet:
    read = SampleSet([], set(), [], [])
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            declaration = _DECLARATION.match(line)
            if declaration:
                read.declared.add(declaration.group(1))
            continue
        sample = _sample_from_line(line)
        if sample is None:
            read.warnings.append(f"line {number}: not a metric sample: {line[:200]}")
            read.unread.append(line)
        else:
            read.samples.append(sample)
    read.samples[:] = _without_duplicates(read.samples, read.warnings)
    return read


def _sample_from_line(line: str) -> Sample | None:
    match = _SAMPLE_LINE.match(line)
    if not match:
        return None
    try:
        value = float(match.group("value"))
    except ValueError:
        return None
    label_text = (match.group("labels") or "{}")[1:-1]
    labels = {key: _unescape(value) for key, value in _LABEL.findall(label_text)}
    if label_text.strip() and not labels:
        return None
    return Sample(match.group("name"), labels, value)


_ESCAPE = re.compile(r'\\([\\n"])')  # the format's only escapes; any other backslash stays, as prometheus_client does


def _unescape(value: str) -> str:
    """Label value escapes in one pass (an escaped backslash before an n is a backslash and an n, not a newline)."""
    return _ESCAPE.sub(lambda m: "\n" if m.group(1) == "n" else m.group(1), value)


def _aliases(field_name: str) -> Iterable[Alias]:
    return (alias for alias in aliases() if alias.field == field_name)


def _scalar(field_name: str, by_name: dict[str, list[Sample]]) -> float | None:
    for alias in _aliases(field_name):
        found = by_name.get(alias.metric + "_total") or by_name.get(alias.metric)
        values = [s.value for s in found or () if math.isfinite(s.value)]
        if values:
            return max(values) if field_name in MAX_OVER_LABEL_SETS else math.fsum(values)
    return None


def _histogram(field_name: str, by_name: dict[str, list[Sample]]) -> Histogram | None:
    for alias in _aliases(field_name):
        buckets = by_name.get(alias.metric + "_bucket", [])
        counts = by_name.get(alias.metric + "_count", [])
        sums = by_name.get(alias.metric + "_sum", [])
        if buckets or counts or sums:
            histogram = Histogram(_sum_or_none(counts), _sum_or_none(sums), _summed_buckets(buckets))
            if histogram.count is not None or histogram.sum is not None or histogram.buckets:
                return histogram  # NaN/Inf everywhere is no histogram, not an empty one
    return None


def _sum_or_none(samples: list[Sample]) -> float | None:
    """Sum over label sets; NaN/Inf samples are skipped (JSON cannot carry them)."""
    values = [s.value for s in samples if math.isfinite(s.value)]
    return math.fsum(values) if values else None


def _summed_buckets(samples: list[Sample]) -> tuple[tuple[float | str, float], ...]:
    """Add the cumulative counts of every label set per bound (Prometheus `sum by (le)`)."""
    per_bound: dict[float, float] = {}
    for sample in samples:
        try:
            upper = bound(sample.labels.get("le", ""))
        except ValueError:
            continue
        if not math.isfinite(sample.value) or math.isnan(upper):
            continue
        per_bound[upper] = per_bound.get(upper, 0.0) + sample.value
    return tuple((bound_label(upper), count) for upper, count in sorted(per_bound.items()))


def _engine(names: set[str]) -> str | None:
    counts = {engine: sum(name.startswith(prefix) for name in names) for engine, prefix in ENGINE_PREFIXES}
    best = max(counts, key=lambda engine: counts[engine])
    return best if counts[best] else None


def _models(samples: list[Sample]) -> tuple[str, ...]:
    models = set()
    for sample in samples:
        for label in MODEL_LABELS:
            if label == "name" and not sample.name.startswith("sglang:"):
                continue  # "name" is a generic label elsewhere
            if sample.labels.get(label):
                models.add(sample.labels[label])
    return tuple(sorted(models))


def facts(result: MetricsScrape) -> dict[str, Any]:
    """Contract JSON plus, per histogram, lifetime `<h>_mean`, `<h>_p50`, `<h>_p99`, `<h>_p99_at_least`
    (None when not computable) and `prefix_cache_hit_rate` (hits / queries)."""
    out: dict[str, Any] = to_jsonable(result)
    for name in HISTOGRAMS:
        histogram = result.histograms.get(name)
        out[f"{name}_mean"] = window_mean(histogram) if histogram else None
        for label, q in (("p50", 0.5), ("p99", 0.99)):
            estimate = quantile(q, histogram.buckets) if histogram else None
            out[f"{name}_{label}"] = estimate.value if estimate else None
            if label == "p99":
                out[f"{name}_p99_at_least"] = bool(estimate and estimate.at_least)
    hits, queries = result.prefix_cache_hits, result.prefix_cache_queries
    out["prefix_cache_hit_rate"] = hits / queries if hits is not None and queries else None
    out["has_samples"] = any(getattr(result, name) is not None for name in SCALAR_FIELDS) or any(
        result.histograms.values()
    )
    return out


def shows_nothing(text: str) -> bool:
    """A scrape without one finite sample (blank, only comments, only NaN/Inf) measured nothing: no_data,
    never an all-clear."""
    return not any(math.isfinite(sample.value) for sample in read_samples(text).samples)


COLLECTOR = Collector(
    **registered(KIND),
    shows_nothing=shows_nothing,
    commands=(("curl", "-sS", "--fail", "--max-time", "5", "--", "{metrics_url}"),),
    parse=parse,
    facts=facts,
    invasive=False,
)
