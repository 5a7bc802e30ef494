"""replica-metrics reads the samples of the shared `metrics` reader: real exposition variants (escaped
label values, timestamps, exemplars, OpenMetrics ``# EOF``, NaN/Inf, CRLF, HELP/TYPE order), the same
facts as `metrics` for every first-look fixture, and scrapes cut short or garbled never reading healthy."""

# ruff: noqa: E501 - metric lines are kept verbatim, one per source line

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nightowl.collectors.serving import metrics, replica_metrics
from nightowl.engine.runner import parse_output
from tests.helpers import ROOT

FIXTURES = sorted((ROOT / "fixtures" / "hosts").glob("first-look-*/replica-metrics.*.out"))
MODEL = 'model_name="Qwen/Qwen2.5-Coder-32B-Instruct"'
# A vLLM scrape as its API server serves it (the first-look fixtures' shape): prometheus_client's
# process metrics, prometheus-fastapi-instrumentator's counter, the engine's gauges.
HEAD = "# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.\n# TYPE process_start_time_seconds gauge\n"
HTTP_HELP = "# HELP http_requests_total Total number of requests by method, status and handler.\n# TYPE http_requests_total counter\n"
RUNNING = f"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{{MODEL}}} 8.0\n"
# A last line cut mid-label: prometheus_client's parser rejects the document, the per-line reader takes over.
CUT_TAIL = f"vllm:num_requests_waiting{{{MODEL[:12]}"


def facts(text: str) -> dict[str, Any]:
    """What the engine records for this output: never a traceback (a raise would be a parse error)."""
    out, error = parse_output(replica_metrics.COLLECTOR, text)
    assert error is None, error
    return out


def scrape(*lines: str, cut: bool = False) -> str:
    return "".join(line + "\n" for line in lines) + (CUT_TAIL if cut else "")


# --- variants: read whole by prometheus_client, and line by line when the scrape is cut short ---


@pytest.mark.parametrize("cut", [False, True], ids=["whole", "cut-short"])
def test_label_values_with_escaped_quotes_braces_and_commas(cut: bool) -> None:
    # The former scanner took a label set to end at its first "}": it missed the route template's
    # 5xx series below and read 3.0, two errors short.
    text = scrape(
        HEAD + "process_start_time_seconds 1700000500.0",
        HTTP_HELP + 'http_requests_total{handler="/v1/models/{model_id}",method="GET",status="5xx"} 2.0',
        'http_requests_total{handler="/say \\"hi\\", twice",method="POST",status="5xx"} 3.0',
        'http_requests_total{handler="/v1/completions",method="POST",status="2xx"} 40.0',
        RUNNING,
        cut=cut,
    )
    out = facts(text)
    assert out["http_5xx_total"] == 5.0 and out["process_start_time"] == 1700000500.0
    assert out["requests_running"] == 8.0 and len(out["warnings"]) == int(cut)


@pytest.mark.parametrize("cut", [False, True], ids=["whole", "cut-short"])
@pytest.mark.parametrize("stamp", ["1700000600000", "1700000600.125"], ids=["text-ms", "openmetrics-s"])
def test_samples_with_timestamps(stamp: str, cut: bool) -> None:
    text = scrape(
        HEAD + f"process_start_time_seconds 1700000500.0 {stamp}",
        HTTP_HELP + f'http_requests_total{{handler="/v1/completions",method="POST",status="2xx"}} 40.0 {stamp}',
        f'http_requests_total{{handler="/v1/completions",method="POST",status="5xx"}} 4.0 {stamp}',
        RUNNING,
        cut=cut,
    )
    out = facts(text)
    assert out["process_start_time"] == 1700000500.0  # the value, never the timestamp
    assert out["http_5xx_total"] == 4.0 and out["requests_running"] == 8.0
    assert len(out["warnings"]) == int(cut)  # only the cut line


OPENMETRICS = """\
# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.
# TYPE process_start_time_seconds gauge
# UNIT process_start_time_seconds seconds
process_start_time_seconds 1.7000005e+09
# HELP http_requests Total number of requests by method, status and handler.
# TYPE http_requests counter
http_requests_total{handler="/v1/completions",method="POST",status="2xx"} 40.0
http_requests_created{handler="/v1/completions",method="POST",status="2xx"} 1.7000005e+09
http_requests_total{handler="/v1/completions",method="POST",status="5xx"} 3.0 # {trace_id="4bf92f3577b34da6"} 1.0 1.7000006e+09
http_requests_created{handler="/v1/completions",method="POST",status="5xx"} 1.7000005e+09
# HELP vllm:num_requests_running Number of requests currently running on GPU.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="Qwen/Qwen2.5-Coder-32B-Instruct"} 8.0
# EOF
"""


@pytest.mark.parametrize("cut", [False, True], ids=["whole", "cut-short"])
def test_openmetrics_document_ending_in_eof(cut: bool) -> None:
    """prometheus_client's OpenMetrics exposition: counter families named without _total, a _created
    series per label set (its value is a time, never a count), an exemplar on the 5xx series, # EOF."""
    out = facts(OPENMETRICS + (CUT_TAIL if cut else ""))
    assert out["http_5xx_total"] == 3.0
    assert out["process_start_time"] == 1.7000005e9
    assert out["requests_running"] == 8.0 and out["engine"] == "vllm"
    assert len(out["warnings"]) == int(cut)  # the exemplar line is read line by line too


def test_crlf_line_ends_and_help_type_after_the_samples() -> None:
    text = (
        "process_start_time_seconds 1700000500.0\r\n"
        "# TYPE process_start_time_seconds gauge\r\n"
        "# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.\r\n"
        'http_requests_total{handler="/v1/completions",method="POST",status="5xx"} 6.0\r\n'
        "# HELP http_requests_total Total number of requests by method, status and handler.\r\n"
        "# TYPE http_requests_total counter\r\n"
    )
    out = facts(text)
    assert out["process_start_time"] == 1700000500.0 and out["http_5xx_total"] == 6.0


def test_status_codes_ungrouped_and_no_5xx_series_yet() -> None:
    ungrouped = scrape(
        HTTP_HELP + 'http_requests_total{handler="/v1/completions",method="POST",status="200"} 40.0',
        'http_requests_total{handler="/v1/completions",method="POST",status="503"} 2.0',
        'http_requests_total{handler="/health",method="GET",status="500"} 1.0',
    )
    assert facts(ungrouped)["http_5xx_total"] == 3.0
    # the instrumentator adds a label set on its first response: no 5xx series is zero errors
    ok_only = scrape(HTTP_HELP + 'http_requests_total{handler="/v1/completions",method="POST",status="2xx"} 40.0')
    assert facts(ok_only)["http_5xx_total"] == 0.0
    assert facts(scrape(RUNNING))["http_5xx_total"] is None  # not exported: unknown, not zero


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-Inf"])
def test_nan_and_inf_are_no_value(value: str) -> None:
    """A NaN start time would differ from itself in the next scrape (a restart that never was); a NaN
    5xx counter counts nothing and must not read as zero errors."""
    text = scrape(
        HEAD + f"process_start_time_seconds {value}",
        HTTP_HELP + 'http_requests_total{handler="/v1/completions",method="POST",status="2xx"} 40.0',
        f'http_requests_total{{handler="/v1/completions",method="POST",status="5xx"}} {value}',
    )
    out = facts(text)
    assert out["process_start_time"] is None and out["http_5xx_total"] is None
    # a NaN in another status's series leaves the 5xx count readable
    other = scrape(HTTP_HELP + f'http_requests_total{{status="2xx"}} {value}', 'http_requests_total{status="5xx"} 1.0')
    assert facts(other)["http_5xx_total"] == 1.0


# --- the same facts as before, for every fixture ------------------------------------------------


@pytest.mark.parametrize("path", FIXTURES, ids=[f"{p.parent.name}/{p.name}" for p in FIXTURES])
def test_the_metrics_facts_are_those_of_metrics(path: Path) -> None:
    text = path.read_text()
    out = facts(text)
    own = ("kind", "process_start_time", "http_5xx_total", "truncated", "truncated_bytes", "coverage", "normalised")
    assert {k: v for k, v in out.items() if k not in own} == {
        k: v for k, v in metrics.facts(metrics.parse(text)).items() if k != "kind"
    }
    assert out["kind"] == "replica-metrics"
    # some fixtures are a gateway's empty answer, or a scrape of NaN only (a NaN start is no start time)
    exported = "\nprocess_start_time_seconds " in text and "\nprocess_start_time_seconds NaN" not in text
    assert isinstance(out["process_start_time"], float) if exported else out["process_start_time"] is None
    assert isinstance(out["http_5xx_total"], float) if exported else out["http_5xx_total"] is None


# --- garbage and cut scrapes: warnings or no data, never a traceback, never a healthy fact -------

GARBAGE = {
    "empty": "",
    "html": "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body><center><h1>502 Bad Gateway</h1></center></body>\r\n</html>\r\n",
    "json": '{"object":"error","message":"Not Found","type":"NotFoundError","code":404}',
    "envoy": "upstream connect error or disconnect/reset before headers. reset reason: connection failure",
    "binary": "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\xed\x9d\xff\ufffd\ufffd",
    "http-line-garbled": 'http_requests_total{handler="/v1/completions",status="5xx"} n/a\nhttp_requests_total{status="2xx"} 3.0\n',
}


@pytest.mark.parametrize("text", GARBAGE.values(), ids=GARBAGE.keys())
def test_garbage_is_no_data(text: str) -> None:
    out = facts(text)
    assert out["kind"] == "replica-metrics" and out["has_samples"] is False
    assert out["process_start_time"] is None and out["http_5xx_total"] is None
    assert bool(out["warnings"]) == bool(text.strip())  # every unreadable line is recorded


def test_a_5xx_series_cut_short_is_unknown_not_zero() -> None:
    """Cut anywhere inside the 5xx line before its value, the count is unknown: reading 0.0 there (as
    the former scanner did) would hide the errors behind the 2xx series read just before."""
    text = (FIXTURES[0].parent / "replica-metrics.1.out").read_text()
    line = next(
        x for x in text.splitlines(keepends=True) if x.startswith("http_requests_total") and 'status="5xx"' in x
    )
    start = text.index(line)
    for cut in range(start + 1, start + line.rindex(" ") + 1):
        out = facts(text[:cut])
        assert out["http_5xx_total"] is None, text[start:cut]
        assert out["warnings"], text[start:cut]


def test_every_cut_of_a_scrape_parses() -> None:
    text = FIXTURES[0].read_text()
    for cut in range(0, len(text) + 1, 5):  # every 5th: a cut at each character is 5 times slower and finds no more
        out = facts(text[:cut])
        assert out["kind"] == "replica-metrics"
        assert out["http_5xx_total"] is None or out["http_5xx_total"] >= 0
