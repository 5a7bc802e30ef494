"""Window comparison (nightowl.llmperf.p99) and the metrics-window facts, on hand-made and recorded scrapes."""

from __future__ import annotations

import pytest

from nightowl.collectors.serving import metrics as prometheus
from nightowl.collectors.serving.metrics_window import COLLECTOR, derive
from nightowl.llmperf import p99
from tests.helpers import ROOT

HOSTS = ROOT / "fixtures" / "hosts"


def hist(count: float, total: float, buckets: list[tuple[float | str, float]]) -> dict:
    return {"count": count, "sum": total, "buckets": [list(b) for b in buckets]}


def scrape(**fields: object) -> dict:
    histograms = {name: fields.pop(name) for name in p99.COMPONENTS if name in fields}
    lengths = {name: fields.pop(name) for name in ("prompt_tokens", "generation_tokens") if name in fields}
    return {"histograms": histograms, "length_histograms": lengths, **fields}


def recorded(host: str) -> tuple[dict, dict]:
    before = prometheus.facts(prometheus.parse((HOSTS / host / "metrics.1.out").read_text()))
    after = prometheus.facts(prometheus.parse((HOSTS / host / "metrics.2.out").read_text()))
    return before, after


# --- arithmetic on hand-made scrapes ------------------------------------------------------------

# baseline: 100 requests, queue 0.1 s, prefill 0.2 s, decode 2.0 s, e2e 2.35 s (means)
BEFORE = scrape(
    queue=hist(100, 10, [(0.5, 100), ("+Inf", 100)]),
    prefill=hist(100, 20, [(0.5, 100), ("+Inf", 100)]),
    decode=hist(100, 200, [(5, 100), ("+Inf", 100)]),
    e2e=hist(100, 235, [(5, 100), ("+Inf", 100)]),
    requests_running=8,
    requests_waiting=0,
    kv_cache_usage=0.4,
    preemptions_total=3,
    prompt_tokens_total=50_000,
    generation_tokens_total=20_000,
    request_success_total=100,
    prefix_cache_hits=30_000,
    prefix_cache_queries=50_000,
)


def test_queue_growth_is_attributed_by_window_means() -> None:
    # window: 50 requests, queue 2.1 s mean (+2.0), prefill and decode unchanged, e2e 4.35 s (+2.0)
    after = scrape(
        queue=hist(150, 115, [(0.5, 110), ("+Inf", 150)]),
        prefill=hist(150, 30, [(0.5, 150), ("+Inf", 150)]),
        decode=hist(150, 300, [(5, 150), ("+Inf", 150)]),
        e2e=hist(150, 452.5, [(5, 140), ("+Inf", 150)]),
        requests_running=8,
        requests_waiting=40,
        kv_cache_usage=0.97,
        preemptions_total=3,
        prompt_tokens_total=75_000,
        generation_tokens_total=30_000,
        request_success_total=150,
        prefix_cache_hits=45_000,
        prefix_cache_queries=75_000,
    )
    result = p99.compare(BEFORE, after)
    queue = result.components["queue"]
    assert (queue.baseline_mean, queue.incident_mean) == pytest.approx((0.1, 2.1))
    assert queue.change == pytest.approx(2.0) and queue.ratio == pytest.approx(21.0) and queue.moved
    assert not result.components["decode"].moved and not result.components["prefill"].moved
    assert result.dominant == "queue" and result.dominant_share == pytest.approx(1.0)
    assert result.moved == ("queue", "e2e")
    # 10 of 50 window requests above 0.5 s: the p99 falls in the +Inf bucket -> "at least 0.5"
    assert queue.incident_p99 == 0.5 and queue.incident_p99_at_least is True
    assert result.requests_in_window == 50 and result.preemptions_in_window == 0
    assert (result.kv_cache_usage.baseline, result.kv_cache_usage.incident) == (0.4, 0.97)
    assert result.prompt_tokens_per_request.ratio == pytest.approx(1.0)  # 500 -> 500 tokens
    assert result.prefix_cache_hit_rate.incident == pytest.approx(0.6)
    assert not result.restart_in_window


def test_decode_growth_with_preemptions_and_longer_outputs() -> None:
    # window: 100 requests, decode 4.0 s (+2.0), 40 preemptions, 400 generated tokens per request (was 200)
    after = scrape(
        queue=hist(200, 20, [(0.5, 200), ("+Inf", 200)]),
        prefill=hist(200, 40, [(0.5, 200), ("+Inf", 200)]),
        decode=hist(200, 600, [(5, 200), ("+Inf", 200)]),
        e2e=hist(200, 670, [(5, 200), ("+Inf", 200)]),
        requests_running=16,
        preemptions_total=43,
        generation_tokens_total=60_000,
        request_success_total=200,
        prompt_tokens_total=100_000,
    )
    result = p99.compare(BEFORE, after)
    assert result.dominant == "decode"
    assert result.components["decode"].change == pytest.approx(2.0)
    assert result.dominant_share == pytest.approx(2.0 / 2.0)  # e2e 2.35 -> 4.35
    assert result.preemptions_in_window == 40
    assert result.generation_tokens_per_request.baseline == pytest.approx(200)
    assert result.generation_tokens_per_request.incident == pytest.approx(400)
    assert result.running.ratio == pytest.approx(2.0)


def test_prefix_cache_drop_and_length_histograms() -> None:
    # prompt length histogram: baseline mean 500 tokens, window mean 500; hit rate 0.6 -> 0.2
    before = {**BEFORE, "length_histograms": {"prompt_tokens": hist(100, 50_000, [(1000, 100), ("+Inf", 100)])}}
    after = scrape(
        prefill=hist(150, 45, [(0.5, 140), ("+Inf", 150)]),
        prompt_tokens=hist(150, 75_000, [(1000, 150), ("+Inf", 150)]),
        prefix_cache_hits=35_000,
        prefix_cache_queries=75_000,
    )
    result = p99.compare(before, after)
    assert result.dominant == "prefill" and result.components["prefill"].incident_mean == pytest.approx(0.5)
    assert result.prompt_tokens_per_request.ratio == pytest.approx(1.0)
    assert result.prefix_cache_hit_rate.baseline == pytest.approx(0.6)
    assert result.prefix_cache_hit_rate.incident == pytest.approx(0.2)


def test_counter_going_down_flags_a_restart() -> None:
    after = scrape(queue=hist(5, 0.5, [(0.5, 5), ("+Inf", 5)]), request_success_total=5)
    result = p99.compare(BEFORE, after)
    assert result.restart_in_window and set(result.restarted_series) == {"request_success_total", "queue"}
    assert result.components["queue"].baseline_mean is None  # the history is gone with the process
    assert result.components["queue"].incident_mean == pytest.approx(0.1)


def test_small_wobble_is_not_a_regression() -> None:
    # queue 0.1 s -> 0.104 s: +4 % and +4 ms, below both thresholds
    after = scrape(queue=hist(200, 20.4, [(0.5, 200), ("+Inf", 200)]))
    result = p99.compare(BEFORE, after)
    assert result.moved == () and result.dominant == "queue"  # grew the most, but did not "move"


def test_means_from_buckets_when_the_scrape_has_no_sum() -> None:
    # 10 in (0, 0.1] (midpoint 0.05), 10 in (0.1, 0.3] (midpoint 0.2): mean 0.125
    mean, estimated = p99._mean({"count": None, "sum": None, "buckets": [[0.1, 10], [0.3, 20]]})
    assert estimated and mean == pytest.approx(0.125)


def test_render_table_shows_baseline_incident_change() -> None:
    rows = [
        {
            "component": "queue",
            "baseline_mean": 0.1,
            "incident_mean": 2.1,
            "change": 2.0,
            "ratio": 21.0,
            "baseline_p99": 0.495,
            "incident_p99": 0.5,
            "incident_p99_at_least": True,
            "estimated": False,
            "moved": True,
        }
    ]
    assert p99.render_table(rows) == "queue 0.100 s -> 2.100 s (+2.000 s, x21.0), p99 0.495 s -> >= 0.500 s"


# --- the recorded p99 hosts (first scrape real, second derived: see their SOURCE.md) --------------


def test_recorded_itl_slowdown() -> None:
    # TPOT history: 3328 in (0.01, 0.025], 128247 in (0.025, 0.05], ... ; window adds 10000 slower tokens
    facts = derive(dict(zip(("metrics", "metrics_after"), recorded("p99-vllm-itl-slowdown"), strict=True)))
    assert facts["engine"] == "vllm" and facts["engine_moved"] and facts["dominant"] == "decode"
    row = next(r for r in facts["table"] if r["component"] == "itl")
    assert row["estimated"] and row["baseline_mean"] == pytest.approx(0.039, abs=0.001)
    # window: (2000 x 0.0375 + 3000 x 0.0625 + 3000 x 0.0875 + 1500 x 0.125 + 300 x 0.175 + 200 x 0.25) / 10000
    #   = (75 + 187.5 + 262.5 + 187.5 + 52.5 + 50) / 10000
    assert row["incident_mean"] == pytest.approx(0.0815)
    assert "itl 0.039 s -> 0.082 s" in facts["table_text"]


def test_recorded_queue_growth_and_restart() -> None:
    facts = derive(dict(zip(("metrics", "metrics_after"), recorded("p99-vllm-queue-growth"), strict=True)))
    assert facts["dominant"] == "queue" and facts["requests_in_window"] == 45
    facts = derive(dict(zip(("metrics", "metrics_after"), recorded("p99-vllm-queue-restart"), strict=True)))
    assert facts["restart_in_window"] is True and facts["restarted_series"] == ["queue"]


def test_recorded_longer_prompts() -> None:
    # 1196 prompt tokens over 213 TTFT observations before; +2000 over +100 in the window
    facts = derive(dict(zip(("metrics", "metrics_after"), recorded("p99-vllm-ttft-longer-prompts"), strict=True)))
    shift = facts["prompt_tokens_per_request"]
    assert shift["baseline"] == pytest.approx(1196 / 213) and shift["incident"] == pytest.approx(20.0)
    assert facts["dominant"] == "prefill"  # TTFT stands in for the prefill clock


def test_recorded_tgi_style_scrape_has_no_window() -> None:
    facts = derive(
        dict(zip(("metrics", "metrics_after"), recorded("p99-tgi-style-no-request-histograms"), strict=True))
    )
    assert facts["has_window"] is False and facts["table"] == [] and facts["engine"] == "tgi"


def test_derived_collector_declaration() -> None:
    assert COLLECTOR.kind == "metrics-window" and COLLECTOR.inputs == ("metrics", "metrics_after")
    assert COLLECTOR.commands == ()
    with pytest.raises(TypeError):
        COLLECTOR.parse("text")


def test_window_shows_the_decode_floor_next_to_itl(tmp_path) -> None:  # noqa: ANN001
    import json

    from nightowl.llmperf.floor import decode_floor
    from tests.llmperf.test_floor import LLAMA_31_8B

    config = tmp_path / "config.json"
    config.write_text(json.dumps(LLAMA_31_8B))
    scrapes = dict(zip(("metrics", "metrics_after"), recorded("p99-vllm-itl-slowdown"), strict=True))
    facts = derive(scrapes, {"model_config": str(config), "gpu": "H100-SXM", "tp": 1, "context": 4096})
    floor = facts["decode_floor"]
    batch = max(1, round(scrapes["metrics_after"].get("requests_running") or 1))
    expected = decode_floor(LLAMA_31_8B, "H100-SXM", tp=1, batch=batch, context=4096).step_seconds * 1000
    assert floor["step_ms"] == pytest.approx(expected, rel=1e-3)
    itl = next(r["incident_mean"] for r in facts["table"] if r["component"] == "itl")
    assert floor["itl_ratio"] == pytest.approx(itl * 1000 / floor["step_ms"], rel=1e-2)
    assert "decode floor" in facts["table_text"] and "the floor" in facts["table_text"]
    assert derive(scrapes)["decode_floor"] == {}  # no model: no floor, no guess
