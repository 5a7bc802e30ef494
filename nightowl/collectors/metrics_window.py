"""`metrics-window`: a derived collector: the window comparison of two `metrics` scrapes.

It runs no command. It reads the facts of the scrapes a runbook already took, ``metrics`` (window
start) and ``metrics_after`` (window end, ``metrics:after`` after ``wait: window_seconds``), and
derives the per-component comparison of ``nightowl.serving.p99`` (baseline since the engine
started vs the incident window). The engine hands ``derive`` the input namespaces' facts; see the
lead's wiring of ``inputs`` / ``derive`` in the runner.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from nightowl.collectors.base import to_jsonable

KIND = "metrics-window"
INPUTS = ("metrics", "metrics_after")


def derive(inputs: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Facts of the two scrapes -> comparison facts (plain JSON), plus the rendered table."""
    from nightowl.serving import p99

    before, after = inputs["metrics"], inputs["metrics_after"]
    comparison = p99.compare(before, after)
    out: dict[str, Any] = to_jsonable(comparison)
    rows = p99.table(comparison)
    for shift in (
        "prompt_tokens_per_request",
        "generation_tokens_per_request",
        "prefix_cache_hit_rate",
        "running",
        "waiting",
        "kv_cache_usage",
    ):
        out[shift]["ratio"] = getattr(comparison, shift).ratio
    out.update(
        kind=KIND,
        engine=after.get("engine") or before.get("engine"),
        table=rows,
        table_text=p99.render_table(rows),
        engine_moved=bool(comparison.moved),
        has_window=any(row["incident_mean"] is not None for row in rows),
        thresholds={
            "regression_ratio": p99.REGRESSION_RATIO,
            "hit_rate_drop": p99.HIT_RATE_DROP,
            "min_change_seconds": p99.MIN_CHANGE_SECONDS,
        },
    )
    return out


@dataclass(frozen=True)
class DerivedCollector:
    """A collector computed from other collectors' facts instead of a command's output."""

    kind: str
    inputs: tuple[str, ...]
    derive: Callable[[Mapping[str, Mapping[str, Any]]], dict[str, Any]]
    commands: tuple[tuple[str, ...], ...] = ()
    timeout: float = 0.0
    invasive: bool = False
    description: str = ""

    def parse(self, text: str) -> Any:
        raise TypeError(f"{self.kind} is derived from {', '.join(self.inputs)}; it parses no output")

    def facts(self, result: Any) -> dict[str, Any]:
        return dict(result)


COLLECTOR = DerivedCollector(
    kind=KIND,
    inputs=INPUTS,
    derive=derive,
    description="per-component latency comparison of two metrics scrapes (baseline vs incident window)",
)
