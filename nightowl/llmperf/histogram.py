"""Pure arithmetic on cumulative Prometheus histograms: window deltas, quantiles, means.

Input histograms have the `metrics` contract shape (docs/reference.md#parse-output): a mapping
``{"count": n | None, "sum": s | None, "buckets": [[le, cumulative], ...]}`` where ``le`` is a
number or the string ``"+Inf"`` (JSON has no infinity). The quantile follows Prometheus'
``histogram_quantile`` (``BucketQuantile`` in prometheus/promql/quantile.go), so a p99 computed
here matches the one on the team's dashboards.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

INF_LABEL = "+Inf"


@dataclass(frozen=True)
class HistogramDelta:
    """What happened inside a window: per-bucket increases, or the after-scrape alone on a reset."""

    count: float | None
    sum: float | None
    buckets: tuple[tuple[float | str, float], ...]
    # a counter went down between the scrapes: the process restarted inside the window and
    # the deltas would be garbage, so ``after`` is used alone (prometheus promql/quantile.go,
    # docs/sources.md#histogram-quantile)
    reset_in_window: bool


@dataclass(frozen=True)
class Quantile:
    value: float | None  # None: not computable (no +Inf bucket, < 2 buckets, no observations)
    # the rank fell in the +Inf bucket: ``value`` is the highest finite bound, a floor ("p99 >= X")
    at_least: bool


def bound(le: Any) -> float:
    """A bucket bound from the contract form (number or "+Inf") or Prometheus' label text."""
    if isinstance(le, str):
        text = le.strip()
        if text in ("+Inf", "Inf", "inf", "+inf"):
            return math.inf
        return float(text)
    return float(le)


def bound_label(upper: float) -> float | str:
    """The contract (JSON-safe) form of a bound: "+Inf" for infinity, else the number."""
    return INF_LABEL if math.isinf(upper) and upper > 0 else upper


def _fields(histogram: Mapping[str, Any] | Any | None) -> tuple[Any, Any, list[tuple[float, float]]]:
    if histogram is None:
        return None, None, []
    get = histogram.get if isinstance(histogram, Mapping) else lambda key: getattr(histogram, key, None)
    buckets = [(bound(le), float(cumulative)) for le, cumulative in (get("buckets") or ())]
    return get("count"), get("sum"), sorted(buckets)


def delta(before: Mapping[str, Any] | Any | None, after: Mapping[str, Any] | Any) -> HistogramDelta:
    """Increase of one histogram between two scrapes (``before`` may be None: window from zero).

    Buckets present in ``after`` but not in ``before`` count from zero. A bucket, ``_count`` or
    ``_sum`` that went down flags ``reset_in_window`` and returns ``after`` unchanged.
    """
    count_a, sum_a, buckets_a = _fields(after)
    count_b, sum_b, buckets_b = _fields(before)
    previous = dict(buckets_b)
    went_down = any(cumulative < previous.get(le, 0.0) for le, cumulative in buckets_a)
    went_down = went_down or _decreased(count_b, count_a) or _decreased(sum_b, sum_a)
    if went_down:
        return HistogramDelta(count_a, sum_a, tuple((bound_label(le), c) for le, c in buckets_a), True)
    buckets = tuple((bound_label(le), cumulative - previous.get(le, 0.0)) for le, cumulative in buckets_a)
    return HistogramDelta(_minus(count_a, count_b), _minus(sum_a, sum_b), buckets, False)


def _decreased(before: Any, after: Any) -> bool:
    return before is not None and after is not None and float(after) < float(before)


def _minus(after: Any, before: Any) -> float | None:
    if after is None:
        return None
    return float(after) - (float(before) if before is not None else 0.0)


def quantile(q: float, buckets: Iterable[Sequence[Any]]) -> Quantile:
    """Prometheus ``histogram_quantile(q, ...)`` over cumulative ``[[le, count], ...]`` buckets.

    Linear interpolation inside the bucket holding rank ``q x total``; the first bucket's lower
    edge is 0 (unless its bound is <= 0, then the bound itself is returned); if the rank falls in
    the +Inf bucket the second-highest bound is returned with ``at_least=True``. One deviation:
    Prometheus yields NaN when the chosen bucket is empty (q=0 over an empty first bucket); this
    returns the bucket's lower edge instead. ``q`` outside [0, 1] is a caller error (ValueError).
    """
    if not 0.0 <= q <= 1.0 or math.isnan(q):
        raise ValueError(f"quantile must be within [0, 1], got {q!r}")
    merged: dict[float, float] = {}
    for le, cumulative in buckets:  # same bound twice (label sets not summed yet): add them
        upper = bound(le)
        merged[upper] = merged.get(upper, 0.0) + float(cumulative)
    ordered = sorted(merged.items())
    if len(ordered) < 2 or not math.isinf(ordered[-1][0]):
        return Quantile(None, False)
    ordered = _monotonic(ordered)
    total = ordered[-1][1]
    if total <= 0:
        return Quantile(None, False)
    rank = q * total
    finite = ordered[:-1]
    index = next((i for i, (_, cumulative) in enumerate(finite) if cumulative >= rank), len(finite))
    if index == len(ordered) - 1:
        return Quantile(ordered[-2][0], True)
    upper, cumulative = ordered[index]
    if index == 0 and upper <= 0:
        return Quantile(upper, False)
    lower, below = ordered[index - 1] if index > 0 else (0.0, 0.0)
    in_bucket = cumulative - below
    if in_bucket <= 0:
        return Quantile(lower, False)
    return Quantile(lower + (upper - lower) * (rank - below) / in_bucket, False)


def _monotonic(ordered: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Cumulative counts never go down with the bound (Prometheus ``ensureMonotonic``)."""
    highest = 0.0
    fixed = []
    for upper, cumulative in ordered:
        highest = max(highest, cumulative)
        fixed.append((upper, highest))
    return fixed


def window_mean(window: HistogramDelta | Mapping[str, Any] | Any | None) -> float | None:
    """Mean observation in a window: delta(_sum) / delta(_count); None with no observations.

    Means are additive across queue/prefill/decode, percentiles are not (docs/sources.md#histogram-quantile).
    """
    if window is None:
        return None
    count, total, _ = _fields(window)
    if count is None or total is None or float(count) <= 0:
        return None
    return float(total) / float(count)
