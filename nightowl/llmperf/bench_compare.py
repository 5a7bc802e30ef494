"""The per-release regression gate: a benchmark result against the last release's baseline.

Default limits (the issue's handbook routine): throughput down more than 10% blocks, TTFT p95 up
more than 20% blocks, ITL p99 up more than 15% blocks, any failed request or preemption blocks.
``vllm bench serve`` prints only P99 unless run with ``--metric-percentiles``; when the asked-for
percentile is missing from either run, the gate compares the next tail both runs show (P99, then
P95) and says so in the row, rather than silently passing. A gated metric neither run shows is
``not compared``: a note, never a pass in disguise. Other statistics are listed as ``info``.

Pure: takes parsed results (``collectors.serving.bench_serve``'s ``BenchResult``, or anything that carries the
same fields: ``BenchRun``), returns rows; the CLI prints them. It names only the fields it reads, so this
package of serving arithmetic does not import the collectors that import it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

FALLBACK_PERCENTILES = ("p99", "p95", "p90")
# (metric, statistic, label) listed for information only
INFO_ROWS: tuple[tuple[str, str, str], ...] = (
    ("ttft", "mean", "TTFT mean (ms)"),
    ("ttft", "median", "TTFT median (ms)"),
    ("tpot", "mean", "TPOT mean (ms)"),
    ("tpot", "p99", "TPOT p99 (ms)"),
    ("itl", "mean", "ITL mean (ms)"),
    ("itl", "median", "ITL median (ms)"),
    ("e2el", "mean", "E2E latency mean (ms)"),
)


class BenchRun(Protocol):
    """The fields of a parsed benchmark run (``bench_serve.BenchResult``) the gate reads."""

    @property
    def tool(self) -> str | None: ...
    @property
    def command(self) -> str | None: ...
    @property
    def request_rate(self) -> float | str | None: ...
    @property
    def max_concurrency(self) -> float | str | None: ...
    @property
    def successful_requests(self) -> int | None: ...
    @property
    def failed_requests(self) -> int | None: ...
    @property
    def request_throughput(self) -> float | None: ...
    @property
    def output_token_throughput(self) -> float | None: ...
    @property
    def total_token_throughput(self) -> float | None: ...
    @property
    def latency_ms(self) -> dict[str, dict[str, float]]: ...


@dataclass(frozen=True)
class Limits:
    throughput_drop_pct: float = 10.0
    ttft_rise_pct: float = 20.0
    itl_rise_pct: float = 15.0
    ttft_percentile: str = "p95"
    itl_percentile: str = "p99"
    max_failed_requests: int = 0
    max_preemptions: int = 0


@dataclass(frozen=True)
class Row:
    metric: str
    baseline: float | None
    current: float | None
    change_pct: float | None
    limit: str  # what the gate allows, e.g. "-10%", "+20%", "<= 0"; "" for info rows
    status: str  # ok | block | not-compared | info
    note: str = ""


@dataclass(frozen=True)
class Comparison:
    blocked: bool
    rows: tuple[Row, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def gated_rows_compared(self) -> int:
        return sum(1 for row in self.rows if row.status in ("ok", "block"))


def change_pct(baseline: float | None, current: float | None) -> float | None:
    if baseline is None or current is None or baseline == 0:
        return None
    return (current - baseline) / baseline * 100.0


def _throughput_row(label: str, baseline: float | None, current: float | None, limits: Limits) -> Row:
    change = change_pct(baseline, current)
    if change is None:
        return Row(
            label, baseline, current, None, f"-{limits.throughput_drop_pct:g}%", "not-compared", "not in both results"
        )
    status = "block" if change < -limits.throughput_drop_pct else "ok"
    return Row(label, baseline, current, change, f"-{limits.throughput_drop_pct:g}%", status)


def _tail_row(metric: str, wanted: str, rise_pct: float, baseline: BenchRun, current: BenchRun) -> Row:
    base_stats, cur_stats = baseline.latency_ms.get(metric, {}), current.latency_ms.get(metric, {})
    order = (wanted, *(p for p in FALLBACK_PERCENTILES if p != wanted))
    used = next((p for p in order if base_stats.get(p) is not None and cur_stats.get(p) is not None), None)
    label = f"{metric.upper()} {wanted} (ms)"
    if used is None:
        return Row(label, None, None, None, f"+{rise_pct:g}%", "not-compared", f"no {metric.upper()} tail in both")
    note = "" if used == wanted else f"{wanted} not printed by both runs; compared {used}"
    label = f"{metric.upper()} {used} (ms)"
    change = change_pct(base_stats[used], cur_stats[used])
    status = "block" if change is not None and change > rise_pct else "ok"
    return Row(label, base_stats[used], cur_stats[used], change, f"+{rise_pct:g}%", status, note)


def _count_row(label: str, baseline: float | None, current: float | None, allowed: int, missing: str) -> Row:
    if current is None:
        return Row(label, baseline, None, None, f"<= {allowed}", "not-compared", missing)
    status = "block" if current > allowed else "ok"
    return Row(label, baseline, current, None, f"<= {allowed}", status)


def _comparability(baseline: BenchRun, current: BenchRun) -> list[str]:
    """Differences in how the two runs were driven: the numbers may differ for that reason alone."""
    notes = []
    pairs = (
        ("request count", baseline.successful_requests, current.successful_requests),
        ("request rate", baseline.request_rate, current.request_rate),
        ("max concurrency", baseline.max_concurrency, current.max_concurrency),
        ("benchmark command", baseline.command, current.command),
    )
    for name, before, after in pairs:
        if before is not None and after is not None and before != after:
            notes.append(f"{name} differs: baseline {before!r}, current {after!r}")
    if baseline.tool != current.tool:
        notes.append(f"different tools: baseline {baseline.tool}, current {current.tool}")
    return notes


def compare(
    baseline: BenchRun,
    current: BenchRun,
    limits: Limits | None = None,
    current_preemptions: float | None = None,
    baseline_preemptions: float | None = None,
) -> Comparison:
    """Gate ``current`` against ``baseline``; ``*_preemptions`` come from engine metrics, not the benchmark."""
    limits = limits or Limits()
    rows = [
        _throughput_row("request throughput (req/s)", baseline.request_throughput, current.request_throughput, limits),
        _throughput_row(
            "output token throughput (tok/s)", baseline.output_token_throughput, current.output_token_throughput, limits
        ),
        _tail_row("ttft", limits.ttft_percentile, limits.ttft_rise_pct, baseline, current),
        _tail_row("itl", limits.itl_percentile, limits.itl_rise_pct, baseline, current),
        _count_row(
            "failed requests",
            baseline.failed_requests,
            current.failed_requests,
            limits.max_failed_requests,
            "the output has no 'Failed requests' row",
        ),
        _count_row(
            "preemptions",
            baseline_preemptions,
            current_preemptions,
            limits.max_preemptions,
            "not measured: give the engine's metrics scraped before and after the run",
        ),
    ]
    rows += _info_rows(baseline, current)
    blocked = any(row.status == "block" for row in rows)
    return Comparison(blocked=blocked, rows=tuple(rows), notes=tuple(_comparability(baseline, current)))


def _info_rows(baseline: BenchRun, current: BenchRun) -> list[Row]:
    rows = [
        Row(
            "total token throughput (tok/s)",
            baseline.total_token_throughput,
            current.total_token_throughput,
            change_pct(baseline.total_token_throughput, current.total_token_throughput),
            "",
            "info",
        )
    ]
    for metric, stat, label in INFO_ROWS:
        before = baseline.latency_ms.get(metric, {}).get(stat)
        after = current.latency_ms.get(metric, {}).get(stat)
        if before is not None or after is not None:
            rows.append(Row(label, before, after, change_pct(before, after), "", "info"))
    return rows


def _cell(value: float | None) -> str:
    if value is None:
        return "-"
    if isinstance(value, int):
        return f"{value:,d}"
    return f"{value:,.2f}" if abs(value) < 1e6 else f"{value:,.0f}"


def render_table(comparison: Comparison) -> str:
    """Plain-text table of what moved, blocking rows marked, then the notes and the decision."""
    header = ("METRIC", "BASELINE", "CURRENT", "CHANGE", "LIMIT", "STATUS")
    table = [header]
    for row in comparison.rows:
        change = f"{row.change_pct:+.1f}%" if row.change_pct is not None else "-"
        status = row.status.upper() if row.status == "block" else row.status
        table.append((row.metric, _cell(row.baseline), _cell(row.current), change, row.limit or "-", status))
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip() for line in table]
    lines += [f"  note: {row.metric}: {row.note}" for row in comparison.rows if row.note]
    lines += [f"  note: {note}" for note in comparison.notes]
    blocking = [row.metric for row in comparison.rows if row.status == "block"]
    lines.append("")
    lines.append(f"BLOCK: {', '.join(blocking)}" if blocking else "PASS: no gated metric moved past its limit")
    return "\n".join(lines)


def to_json(comparison: Comparison) -> dict[str, Any]:
    return {
        "blocked": comparison.blocked,
        "rows": [row.__dict__ for row in comparison.rows],
        "notes": list(comparison.notes),
    }
