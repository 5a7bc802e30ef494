"""`nightowl bench compare BASELINE CURRENT`: the per-release benchmark regression gate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from nightowl.cli.common import TEXT_JSON_OPTION
from nightowl.cli.exit import ExitStatus

BENCH_EXIT_HELP = """\b
Exit status:
  0    no gated metric moved past its limit
  1    the gate blocks (a limit was crossed, a request failed or was preempted)
  2    unreadable file, or nothing the two results both show could be compared"""

FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError as exc:
        raise click.ClickException(f"cannot read {path}: {exc}") from exc


def _percentile(value: float) -> str:
    return f"p{value:g}".replace(".", "_")


def _preemptions(before: Path | None, after: Path | None) -> float | None:
    """Preemptions during the run from two scrapes of the engine's /metrics (after alone: since start)."""
    if after is None:
        return None
    from nightowl.collectors.serving.metrics import parse as parse_metrics

    total_after = parse_metrics(_read(after)).preemptions_total
    if total_after is None:
        return None
    total_before = parse_metrics(_read(before)).preemptions_total if before is not None else 0.0
    return total_after - (total_before or 0.0)


@click.group()
def bench() -> None:
    """Benchmark evidence: compare serving benchmark results (vllm bench serve, SGLang bench_serving)."""


@bench.command(epilog=BENCH_EXIT_HELP)
@click.argument("baseline", type=FILE)
@click.argument("current", type=FILE)
@click.option(
    "--max-throughput-drop",
    default=10.0,
    show_default=True,
    metavar="PCT",
    help="block when request or output-token throughput falls by more than this",
)
@click.option(
    "--max-ttft-rise",
    default=20.0,
    show_default=True,
    metavar="PCT",
    help="block when the TTFT tail rises by more than this",
)
@click.option(
    "--max-itl-rise",
    default=15.0,
    show_default=True,
    metavar="PCT",
    help="block when the ITL tail rises by more than this",
)
@click.option("--ttft-percentile", default=95.0, show_default=True, help="TTFT tail to gate on")
@click.option("--itl-percentile", default=99.0, show_default=True, help="ITL tail to gate on")
@click.option("--max-failed", default=0, show_default=True, help="failed requests allowed in CURRENT")
@click.option("--max-preemptions", default=0, show_default=True, help="preemptions allowed during CURRENT")
@click.option("--metrics-before", type=FILE, help="engine /metrics scraped before the CURRENT run")
@click.option("--metrics-after", type=FILE, help="engine /metrics scraped after the CURRENT run (preemptions)")
@TEXT_JSON_OPTION
def compare(
    baseline: Path,
    current: Path,
    max_throughput_drop: float,
    max_ttft_rise: float,
    max_itl_rise: float,
    ttft_percentile: float,
    itl_percentile: float,
    max_failed: int,
    max_preemptions: int,
    metrics_before: Path | None,
    metrics_after: Path | None,
    fmt: str,
) -> None:
    """Gate CURRENT against BASELINE (saved outputs of vllm bench serve, benchmark_serving.py, SGLang
    bench_serving, or their --save-result JSON) and print what moved.

    Blocks when throughput falls by more than 10%, the TTFT p95 rises by more than 20%, the ITL p99
    rises by more than 15%, or any request failed or was preempted (limits are options). When a run
    did not print the asked-for percentile, the next tail both runs show is compared and the table
    says so.
    """
    from nightowl.collectors.serving.bench_serve import parse
    from nightowl.llmperf.bench_compare import Limits, render_table, to_json
    from nightowl.llmperf.bench_compare import compare as run_compare

    limits = Limits(
        throughput_drop_pct=max_throughput_drop,
        ttft_rise_pct=max_ttft_rise,
        itl_rise_pct=max_itl_rise,
        ttft_percentile=_percentile(ttft_percentile),
        itl_percentile=_percentile(itl_percentile),
        max_failed_requests=max_failed,
        max_preemptions=max_preemptions,
    )
    results = {name: parse(_read(path)) for name, path in (("baseline", baseline), ("current", current))}
    for name, path in (("baseline", baseline), ("current", current)):
        if results[name].tool is None:  # a side with no result must not let the gate say PASS
            click.echo(f"nightowl: {name} {path}: no benchmark result recognised in it", err=True)
            raise SystemExit(ExitStatus.USAGE)
    comparison = run_compare(
        results["baseline"], results["current"], limits, current_preemptions=_preemptions(metrics_before, metrics_after)
    )
    if comparison.gated_rows_compared == 0:  # checked before printing: no PASS line for an empty gate
        click.echo(
            "nightowl: nothing both results show could be compared "
            f"(baseline: {results['baseline'].tool}, current: {results['current'].tool})",
            err=True,
        )
        raise SystemExit(ExitStatus.USAGE)
    if fmt == "json":
        payload: dict[str, Any] = to_json(comparison)
        payload["warnings"] = {name: list(result.warnings) for name, result in results.items()}
        click.echo(json.dumps(payload, indent=2))
    else:
        click.echo(render_table(comparison))
    raise SystemExit(ExitStatus.ACTION_NEEDED if comparison.blocked else ExitStatus.OK)
