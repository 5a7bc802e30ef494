"""Which clock moved: a baseline window against an incident window of an engine's /metrics.

Pure functions over two `metrics` fact dicts (docs/reference.md#parse-output; ``nightowl.collectors.serving.metrics``
produces them): ``before`` is the scrape at the start of the incident window, ``after`` the one
at its end. The incident window is ``after - before``; the baseline is everything the engine
served before the window (``before`` itself: counters count from the engine's start), i.e. its
normal behaviour, which is why a restart inside the window voids the comparison.

Attribution follows vLLM docs/design/metrics.md and prometheus promql/quantile.go
(docs/sources.md#serving-metrics, #histogram-quantile): window MEANS per component (delta(_sum) /
delta(_count)), because percentiles do not add up while means do (e2e ~ queue + prefill + decode
+ the server's own overhead); p99 only confirms the tail moved with it. A scrape cut without
``_sum``/``_count`` (as pasted in bug reports) gets its means estimated from bucket midpoints,
flagged ``estimated``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from nightowl.llmperf.histogram import bound, delta, quantile, window_mean

COMPONENTS = ("queue", "prefill", "decode", "e2e", "ttft", "itl")
INSIDE = ("queue", "prefill", "decode")  # the additive parts of e2e (docs/sources.md#serving-metrics)
# Counters whose decrease means the engine restarted inside the window (docs/sources.md#histogram-quantile).
COUNTERS = (
    "prompt_tokens_total",
    "generation_tokens_total",
    "request_success_total",
    "requests_total",
    "preemptions_total",
    "prefix_cache_hits",
    "prefix_cache_queries",
)

# Thresholds of the p99 runbook (docs/sources.md#serving-metrics): "up >20%", "hit-rate down >10 pts".
# MIN_CHANGE_SECONDS keeps a 0.2 ms wobble of a 1 ms clock from counting as a regression [D].
REGRESSION_RATIO = 1.2
HIT_RATE_DROP = 0.10
MIN_CHANGE_SECONDS = 0.005


@dataclass(frozen=True)
class ComponentChange:
    component: str
    baseline_mean: float | None
    incident_mean: float | None
    change: float | None  # incident - baseline, seconds
    ratio: float | None  # incident / baseline
    baseline_p99: float | None
    incident_p99: float | None
    incident_p99_at_least: bool  # the p99 fell in the +Inf bucket: "at least"
    incident_count: float | None
    estimated: bool  # mean from bucket midpoints: the scrape had no _sum/_count
    moved: bool  # grew by REGRESSION_RATIO and MIN_CHANGE_SECONDS


@dataclass(frozen=True)
class Shift:
    """A per-request figure (tokens, hit rate, rate) before and inside the window."""

    baseline: float | None
    incident: float | None

    @property
    def ratio(self) -> float | None:
        if self.baseline is None or self.incident is None or self.baseline <= 0:
            return None
        return self.incident / self.baseline


@dataclass(frozen=True)
class WindowComparison:
    restart_in_window: bool
    restarted_series: tuple[str, ...]
    components: dict[str, ComponentChange]
    moved: tuple[str, ...]
    dominant: str | None  # the inside clock (queue, prefill, decode) that grew the most
    dominant_share: float | None  # its share of the e2e (or inside) growth
    requests_in_window: float | None
    prompt_tokens_per_request: Shift
    generation_tokens_per_request: Shift
    prefix_cache_hit_rate: Shift
    preemptions_in_window: float | None
    running: Shift  # gauges: value at the start and at the end of the window
    waiting: Shift
    kv_cache_usage: Shift
    engine_latency_incident: float | None  # e2e mean, else the sum of the inside means, else TTFT
    warnings: tuple[str, ...] = field(default_factory=tuple)


def compare(before: Mapping[str, Any], after: Mapping[str, Any]) -> WindowComparison:
    """Baseline (``before``, since engine start) vs incident window (``after - before``)."""
    restarted = _restarted_series(before, after)
    histograms_before = before.get("histograms") or {}
    histograms_after = after.get("histograms") or {}
    components = {
        name: _component(name, histograms_before.get(name), histograms_after.get(name), bool(restarted))
        for name in COMPONENTS
        if histograms_after.get(name)
    }
    moved = tuple(name for name, change in components.items() if change.moved)
    dominant, share = _dominant(components)
    requests = _requests_in_window(before, after, components)
    return WindowComparison(
        restart_in_window=bool(restarted),
        restarted_series=restarted,
        components=components,
        moved=moved,
        dominant=dominant,
        dominant_share=share,
        requests_in_window=requests,
        prompt_tokens_per_request=_per_request("prompt_tokens", "prompt_tokens_total", before, after, components),
        generation_tokens_per_request=_per_request(
            "generation_tokens", "generation_tokens_total", before, after, components
        ),
        prefix_cache_hit_rate=_hit_rate(before, after),
        preemptions_in_window=_counter_delta("preemptions_total", before, after),
        running=Shift(_number(before.get("requests_running")), _number(after.get("requests_running"))),
        waiting=Shift(_number(before.get("requests_waiting")), _number(after.get("requests_waiting"))),
        kv_cache_usage=Shift(_number(before.get("kv_cache_usage")), _number(after.get("kv_cache_usage"))),
        engine_latency_incident=_engine_latency(components),
        warnings=("a series went down between the scrapes: the engine restarted inside the window",)
        if restarted
        else (),
    )


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _restarted_series(before: Mapping[str, Any], after: Mapping[str, Any]) -> tuple[str, ...]:
    names = []
    for name in COUNTERS:
        old, new = _number(before.get(name)), _number(after.get(name))
        if old is not None and new is not None and new < old:
            names.append(name)
    for group in ("histograms", "length_histograms"):
        for name, histogram in (after.get(group) or {}).items():
            previous = (before.get(group) or {}).get(name)
            if histogram and previous and delta(previous, histogram).reset_in_window:
                names.append(name)
    return tuple(names)


def _component(name: str, before: Any, after: Any, restarted: bool) -> ComponentChange:
    window = after if restarted else delta(before, after)
    baseline_mean, baseline_estimated = _mean(before) if before and not restarted else (None, False)
    incident_mean, incident_estimated = _mean(window)
    baseline_p99 = quantile(0.99, before["buckets"]).value if before and not restarted else None
    incident_q = quantile(0.99, _get(window, "buckets") or ())
    change = ratio = None
    if incident_mean is not None and baseline_mean is not None:
        change = incident_mean - baseline_mean
        ratio = incident_mean / baseline_mean if baseline_mean else None
    moved = bool(change is not None and change >= MIN_CHANGE_SECONDS and (ratio is None or ratio >= REGRESSION_RATIO))
    return ComponentChange(
        component=name,
        baseline_mean=baseline_mean,
        incident_mean=incident_mean,
        change=change,
        ratio=ratio,
        baseline_p99=baseline_p99,
        incident_p99=incident_q.value,
        incident_p99_at_least=incident_q.at_least,
        incident_count=_observations(window),
        estimated=baseline_estimated or incident_estimated,
        moved=moved,
    )


def _get(histogram: Any, key: str) -> Any:
    return histogram.get(key) if isinstance(histogram, Mapping) else getattr(histogram, key, None)


def _mean(histogram: Any) -> tuple[float | None, bool]:
    """(mean, estimated): exact from _sum/_count, else from bucket midpoints."""
    exact = window_mean(histogram)
    if exact is not None:
        return exact, False
    buckets = sorted((bound(le), float(c)) for le, c in (_get(histogram, "buckets") or ()))
    total, weighted, lower, below = 0.0, 0.0, 0.0, 0.0
    for upper, cumulative in buckets:
        in_bucket = max(0.0, cumulative - below)
        # +Inf: only a floor is known, the highest finite bound
        point = lower if math.isinf(upper) else (lower + upper) / 2
        total, weighted = total + in_bucket, weighted + in_bucket * point
        lower, below = (upper if not math.isinf(upper) else lower), max(below, cumulative)
    return (weighted / total, True) if total > 0 else (None, False)


def _observations(histogram: Any) -> float | None:
    count = _get(histogram, "count")
    if count is not None:
        return float(count)
    counts = [float(c) for _, c in (_get(histogram, "buckets") or ())]
    return max(counts) if counts else None  # cut scrapes: the last bucket shown is a floor


def _dominant(components: dict[str, ComponentChange]) -> tuple[str | None, float | None]:
    """The inside clock whose mean grew the most (docs/sources.md#serving-metrics), with its share of the growth.

    A scrape without the prefill or decode clock (older vLLM, SGLang, TGI) stands in TTFT for
    prefill (it covers queue + prefill: the queue part is taken off when known) and ITL for decode.
    """
    changes: dict[str, float] = {}
    for name in INSIDE:
        change = components[name].change if name in components else None
        if change is None and name == "prefill" and "ttft" in components:
            change = _ttft_minus_queue(components)
        if change is None and name == "decode" and "itl" in components:
            change = components["itl"].change
        if change is not None:
            changes[name] = change
    growing = {name: change for name, change in changes.items() if change > 0}
    if not growing:
        return None, None
    name = max(growing, key=lambda n: growing[n])
    e2e = components.get("e2e")
    whole = e2e.change if e2e and e2e.change and e2e.change > 0 else sum(growing.values())
    return name, min(1.0, growing[name] / whole)


def _ttft_minus_queue(components: dict[str, ComponentChange]) -> float | None:
    ttft = components["ttft"].change
    queue = components["queue"].change if "queue" in components else None
    if ttft is None:
        return None
    return ttft - queue if queue is not None else ttft


def _requests_in_window(
    before: Mapping[str, Any], after: Mapping[str, Any], components: dict[str, ComponentChange]
) -> float | None:
    for name in ("request_success_total", "requests_total"):
        found = _counter_delta(name, before, after)
        if found is not None:
            return found
    for name in ("e2e", "ttft", "queue", "prefill"):
        if name in components and components[name].incident_count is not None:
            return components[name].incident_count
    return None


def _counter_delta(name: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> float | None:
    old, new = _number(before.get(name)), _number(after.get(name))
    if new is None:
        return None
    if old is None or new < old:
        return new  # first appearance, or a restart: the after-scrape alone
    return new - old


def _baseline_requests(before: Mapping[str, Any]) -> float | None:
    for name in ("request_success_total", "requests_total"):
        if _number(before.get(name)) is not None:
            return _number(before.get(name))
    for name in ("e2e", "ttft", "queue", "prefill"):
        histogram = (before.get("histograms") or {}).get(name)
        if histogram:
            return _observations(histogram)
    return None


def _per_request(
    length: str,
    counter: str,
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    components: dict[str, ComponentChange],
) -> Shift:
    """Tokens per request: the length histogram's means, else token counter / requests."""
    histogram_after = (after.get("length_histograms") or {}).get(length)
    if histogram_after:
        histogram_before = (before.get("length_histograms") or {}).get(length)
        window = delta(histogram_before, histogram_after)
        baseline = _mean(histogram_before)[0] if histogram_before and not window.reset_in_window else None
        return Shift(baseline, _mean(window)[0])
    tokens_before, tokens_window = _number(before.get(counter)), _counter_delta(counter, before, after)
    requests_before = _baseline_requests(before)
    requests_window = _requests_in_window(before, after, components)
    return Shift(
        tokens_before / requests_before if tokens_before is not None and requests_before else None,
        tokens_window / requests_window if tokens_window is not None and requests_window else None,
    )


def _hit_rate(before: Mapping[str, Any], after: Mapping[str, Any]) -> Shift:
    hits_before, queries_before = _number(before.get("prefix_cache_hits")), _number(before.get("prefix_cache_queries"))
    hits, queries = (
        _counter_delta("prefix_cache_hits", before, after),
        _counter_delta("prefix_cache_queries", before, after),
    )
    return Shift(
        hits_before / queries_before if hits_before is not None and queries_before else None,
        hits / queries if hits is not None and queries else None,
    )


def _engine_latency(components: dict[str, ComponentChange]) -> float | None:
    if "e2e" in components and components["e2e"].incident_mean is not None:
        return components["e2e"].incident_mean
    inside = [components[n].incident_mean for n in INSIDE if n in components]
    if inside and all(v is not None for v in inside):
        return math.fsum(v for v in inside if v is not None)
    return components["ttft"].incident_mean if "ttft" in components else None


def table(comparison: WindowComparison) -> list[dict[str, Any]]:
    """Rows for a verdict: component, baseline and incident mean and p99, change (seconds, ratio)."""
    rows = []
    for name in COMPONENTS:
        change = comparison.components.get(name)
        if change is None:
            continue
        rows.append(
            {
                "component": name,
                "baseline_mean": change.baseline_mean,
                "incident_mean": change.incident_mean,
                "change": change.change,
                "ratio": change.ratio,
                "baseline_p99": change.baseline_p99,
                "incident_p99": change.incident_p99,
                "incident_p99_at_least": change.incident_p99_at_least,
                "estimated": change.estimated,
                "moved": change.moved,
            }
        )
    return rows


def render_table(rows: list[dict[str, Any]]) -> str:
    """One line per component: ``queue 0.150 s -> 1.200 s (+1.050 s, x8.0)``, means in seconds."""
    parts = []
    for row in rows:
        base, now, change = row["baseline_mean"], row["incident_mean"], row["change"]
        text = f"{row['component']} {_seconds(base)} -> {_seconds(now)}"
        if change is not None:
            text += f" ({change:+.3f} s" + (f", x{row['ratio']:.1f}" if row["ratio"] else "") + ")"
        if row["incident_p99"] is not None:
            floor = ">= " if row["incident_p99_at_least"] else ""
            text += f", p99 {_seconds(row['baseline_p99'])} -> {floor}{_seconds(row['incident_p99'])}"
        if row["estimated"]:
            text += " [estimated from buckets]"
        parts.append(text)
    return "; ".join(parts)


def _seconds(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f} s"
