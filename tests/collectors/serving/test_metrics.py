"""metrics collector: one JSON case per corpus scrape, alias and label-set rules, robustness."""

# ruff: noqa: E501 - metric lines are kept verbatim, one per source line

from __future__ import annotations

import pytest

from nightowl.collectors.serving.metrics import ALIASES, COLLECTOR, facts, parse


def test_collector_declaration() -> None:
    assert COLLECTOR.kind == "metrics"
    assert COLLECTOR.invasive is False
    assert COLLECTOR.commands == (("curl", "-sS", "--fail", "--max-time", "5", "--", "{metrics_url}"),)


def test_alias_table_rows_name_their_source() -> None:
    assert all(alias.source for alias in ALIASES)
    assert {alias.engine for alias in ALIASES} == {"vllm", "sglang", "tgi"}


# --- label sets, aliases, derived facts --------------------------------------------------------

TWO_ENGINES = """\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 4.0
vllm:num_requests_waiting{engine="0",model_name="m"} 0.0
vllm:num_requests_waiting{engine="1",model_name="m"} 2.0
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.31
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.97
vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.31
vllm:num_preemptions_total{engine="0",model_name="m"} 5.0
vllm:num_preemptions_total{engine="1",model_name="m"} 7.0
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 1000.0
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 250.0
vllm:inter_token_latency_seconds_bucket{engine="0",le="0.1",model_name="m"} 10.0
vllm:inter_token_latency_seconds_bucket{engine="0",le="0.5",model_name="m"} 60.0
vllm:inter_token_latency_seconds_bucket{engine="0",le="+Inf",model_name="m"} 100.0
vllm:inter_token_latency_seconds_count{engine="0",model_name="m"} 100.0
vllm:inter_token_latency_seconds_sum{engine="0",model_name="m"} 30.0
vllm:inter_token_latency_seconds_bucket{engine="1",le="0.1",model_name="m"} 0.0
vllm:inter_token_latency_seconds_bucket{engine="1",le="0.5",model_name="m"} 0.0
vllm:inter_token_latency_seconds_bucket{engine="1",le="+Inf",model_name="m"} 100.0
vllm:inter_token_latency_seconds_count{engine="1",model_name="m"} 100.0
vllm:inter_token_latency_seconds_sum{engine="1",model_name="m"} 90.0
vllm:time_per_output_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 100.0
vllm:time_per_output_token_seconds_count{engine="0",model_name="m"} 100.0
vllm:e2e_request_latency_seconds_count{model_name="other"} 1.0
"""


def test_label_sets_are_summed_and_new_names_win() -> None:
    result = facts(parse(TWO_ENGINES))
    assert result["engine"] == "vllm"
    assert result["requests_running"] == 7
    assert result["requests_waiting"] == 2
    assert result["kv_cache_usage"] == 0.97  # fullest engine, not the sum, not the old name
    assert result["preemptions_total"] == 12
    # the deprecated time_per_output_token series is exposed too; it must not be added in
    assert result["histograms"]["itl"] == {"count": 200, "sum": 120, "buckets": [[0.1, 10], [0.5, 60], ["+Inf", 200]]}
    assert result["itl_mean"] == pytest.approx(0.6)
    assert result["itl_p99"] == 0.5 and result["itl_p99_at_least"] is True
    assert result["itl_p50"] == 0.5  # rank 100 is reached exactly at le=0.5
    assert result["prefix_cache_hit_rate"] == 0.25
    assert result["models"] == ["m", "other"]
    assert result["ttft_p99"] is None and result["ttft_mean"] is None


def test_old_names_map_to_the_same_fields() -> None:
    text = (
        'vllm:gpu_cache_usage_perc{model_name="m"} 0.5\n'
        'vllm:time_per_output_token_seconds_bucket{le="0.05",model_name="m"} 4.0\n'
        'vllm:time_per_output_token_seconds_bucket{le="+Inf",model_name="m"} 4.0\n'
        'vllm:gpu_prefix_cache_hits_total{model_name="m"} 3.0\n'
        'vllm:gpu_prefix_cache_queries_total{model_name="m"} 4.0\n'
    )
    result = facts(parse(text))
    assert result["kv_cache_usage"] == 0.5
    assert result["histograms"]["itl"]["buckets"] == [[0.05, 4], ["+Inf", 4]]
    assert result["prefix_cache_hit_rate"] == 0.75


def test_sglang_and_tgi_histogram_names() -> None:
    sglang = (
        'sglang:time_to_first_token_seconds_bucket{le="1.0",model_name="m"} 2.0\n'
        'sglang:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 2.0\n'
        'sglang:num_queue_reqs{model_name="m"} 9.0\n'
        'sglang:num_retracted_requests_total{model_name="m"} 4.0\n'
    )
    result = facts(parse(sglang))
    assert result["engine"] == "sglang"
    assert result["histograms"]["ttft"]["buckets"] == [[1.0, 2], ["+Inf", 2]]
    assert result["requests_waiting"] == 9 and result["preemptions_total"] == 4
    tgi = 'tgi_request_queue_duration_bucket{le="0.1"} 3\ntgi_request_queue_duration_bucket{le="+Inf"} 3\ntgi_request_queue_duration_count 3\n'
    assert facts(parse(tgi))["histograms"]["queue"]["count"] == 3


def test_truncated_scrape_falls_back_to_line_reader() -> None:
    text = (
        "# HELP vllm:num_requests_running Number of requests currently running on GPU.\n"
        "# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{model_name="m"} 2.0\n'
        "tgi_batch_inference_duration_bucket{le=\"0.5\",method=\"{'method': 'prefill'}\"} 4.0\n"
        'vllm:num_requests_waiting{model_name="m'
    )
    result = parse(text)
    assert result.requests_running == 2
    assert result.requests_waiting is None
    assert len(result.warnings) == 1 and "line 5" in result.warnings[0]


def test_nan_samples_are_ignored() -> None:
    assert parse('vllm:num_requests_running{model_name="m"} NaN\n').requests_running is None
