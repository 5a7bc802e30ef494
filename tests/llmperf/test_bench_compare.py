"""bench compare: the release gate blocks and passes on real benchmark outputs from the corpus."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from nightowl.cli.bench_cmd import bench
from nightowl.collectors.serving.bench_serve import parse
from nightowl.llmperf.bench_compare import Limits, compare, render_table
from tests.helpers import ROOT

SERVING = ROOT / "fixtures" / "corpus" / "serving"
LLAMA = SERVING / "vllm_bench_serve_sharegpt_llama31_8b_pr18566.txt"  # 6582.87 tok/s, ITL p99 214.35
GEMMA = SERVING / "vllm_bench_serve_new_format_failed_peak_gemma3_27b_pr33743.txt"  # 268.31 tok/s, ITL p99 258.31
SGLANG = SERVING / "sglang_bench_serving_vllm_chat_multimodal_ttft_equals_e2e_pr9812.txt"
LEGACY = SERVING / "vllm_2023_benchmark_serving_legacy_format_issue359.txt"


def rows(comparison) -> dict:  # noqa: ANN001 - test helper
    return {row.metric: row for row in comparison.rows}


def run(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(bench, ["compare", *map(str, args)])
    return result.exit_code, result.output


def test_same_result_passes() -> None:
    for sample in (LLAMA, GEMMA, SGLANG):
        code, output = run(sample, sample)
        assert code == 0, output
        assert "PASS" in output


def test_throughput_collapse_and_itl_tail_block() -> None:
    comparison = compare(parse(LLAMA.read_text()), parse(GEMMA.read_text()))
    by_metric = rows(comparison)
    assert comparison.blocked
    assert by_metric["request throughput (req/s)"].status == "block"  # 32.42 -> 0.77
    assert by_metric["output token throughput (tok/s)"].status == "block"  # 6582.87 -> 268.31
    itl = by_metric["ITL p99 (ms)"]  # 214.35 -> 258.31 = +20.5% > 15%
    assert itl.status == "block" and round(itl.change_pct, 1) == 20.5
    # vllm bench serve prints P99 only: the TTFT gate falls back to it and says so
    ttft = by_metric["TTFT p99 (ms)"]
    assert ttft.status == "ok" and "p95 not printed" in ttft.note
    assert by_metric["failed requests"].current == 0 and by_metric["failed requests"].status == "ok"
    assert by_metric["preemptions"].status == "not-compared"
    assert any("request count differs" in note for note in comparison.notes)


def test_ttft_tail_blocks_the_other_way() -> None:
    comparison = compare(parse(GEMMA.read_text()), parse(LLAMA.read_text()))
    by_metric = rows(comparison)
    assert by_metric["TTFT p99 (ms)"].status == "block"  # 4610.48 -> 12666.73, +174.7%
    assert round(by_metric["TTFT p99 (ms)"].change_pct, 1) == 174.7
    assert by_metric["ITL p99 (ms)"].status == "ok"  # 258.31 -> 214.35
    assert by_metric["output token throughput (tok/s)"].status == "ok"
    # the baseline printed "Failed requests: 0", the current run has no such row
    assert by_metric["failed requests"].status == "not-compared"


def test_cli_exit_status_and_table() -> None:
    code, output = run(LLAMA, GEMMA)
    assert code == 1
    assert "BLOCK: request throughput (req/s), output token throughput (tok/s), ITL p99 (ms)" in output
    assert "+20.5%" in output and "-95.9%" in output


def test_limits_are_options() -> None:
    code, output = run(LLAMA, GEMMA, "--max-throughput-drop", "100", "--max-itl-rise", "25")
    assert code == 0, output
    assert Limits().ttft_percentile == "p95" and Limits().itl_rise_pct == 15.0


def test_a_failed_request_blocks(tmp_path: Path) -> None:
    # the gemma result with its "Failed requests: 0" row changed to 2 (a modified copy, not a corpus file)
    text = GEMMA.read_text()
    assert "Failed requests:                         0\n" in text
    failing = tmp_path / "failing.txt"
    failing.write_text(
        text.replace("Failed requests:                         0\n", "Failed requests:                         2\n")
    )
    code, output = run(GEMMA, failing)
    assert code == 1 and "BLOCK: failed requests" in output


def test_preemptions_from_engine_metrics(tmp_path: Path) -> None:
    before, after = tmp_path / "before.prom", tmp_path / "after.prom"
    before.write_text('vllm:num_preemptions_total{model_name="m"} 3\n')
    after.write_text('vllm:num_preemptions_total{model_name="m"} 5\n')
    code, output = run(GEMMA, GEMMA, "--metrics-before", before, "--metrics-after", after)
    assert code == 1 and "BLOCK: preemptions" in output
    code, _ = run(GEMMA, GEMMA, "--metrics-before", after, "--metrics-after", after)
    assert code == 0


def test_legacy_results_compare_throughput_only() -> None:
    comparison = compare(parse(LEGACY.read_text()), parse(LEGACY.read_text()))
    by_metric = rows(comparison)
    assert by_metric["request throughput (req/s)"].status == "ok"
    assert by_metric["output token throughput (tok/s)"].status == "not-compared"
    assert "PASS" in render_table(comparison)


def test_nothing_comparable_is_an_input_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk.txt"
    junk.write_text("not a benchmark\n")
    code, output = run(junk, junk)
    assert code == 2 and "no benchmark result recognised" in output and "PASS" not in output


def test_json_format() -> None:
    result = CliRunner().invoke(bench, ["compare", str(LLAMA), str(GEMMA), "--format", "json"])
    payload = json.loads(result.stdout)
    assert payload["blocked"] is True and payload["rows"][0]["metric"] == "request throughput (req/s)"
