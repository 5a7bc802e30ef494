"""Histogram window arithmetic, checked against Prometheus histogram_quantile semantics."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nightowl.collectors.base import to_jsonable
from nightowl.collectors.serving.metrics import parse
from nightowl.llmperf.histogram import delta, quantile, window_mean
from tests.helpers import ROOT

BUCKETS = [[0.1, 10], [0.5, 60], [1.0, 100], ["+Inf", 100]]


def test_linear_interpolation_inside_the_bucket() -> None:
    assert quantile(0.5, BUCKETS).value == pytest.approx(0.1 + 0.4 * 40 / 50)
    assert quantile(0.99, BUCKETS).value == pytest.approx(0.5 + 0.5 * 39 / 40)
    assert quantile(0.05, BUCKETS).value == pytest.approx(0.05)  # first bucket starts at 0
    assert quantile(0.99, BUCKETS).at_least is False


def test_rank_in_inf_bucket_is_a_floor() -> None:
    result = quantile(0.99, [[0.1, 0], [0.25, 1], ["+Inf", 5]])
    assert (result.value, result.at_least) == (0.25, True)


def test_not_computable_cases() -> None:
    assert quantile(0.5, [[0.1, 1], [0.5, 2]]).value is None  # no +Inf (a truncated paste)
    assert quantile(0.5, [["+Inf", 3]]).value is None  # fewer than two buckets
    assert quantile(0.5, [[0.1, 0], ["+Inf", 0]]).value is None  # no observations
    with pytest.raises(ValueError):
        quantile(1.5, BUCKETS)


def test_first_bound_not_positive_and_non_monotonic_input() -> None:
    assert quantile(0.1, [[-1.0, 5], [1.0, 10], ["+Inf", 10]]).value == -1.0
    # cumulative counts that dip (scrape race) are made monotonic as Prometheus does
    assert quantile(0.75, [[0.1, 10], [0.5, 8], [1.0, 20], ["+Inf", 20]]).value == pytest.approx(0.75)
    # the same bound twice (label sets not summed yet) is added up
    assert quantile(0.5, [[1.0, 1], [1.0, 1], ["+Inf", 2], ["+Inf", 2]]).value == pytest.approx(1.0)


def test_delta_and_window_mean() -> None:
    before = {"count": 10, "sum": 2.0, "buckets": [[0.1, 5], [1.0, 10], ["+Inf", 10]]}
    after = {"count": 30, "sum": 12.0, "buckets": [[0.1, 5], [1.0, 25], ["+Inf", 30]]}
    window = delta(before, after)
    assert window.reset_in_window is False
    assert to_jsonable(window.buckets) == [[0.1, 0], [1.0, 15], ["+Inf", 20]]
    assert window_mean(window) == pytest.approx(0.5)
    assert quantile(0.5, window.buckets).value == pytest.approx(0.1 + 0.9 * 10 / 15)


def test_counter_that_went_down_flags_a_restart() -> None:
    before = {"count": 30, "sum": 12.0, "buckets": [[1.0, 25], ["+Inf", 30]]}
    after = {"count": 4, "sum": 1.0, "buckets": [[1.0, 4], ["+Inf", 4]]}
    window = delta(before, after)
    assert window.reset_in_window is True
    assert (window.count, to_jsonable(window.buckets)) == (4, [[1.0, 4], ["+Inf", 4]])
    assert window_mean(delta(None, after)) == 0.25
    assert window_mean({"count": 0, "sum": 0, "buckets": []}) is None


def test_works_on_parsed_corpus_histogram() -> None:
    sample = "vllm_metrics_v0_qwen32b_prodstack318_part2_tpot_histogram.txt"
    text = (ROOT / "fixtures" / "corpus" / "serving" / sample).read_text()
    itl = to_jsonable(parse(text).histograms["itl"])
    assert quantile(0.5, itl["buckets"]).value is None  # the excerpt lost its +Inf bucket
    closed = [*itl["buckets"], ["+Inf", 135001]]
    # 131575 of 135001 below 50 ms: the median sits in (0.025, 0.05]
    assert 0.025 < quantile(0.5, closed).value < 0.05


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=1000), min_size=1, max_size=8),
    st.floats(min_value=0, max_value=1),
    st.floats(min_value=0, max_value=1),
)
def test_quantile_is_monotonic_and_within_bounds(increments: list[int], q1: float, q2: float) -> None:
    cumulative, buckets = 0, []
    for index, step in enumerate(increments):
        cumulative += step
        buckets.append([0.1 * (index + 1), cumulative])
    buckets.append(["+Inf", cumulative + 1])
    low, high = sorted((q1, q2))
    a, b = quantile(low, buckets).value, quantile(high, buckets).value
    assert a is not None and b is not None and not math.isnan(a)
    assert 0 <= a <= b <= buckets[-2][0]
