"""`bench-serve`: the result block of a serving benchmark, in the formats operators keep.

* ``vllm bench serve`` and ``benchmarks/benchmark_serving.py`` (vLLM 0.4+): a block opened by
  ``====== Serving Benchmark Result ======`` with ``Label:   value`` rows and ``---Time to First
  Token---`` section rules (corpus pr18566, pr33743);
* SGLang ``python -m sglang.bench_serving``: the same block with a few rows of its own (``Backend``,
  ``Concurrency``, ``Mean E2E Latency (ms)``; corpus sglang pr9812);
* the 2023 ``benchmark_serving.py``: ``Throughput: 5.99 requests/s``, ``Average latency: 67.59 s``
  (corpus vllm issue 359), which has no TTFT or ITL;
* the JSON that ``--save-result`` writes (keys ``request_throughput``, ``p99_ttft_ms``, ...) [M:
  key names from benchmark_serving.py, no corpus sample].

Latencies are milliseconds. ``latency_ms`` maps each metric (``ttft``, ``tpot``, ``itl``, ``e2el``)
to its statistics: ``mean``, ``median``, ``std``, ``max`` and ``pNN`` for each percentile the run
printed (``--metric-percentiles 90,95,99`` adds rows; the default prints only P99). A value the
output does not show is null, never derived from another statistic.
"""

from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from nightowl import knowledge
from nightowl.collectors.base import Collector, number, registered, to_jsonable

KIND = "bench-serve"
LATENCY_METRICS = ("ttft", "tpot", "itl", "e2el")


class Row(NamedTuple):
    """A ``Label: value`` row of the result block: the field it fills and how its value reads."""

    field: str
    pattern: re.Pattern[str]
    source: str
    value: str  # text | integer | number


ROWS_FILE = "bench_serve_rows.csv"
VALUE_KINDS = ("text", "integer", "number")


@functools.cache
def rows() -> tuple[Row, ...]:
    """The scalar rows of the result block, from nightowl/knowledge/bench_serve_rows.csv (read once)."""
    found = []
    for line, entry in enumerate(knowledge.read_csv(ROWS_FILE, required=("field", "label", "value", "source")), 3):
        where = f"{ROWS_FILE}: line {line}"
        if entry["value"] not in VALUE_KINDS:
            raise knowledge.KnowledgeError(f"{where}: value {entry['value']!r} is not one of {', '.join(VALUE_KINDS)}")
        pattern = knowledge.compile_pattern(
            r"^\s*" + entry["label"] + r"\s*:\s*(?P<value>\S+)", where, ignore_case=True
        )
        found.append(Row(entry["field"], pattern, knowledge.sourced(entry, where, required=True), entry["value"]))
    return tuple(found)


# "Mean TTFT (ms):", "P99 ITL (ms):", "Median E2E Latency (ms):", "Mean E2EL (ms):"
_LATENCY = re.compile(
    r"^\s*(?P<stat>Mean|Median|Std|Max|Min|P\d+(?:\.\d+)?)\s+(?P<metric>TTFT|TPOT|ITL|E2EL|E2E Latency)"
    r"\s*\(ms\)\s*:\s*(?P<value>\S+)",
    re.IGNORECASE,
)
METRIC_NAMES = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2el": "e2el", "e2e latency": "e2el"}

# The 2023 benchmark_serving.py summary (corpus vllm issue 359); seconds, converted to ms.
LEGACY_ROWS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("duration_s", re.compile(r"^\s*Total time:\s*([\d.]+)\s*s\b")),
    ("request_throughput", re.compile(r"^\s*Throughput:\s*([\d.]+)\s*requests/s")),
    ("e2el_mean_s", re.compile(r"^\s*Average latency:\s*([\d.]+)\s*s\b")),
    ("latency_per_token_s", re.compile(r"^\s*Average latency per token:\s*([\d.]+)\s*s\b")),
    ("latency_per_output_token_s", re.compile(r"^\s*Average latency per output token:\s*([\d.]+)\s*s\b")),
)
_BANNER = re.compile(r"=+\s*Serving Benchmark Result\s*=+", re.IGNORECASE)
_JSON_LATENCY_KEY = re.compile(r"^(?P<stat>mean|median|std|max|min|p\d+(?:\.\d+)?)_(?P<metric>ttft|tpot|itl|e2el)_ms$")
JSON_KEYS = {  # --save-result keys [M: benchmark_serving.py]
    "completed": "successful_requests",
    "failed": "failed_requests",
    "duration": "duration_s",
    "total_input_tokens": "total_input_tokens",
    "total_output_tokens": "total_output_tokens",
    "request_throughput": "request_throughput",
    "request_goodput": "request_goodput",
    "request_goodput:": "request_goodput",
    "output_throughput": "output_token_throughput",
    "total_token_throughput": "total_token_throughput",
    "max_output_tokens_per_s": "peak_output_token_throughput",
    "max_concurrent_requests": "peak_concurrent_requests",
    "backend": "backend",
    "request_rate": "request_rate",
    "max_concurrency": "max_concurrency",
}


@dataclass(frozen=True)
class BenchResult:
    kind: str = KIND
    tool: str | None = None  # vllm-bench-serve | sglang-bench-serving | vllm-benchmark-legacy | json
    command: str | None = None
    backend: str | None = None
    request_rate: float | str | None = None
    max_concurrency: float | str | None = None
    successful_requests: int | None = None
    failed_requests: int | None = None
    duration_s: float | None = None
    total_input_tokens: int | None = None
    total_output_tokens: int | None = None
    request_throughput: float | None = None
    request_goodput: float | None = None
    input_token_throughput: float | None = None
    output_token_throughput: float | None = None
    peak_output_token_throughput: float | None = None
    peak_concurrent_requests: float | None = None
    total_token_throughput: float | None = None
    concurrency: float | None = None
    latency_ms: dict[str, dict[str, float]] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()


def _number(text: str) -> float | int | str:
    value = number(text)
    return text if value is None else value  # "inf" is a float; "not set" stays text


def _stat_name(stat: str) -> str:
    lowered = stat.lower()
    if lowered.startswith("p"):
        number = float(lowered[1:])
        return f"p{int(number)}" if number.is_integer() else f"p{number:g}".replace(".", "_")
    return lowered


def parse(text: str) -> BenchResult:
    """Benchmark output -> result; never raises, anything unread becomes a warning or null."""
    stripped = text.strip()
    if stripped.startswith("{"):
        return _parse_json(stripped)
    lines = text.splitlines()
    banner = next((i for i, line in enumerate(lines) if _BANNER.search(line)), None)
    if banner is None:
        return _parse_legacy(lines)
    values: dict[str, Any] = {}
    latency: dict[str, dict[str, float]] = {}
    warnings: list[str] = []
    for line in lines[banner + 1 :]:
        if re.match(r"^\s*=+\s*$", line):
            break  # closing rule of the block
        match = _LATENCY.match(line)
        if match:
            metric = METRIC_NAMES[match.group("metric").lower()]
            value = _number(match.group("value"))
            if isinstance(value, (int, float)):
                latency.setdefault(metric, {})[_stat_name(match.group("stat"))] = float(value)
            continue
        row = next((r for r in rows() if r.pattern.match(line)), None)
        if row is not None and row.field not in values:
            cell = line.split(":", 1)[1].strip()  # whole cell: "not set" is two words
            values[row.field] = cell if row.value == "text" else _number(cell)
    values = _typed(values, warnings)
    tool = "sglang-bench-serving" if "backend" in values or "concurrency" in values else "vllm-bench-serve"
    return BenchResult(
        tool=tool, command=_command(lines[:banner]), latency_ms=latency, warnings=tuple(warnings), **values
    )


def _typed(values: dict[str, Any], warnings: list[str]) -> dict[str, Any]:
    reads = {row.field: row.value for row in rows()}
    out: dict[str, Any] = {}
    for name, value in values.items():
        if reads.get(name) == "text":
            out[name] = value
        elif name in ("request_rate", "max_concurrency"):
            # "inf" (all requests at once) and "not set" stay text: JSON has no infinity
            out[name] = (
                value
                if isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))
                else str(value).lower()
            )
        elif isinstance(value, str):
            warnings.append(f"{name}: not a number: {value!r}")
        else:
            out[name] = int(value) if reads.get(name) == "integer" else float(value)
    return out


def _command(lines: list[str]) -> str | None:
    for line in reversed(lines):
        if re.search(r"\b(?:vllm bench serve|benchmark_serving\.py|bench_serving)\b", line):
            return line.strip()[:400]
    return None


def _parse_legacy(lines: list[str]) -> BenchResult:
    found: dict[str, float] = {}
    for line in lines:
        for name, pattern in LEGACY_ROWS:
            match = pattern.match(line)
            if match and name not in found:
                found[name] = float(match.group(1))
    if not found:
        return BenchResult(
            warnings=("no 'Serving Benchmark Result' block or legacy summary found",)
            if any(line.strip() for line in lines)
            else ()
        )
    latency: dict[str, dict[str, float]] = {}
    if "e2el_mean_s" in found:
        latency["e2el"] = {"mean": round(found["e2el_mean_s"] * 1000, 6)}
    namespace = next((line for line in lines if line.startswith("Namespace(")), None)
    rate = re.search(r"request_rate=([\d.]+|inf)", namespace or "")
    return BenchResult(
        tool="vllm-benchmark-legacy",
        command=namespace[:400] if namespace else None,
        request_rate=(float(rate.group(1)) if rate.group(1) != "inf" else "inf") if rate else None,
        duration_s=found.get("duration_s"),
        request_throughput=found.get("request_throughput"),
        latency_ms=latency,
        warnings=("legacy format: no TTFT, TPOT or ITL",),
    )


def _parse_json(text: str) -> BenchResult:
    try:
        data = json.loads(text.splitlines()[0] if "\n" in text and not text.rstrip().endswith("}") else text)
    except json.JSONDecodeError as exc:
        return BenchResult(warnings=(f"JSON result did not load: {exc}",))
    if not isinstance(data, dict):
        return BenchResult(warnings=("JSON result is not an object",))
    values: dict[str, Any] = {}
    latency: dict[str, dict[str, float]] = {}
    for key, value in data.items():
        match = _JSON_LATENCY_KEY.match(key)
        if match and isinstance(value, (int, float)):
            latency.setdefault(match.group("metric"), {})[_stat_name(match.group("stat"))] = float(value)
        elif key in JSON_KEYS and value is not None:
            values[JSON_KEYS[key]] = value
    warnings: list[str] = []
    return BenchResult(tool="json", latency_ms=latency, warnings=tuple(warnings), **_typed(values, warnings))


def facts(result: BenchResult) -> dict[str, Any]:
    """Contract JSON plus `ttft_p99_ms`, `itl_p99_ms`, `tpot_mean_ms` conveniences and `requests_total`."""
    data: dict[str, Any] = to_jsonable(result)
    for metric in LATENCY_METRICS:
        stats = result.latency_ms.get(metric, {})
        for stat in ("mean", "median", "p95", "p99"):
            data[f"{metric}_{stat}_ms"] = stats.get(stat)
    if result.successful_requests is not None:
        data["requests_total"] = result.successful_requests + (result.failed_requests or 0)
    else:
        data["requests_total"] = None
    return data


COLLECTOR = Collector(**registered(KIND), commands=(("cat", "--", "{bench_result_file}"),), parse=parse, facts=facts)
