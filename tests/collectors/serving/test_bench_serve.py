"""bench-serve: one JSON case per corpus benchmark output, plus formats the corpus does not hold."""

from __future__ import annotations

import json

from nightowl.collectors.serving.bench_serve import COLLECTOR, facts, parse, rows


def test_percentile_rows_of_metric_percentiles_and_e2el() -> None:
    # rows as `vllm bench serve --percentile-metrics ttft,itl,e2el --metric-percentiles 50,95,99.9` prints
    # them (label shape of the corpus samples; composed values)
    text = "\n".join(
        [
            "============ Serving Benchmark Result ============",
            "Successful requests:                     200",
            "Failed requests:                         3",
            "Request throughput (req/s):              4.10",
            "Request goodput (req/s):                 3.20",
            "---------------Time to First Token----------------",
            "Mean TTFT (ms):                          120.50",
            "P50 TTFT (ms):                           110.00",
            "P95 TTFT (ms):                           300.25",
            "P99.9 TTFT (ms):                         900.00",
            "----------------End-to-end Latency----------------",
            "Mean E2EL (ms):                          5000.00",
            "==================================================",
            "Mean ITL (ms):                           99.00",
        ]
    )
    result = parse(text)
    assert result.failed_requests == 3 and result.request_goodput == 3.2
    assert result.latency_ms["ttft"] == {"mean": 120.5, "p50": 110.0, "p95": 300.25, "p99_9": 900.0}
    assert result.latency_ms["e2el"] == {"mean": 5000.0}
    assert "itl" not in result.latency_ms  # after the closing rule: not part of the block
    derived = facts(result)
    assert derived["ttft_p95_ms"] == 300.25 and derived["itl_p99_ms"] is None
    assert derived["requests_total"] == 203


def test_save_result_json() -> None:
    # key names of benchmark_serving.py --save-result [M]; values composed
    saved = {
        "backend": "vllm",
        "completed": 100,
        "request_throughput": 2.5,
        "output_throughput": 480.0,
        "mean_ttft_ms": 80.0,
        "p99_ttft_ms": 240.5,
        "median_itl_ms": 20.0,
        "p99_itl_ms": 55.0,
        "input_lens": [1, 2],
        "request_rate": "inf",
    }
    result = parse(json.dumps(saved))
    assert result.tool == "json" and result.successful_requests == 100
    assert result.output_token_throughput == 480.0
    assert result.latency_ms == {"ttft": {"mean": 80.0, "p99": 240.5}, "itl": {"median": 20.0, "p99": 55.0}}


def test_text_that_is_not_a_benchmark() -> None:
    result = parse("INFO 05-01 api_server.py] vLLM API server version 0.9.0\n")
    assert result.tool is None and result.warnings
    assert parse("").warnings == ()
    assert parse("{not json").warnings


def test_table_and_collector() -> None:
    assert all(row.source for row in rows())
    assert COLLECTOR.kind == "bench-serve"
    assert COLLECTOR.commands == (("cat", "--", "{bench_result_file}"),)
