"""`metrics-window`: a derived collector: the window comparison of two `metrics` scrapes.

It runs no command. It reads the facts of the scrapes a runbook already took, ``metrics`` (window
start) and ``metrics_after`` (window end, ``metrics:after`` after ``wait: window_seconds``), and
derives the per-component comparison of ``nightowl.llmperf.p99`` (baseline since the engine
started vs the incident window). The engine hands ``derive`` the input namespaces' facts; see the
lead's wiring of ``inputs`` / ``derive`` in the runner.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nightowl.collectors.base import DerivedCollector, registered, to_jsonable

KIND = "metrics-window"
INPUTS = ("metrics", "metrics_after")


def derive(inputs: Mapping[str, Mapping[str, Any]], params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Facts of the two scrapes -> comparison facts (plain JSON), plus the rendered table.

    With the parameters ``model_config`` (a config.json on this machine) and ``gpu`` (e.g. H100-SXM),
    the table also shows the decode floor next to the measured inter-token latency, so "decode is
    slow" is said only when it is far above physics.
    """
    from nightowl.llmperf import p99

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
        decode_floor=_decode_floor(rows, after, params or {}),
        has_window=any(row["incident_mean"] is not None for row in rows),
        thresholds={
            "regression_ratio": p99.REGRESSION_RATIO,
            "hit_rate_drop": p99.HIT_RATE_DROP,
            "min_change_seconds": p99.MIN_CHANGE_SECONDS,
        },
    )
    if out["decode_floor"] and out["decode_floor"].get("line"):
        out["table_text"] = f"{out['table_text']}; {out['decode_floor']['line']}"
    return out


def _decode_floor(rows: list[dict[str, Any]], after: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """The decode-step floor for the incident's batch, and measured ITL as a multiple of it."""
    config_path, gpu = params.get("model_config"), params.get("gpu")
    if not config_path or not gpu:
        return {}
    import json
    from pathlib import Path

    from nightowl.llmperf.floor import decode_floor

    batch = max(1, round(after.get("requests_running") or 1))
    context = int(params.get("context") or 2048)
    try:
        config = json.loads(Path(str(config_path)).read_text())
        floor = decode_floor(config, str(gpu), tp=int(params.get("tp") or 1), batch=batch, context=context)
    except (OSError, ValueError, KeyError) as exc:
        return {"error": f"decode floor not computed: {exc}"}
    itl = next((r["incident_mean"] for r in rows if r["component"] == "itl"), None)
    floor_ms = floor.step_seconds * 1000
    ratio = itl / floor.step_seconds if itl else None
    line = f"decode floor {floor_ms:.2f} ms/step ({gpu}, TP {floor.tp}, batch {batch}, context {context})"
    if itl and ratio is not None:
        line += f", measured ITL {itl * 1000:.2f} ms = x{ratio:.1f} the floor"
    return {"step_ms": round(floor_ms, 3), "batch": batch, "context": context, "itl_ratio": ratio, "line": line}


COLLECTOR = DerivedCollector(**registered(KIND), inputs=INPUTS, derive=derive)
