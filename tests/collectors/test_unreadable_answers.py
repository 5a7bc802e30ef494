"""Issue 30.5: an answer that exited 0 but holds nothing readable is no_data (never healthy); a duplicated
/metrics series is read once and warned about, never summed."""

from __future__ import annotations

from pathlib import Path

import pytest

from nightowl.collectors import get_collector
from nightowl.engine.output_status import shows_nothing
from tests.helpers import ROOT

HOSTS = ROOT / "fixtures" / "hosts"


@pytest.mark.parametrize(
    "host", ["nvsmi-exit0-timestamp-only", "nvsmi-exit0-html-error-page", "nvsmi-exit0-xml-zero-gpus"]
)
def test_nvidia_smi_with_nothing_readable_shows_nothing(host: str) -> None:
    assert shows_nothing(get_collector("nvidia-smi"), (HOSTS / host / "nvidia-smi.out").read_text())


@pytest.mark.parametrize(
    "sample",
    [
        "fixtures/corpus/gpu/nvsmi-q-l40s-550-healthy.txt",
        "fixtures/corpus/gpu/nvsmi-table-h100-sxm-x8-565.txt",
        "fixtures/corpus/gpu/nvsmi-qx-tesla-t4-515-passthrough.xml",
        "fixtures/corpus/gpu/nvsmi-unable-device-handle-unknown-error.txt",  # an error is something to judge
        "fixtures/corpus/gpu/nvsmi-q-ecc-block-sram-ue-vol1-agg5-ml-engineering.txt",  # a headerless fragment
    ],
)
def test_readable_nvidia_smi_shows_something(sample: str) -> None:
    assert not shows_nothing(get_collector("nvidia-smi"), (ROOT / sample).read_text())


def _scrape(host: str, number: int) -> str:
    return (HOSTS / host / f"replica-metrics.{number}.out").read_text()


def test_metrics_of_only_nan_show_nothing() -> None:
    nan_only = _scrape("first-look-nan-metrics-r1", 1)
    for kind in ("metrics", "replica-metrics"):
        assert shows_nothing(get_collector(kind), nan_only)
        assert not shows_nothing(get_collector(kind), _scrape("first-look-clear-r1", 1))
    collector = get_collector("metrics")
    facts = collector.facts(collector.parse(nan_only))
    assert facts["has_samples"] is False
    assert all(h is None for h in facts["histograms"].values())
    assert shows_nothing(collector, "vllm:num_requests_running +Inf\nvllm:gpu_cache_usage_perc -Inf\n")


@pytest.mark.parametrize("cut", [False, True], ids=["whole", "cut-short"])
def test_duplicated_series_read_once_with_a_warning(cut: bool) -> None:
    scrape = _scrape("first-look-clear-r1", 1)
    doubled = scrape + scrape  # two registries, or a proxy that concatenated two scrapes
    if cut:
        doubled += 'vllm:num_requests_running{model_name="Qwen'  # forces the per-line reader
    collector = get_collector("metrics")
    once, twice = collector.parse(scrape), collector.parse(doubled)
    assert twice.requests_running == once.requests_running == 8.0
    assert twice.prompt_tokens_total == once.prompt_tokens_total
    assert twice.histograms == once.histograms
    duplicated = [w for w in twice.warnings if "appears 2 times" in w]
    assert duplicated and len(duplicated) <= 11
    assert any("vllm:num_requests_running" in w for w in twice.warnings)


def test_distinct_label_sets_are_still_summed() -> None:
    text = 'vllm:num_requests_running{engine="0"} 3\nvllm:num_requests_running{engine="1"} 4\n'
    result = get_collector("metrics").parse(text)
    assert result.requests_running == 7 and result.warnings == ()


def test_hosts_say_they_are_composed() -> None:
    for host in ("nvsmi-exit0-timestamp-only", "first-look-nan-metrics-r1"):
        assert "Composed" in Path(HOSTS / host / "SOURCE.md").read_text()
